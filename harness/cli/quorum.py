"""`kraftlab quorum describe --status|--replication`: what kafka-metadata-quorum.sh prints.

Both views come from the active controller (Kafka sends DescribeQuorum to the leader): the command
asks any answering controller who leads, then asks the leader. Voters are shown as `[1,2,3]` (the
3.8 format: kraftlab has no directory ids). `--human-readable` shows timestamps as "N ms ago".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.admin.client import AdminError
from harness.admin.describe_quorum import format_replication, format_status
from harness.cli.common import add_data_dir, data_dir_of
from harness.launcher import cluster as cl


def cmd_describe(args: argparse.Namespace) -> int:
    try:
        cluster = cl.ClusterFile.load(data_dir_of(args))
        client = cl.leader_client(cluster)
        if args.replication:
            print(format_replication(client.get_json("/quorum/replication"), args.human_readable))
        else:
            print(format_status(client.get_json("/quorum/status")))
    except (cl.ClusterError, AdminError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("quorum", help="describe the metadata quorum")
    verbs = parser.add_subparsers(dest="quorum_command", metavar="VERB")
    verbs.required = True
    describe = verbs.add_parser("describe", help="like kafka-metadata-quorum.sh describe")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true", help="leader, epoch, HW, lag, voters")
    which.add_argument("--replication", action="store_true", help="per-replica offsets and lag")
    describe.add_argument("--human-readable", action="store_true",
                          help="timestamps as 'N ms ago'")
    add_data_dir(describe)
    describe.set_defaults(handler=cmd_describe)

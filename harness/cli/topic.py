"""`kraftlab topic create|describe|list|delete` and `kraftlab elect-leaders`: topics from the
command line, through any node's admin API (docs/api.md).

Any node answers: a broker or a follower controller forwards to the active controller. While
there is no active controller (an election after a kill -9) the command retries on the next node
until `--timeout`, showing progress; a Kafka error (TOPIC_ALREADY_EXISTS, INVALID_*, ...) is
printed with its name and exits 1. `describe` prints kafka-topics.sh --describe lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from harness.cli.common import add_data_dir, admin_request, guarded
from harness.launcher import cluster as cl


def fail(status: int, data: Any) -> int:
    print(json.dumps(data) if isinstance(data, dict) else f"HTTP {status}: {data}", file=sys.stderr)
    return 1


def cmd_create(args: argparse.Namespace) -> int:
    body = {"name": args.name, "partitions": args.partitions,
            "replication_factor": args.replication_factor, "configs": cl.parse_overrides(args.config)}
    status, data = admin_request(args, "POST", "/topics", body)
    if status != 201:
        return fail(status, data)
    print(f"Created topic {args.name}.")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    path = f"/topics/{quote(args.name, safe='')}" if args.name else "/topics"
    status, data = admin_request(args, "GET", f"{path}?format=text")
    if status != 200:
        return fail(status, data)
    sys.stdout.write(data)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    status, data = admin_request(args, "GET", "/topics")
    if status != 200:
        return fail(status, data)
    for name in data:
        print(name)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    status, data = admin_request(args, "DELETE", f"/topics/{quote(args.name, safe='')}")
    if status != 200:
        return fail(status, data)
    print(f"Deleted topic {args.name}.")
    return 0


def cmd_elect(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"topic": args.topic, "election_type": args.election_type}
    if args.partition is not None:
        body["partition"] = args.partition
    status, data = admin_request(args, "POST", "/elect-leaders", body)
    if status != 200:
        return fail(status, data)
    failed = 0
    for r in data["results"]:
        tp = f"{r['topic']}-{r['partition']}"
        if r["error"] == "NONE":
            print(f"Successfully completed leader election ({args.election_type.upper()}) for "
                  f"partitions {tp}")
        elif r["error"] == "ELECTION_NOT_NEEDED":
            print(f"Valid replica already elected for partitions {tp}")
        else:
            failed += 1
            print(f"Error completing leader election ({args.election_type.upper()}) for "
                  f"partition: {tp}: {r['error']} {r['message']}".rstrip())
    return 1 if failed else 0


def _common(p: argparse.ArgumentParser) -> None:
    add_data_dir(p)
    p.add_argument("--node", type=int, help="node to ask (default: any, retried over all)")
    p.add_argument("--timeout", type=float, default=15.0,
                   help="seconds to keep retrying while no controller answers (default 15)")


def register(sub: Any) -> None:
    parser = sub.add_parser("topic", help="create, describe, list and delete topics")
    verbs = parser.add_subparsers(dest="topic_command", metavar="VERB")
    verbs.required = True
    create = verbs.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=int, required=True)
    create.add_argument("--replication-factor", type=int, required=True)
    create.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="topic config, e.g. min.insync.replicas=2")
    create.set_defaults(handler=guarded(cmd_create))
    describe = verbs.add_parser("describe", help="kafka-topics.sh --describe lines")
    describe.add_argument("name", nargs="?", help="topic (default: every topic)")
    describe.set_defaults(handler=guarded(cmd_describe))
    listing = verbs.add_parser("list", help="topic names")
    listing.set_defaults(handler=guarded(cmd_list))
    delete = verbs.add_parser("delete", help="delete a topic")
    delete.add_argument("name")
    delete.set_defaults(handler=guarded(cmd_delete))
    for p in (create, describe, listing, delete):
        _common(p)

    elect = sub.add_parser("elect-leaders", help="preferred or unclean leader election")
    elect.add_argument("--topic", required=True)
    elect.add_argument("--partition", type=int, help="one partition (default: all)")
    elect.add_argument("--election-type", choices=["preferred", "unclean"], required=True)
    _common(elect)
    elect.set_defaults(handler=guarded(cmd_elect))

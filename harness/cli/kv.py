"""`kraftlab kv get|put|cas|delete`: the cluster-config key/value space from the command line.

Talks to one controller's admin API (`--node ID`, default: the first that answers); a follower
forwards writes and linearizable reads to the leader. Prints the JSON answer; errors print the
Kafka error name and exit 1 (CAS_FAILED, KEY_NOT_FOUND included).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness.admin.client import AdminClient, AdminError
from harness.cli.common import add_data_dir, data_dir_of
from harness.launcher import cluster as cl


def pick_client(cluster: cl.ClusterFile, node_id: int | None) -> AdminClient:
    if node_id is not None:
        node = cluster.node(node_id)
        return AdminClient(node.host, node.admin_port)
    for node in cluster.nodes:
        client = AdminClient(node.host, node.admin_port, timeout_s=5.0)
        try:
            client.get_json("/health")
            return client
        except (AdminError, OSError):
            continue
    raise cl.ClusterError("no controller answers")


def cmd_kv(args: argparse.Namespace) -> int:
    try:
        client = pick_client(cl.ClusterFile.load(data_dir_of(args)), args.node)
        match args.kv_command:
            case "get":
                out = client.kv_get(args.key, args.consistency)
            case "put":
                out = client.kv_put(args.key, args.value)
            case "cas":
                expected = None if args.expected_absent else args.expected
                if expected is None and not args.expected_absent:
                    raise cl.ClusterError("give EXPECTED or --expected-absent")
                out = client.kv_cas(args.key, expected, args.value)
            case "delete":
                out = client.kv_delete(args.key)
            case other:
                raise AssertionError(other)
    except AdminError as exc:
        print(json.dumps(exc.body), file=sys.stderr)
        return 1
    except (cl.ClusterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("kv", help="read and write the cluster-config key/value space")
    verbs = parser.add_subparsers(dest="kv_command", metavar="VERB")
    verbs.required = True

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = verbs.add_parser(name, help=help_text)
        p.add_argument("key")
        p.add_argument("--node", type=int, help="controller to ask (default: first answering)")
        add_data_dir(p)
        p.set_defaults(handler=cmd_kv)
        return p

    get = verb("get", "read a key")
    get.add_argument("--consistency", choices=["linearizable", "local"], default="linearizable")
    put = verb("put", "write a key")
    put.add_argument("value")
    cas = verb("cas", "compare-and-set")
    cas.add_argument("expected", nargs="?")
    cas.add_argument("value")
    cas.add_argument("--expected-absent", action="store_true", help="succeed only if absent")
    verb("delete", "delete a key")

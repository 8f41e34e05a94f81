"""`kraftlab topic create|describe|list|delete` and `kraftlab elect-leaders`: topics from the
command line, through any node's admin API (docs/api.md).

Any node answers: a broker or a follower controller forwards to the active controller. While
there is no active controller (an election after a kill -9) the command retries on the next node
until `--timeout`, showing progress; a Kafka error (TOPIC_ALREADY_EXISTS, INVALID_*, ...) is
printed with its name and exits 1. `describe` prints kafka-topics.sh --describe lines; for a
replication.mode=raft topic, under each partition, its Raft group as the leader's broker sees it
(GET /partitions of every broker: leader, epoch, HW, each voter's role and lag) and a note that
min.insync.replicas does not apply.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from harness.admin.client import AdminClient, AdminError
from harness.cli.common import add_data_dir, admin_request, data_dir_of, guarded
from harness.launcher import cluster as cl
from partition.raft import MIN_INSYNC_REPLICAS_NOTE


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
    raft = [line.split("\t", 1)[0].removeprefix("Topic: ") for line in data.splitlines()
            if line.startswith("Topic: ") and "replication.mode=raft" in line]  # fmt: skip
    if not raft:
        sys.stdout.write(data)
        return 0
    rows = raft_rows(cl.ClusterFile.load(data_dir_of(args)), set(raft))
    for line in data.splitlines():
        print(line)
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if line.startswith("\t") and fields.get("Topic") in raft:
            print(raft_line(fields["Topic"], int(fields["Partition"]), rows))
        elif line.startswith("Topic: ") and fields.get("Topic") in raft:
            print(f"\tNote: {MIN_INSYNC_REPLICAS_NOTE} (replication.mode=raft)")
    return 0


def raft_rows(cluster: cl.ClusterFile, topics: set[str]) -> dict[tuple[str, int], list[Any]]:
    """GET /partitions of every broker that answers: the raft replicas' own views."""
    out: dict[tuple[str, int], list[Any]] = {}
    for node in cluster.brokers:
        client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
        try:
            rows = client.get_json("/partitions")
        except (AdminError, OSError):
            continue  # a stopped broker: its replica shows as the others see it
        finally:
            client.close()
        for row in rows:
            if row.get("replication_mode") == "raft" and row["topic"] in topics:
                row["broker"] = node.id
                out.setdefault((row["topic"], row["partition"]), []).append(row)
    return out


def raft_line(topic: str, partition: int, rows: dict[tuple[str, int], list[Any]]) -> str:
    """The Raft group of one partition as its leader sees it: leader, epoch, HW, and every
    voter's role and lag (only the leader knows its followers; without one, each replica's own
    role)."""
    seen = rows.get((topic, partition), [])
    if not seen:
        return "\t  Raft: no replica answered"
    leaders = [r for r in seen if r["role"] == "leader"]
    if leaders:
        lead = max(leaders, key=lambda r: r["leader_epoch"])
        voters = ", ".join(
            f"{v['node_id']} ({v['role']}" + ("" if v["role"] == "leader" or v["lag"] is None
                                              else f", lag {v['lag']}") + ")"
            for v in lead["voters"])  # fmt: skip
        return (f"\t  Raft: Leader: {lead['leader']}\tEpoch: {lead['leader_epoch']}\t"
                f"HighWatermark: {lead['high_watermark']}\tLogEndOffset: "
                f"{lead['log_end_offset']}\tVoters: {voters}\tAcksAllNeeds: "
                f"{lead['acks_all_needs']}")
    epoch = max(r["leader_epoch"] for r in seen)
    own = ", ".join(f"{r['broker']} ({r['role']})" for r in sorted(seen, key=lambda r: r["broker"]))
    return f"\t  Raft: Leader: none\tEpoch: {epoch}\tVoters: {own}"


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

"""`kraftlab group list|describe`: consumer groups, in the shape of kafka-consumer-groups.sh
(`--list`, `--describe --group G`), through the brokers' admin API (harness/admin/groups.py).

- list: every broker's GET /groups merged (each broker lists the groups it coordinates, as
  Kafka's ListGroups; the tool asks them all), one group per line (`--state`: with its state).
- describe: GET /groups/{group} on the group's coordinator (a broker that is not answers 421
  with the coordinator's id), plus the log end offset of each partition from its leader's
  GET /partitions (the high watermark: what a consumer can read, as Kafka's tool asks
  ListOffsets latest). One line per committed or assigned partition:

      GROUP  TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID

  A partition without a commit shows CURRENT-OFFSET and LAG "-", one without a member
  CONSUMER-ID, HOST and CLIENT-ID "-" (Kafka's tool does the same). With no member and no
  commit: "Consumer group 'G' has no active members." / "does not exist.".
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from urllib.parse import quote

from harness.admin.client import AdminClient
from harness.cli.common import add_data_dir, data_dir_of, guarded
from harness.launcher import cluster as cl

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
           "CONSUMER-ID", "HOST", "CLIENT-ID")  # fmt: skip
RETRY_ERRORS = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")


def _brokers(args: argparse.Namespace) -> list[cl.NodeEntry]:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    brokers = cluster.brokers
    if not brokers:
        raise cl.ClusterError("the cluster has no brokers (groups live on brokers)")
    return brokers


def _get(node: cl.NodeEntry, path: str) -> tuple[int, Any]:
    client = AdminClient(node.host, node.admin_port, timeout_s=5.0)
    try:
        return client.request("GET", path)
    finally:
        client.close()


def cmd_list(args: argparse.Namespace) -> int:
    groups: dict[str, str] = {}
    for node in _brokers(args):
        try:
            status, data = _get(node, "/groups")
        except OSError:
            continue  # a broker down: its groups move to the new leaders of their partitions
        if status == 200:
            groups.update({g["group"]: g["state"] for g in data["groups"]})
    for name in sorted(groups):
        print(f"{name:<40} {groups[name]}" if args.state else name)
    return 0


def _describe(args: argparse.Namespace) -> dict[str, Any] | None:
    """The group's description from its coordinator, following one 421 hint, retrying while it
    loads, until --timeout."""
    brokers = {b.id: b for b in _brokers(args)}
    path = f"/groups/{quote(args.group, safe='')}"
    deadline = time.monotonic() + args.timeout
    target = next(iter(brokers))
    last = ""
    while time.monotonic() < deadline:
        try:
            status, data = _get(brokers[target], path)
        except OSError as exc:
            last = f"broker {target}: {type(exc).__name__}"
            target = next((b for b in brokers if b != target), target)
            time.sleep(0.1)  # retry interval
            continue
        if status == 200:
            return dict(data)
        error = data.get("error") if isinstance(data, dict) else None
        if status == 421 and data.get("coordinator") in brokers:
            target = data["coordinator"]
            continue
        if error not in RETRY_ERRORS and status != 421:
            print(f"error: {data}", file=sys.stderr)
            return None
        last = f"broker {target}: {error}"
        time.sleep(0.1)  # retry interval
    print(f"error: no coordinator answered within {args.timeout:.0f} s ({last})", file=sys.stderr)
    return None


def _log_end_offsets(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """(topic, partition) -> high watermark, from each partition leader's GET /partitions."""
    out: dict[tuple[str, int], int] = {}
    for node in _brokers(args):
        try:
            status, rows = _get(node, "/partitions")
        except OSError:
            continue
        if status != 200:
            continue
        for r in rows:
            if r["role"] == "leader":
                out[(r["topic"], r["partition"])] = r["high_watermark"]
    return out


def describe_rows(d: dict[str, Any], ends: dict[tuple[str, int], int]) -> list[tuple[str, ...]]:
    """The kafka-consumer-groups --describe rows of one group description."""
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    for m in d["members"]:
        for a in m["assignment"]:
            owner[(a["topic"], a["partition"])] = m
    committed = {(o["topic"], o["partition"]): o["offset"] for o in d["offsets"]}
    rows = []
    for key in sorted(set(owner) | set(committed)):
        offset = committed.get(key)
        end = ends.get(key)
        m = owner.get(key)
        lag = "-" if offset is None or end is None or offset < 0 else str(max(0, end - offset))
        rows.append((d["group"], key[0], str(key[1]),
                     "-" if offset is None or offset < 0 else str(offset),
                     "-" if end is None else str(end), lag,
                     m["member_id"] if m else "-", m["host"] if m else "-",
                     m["client_id"] if m else "-"))  # fmt: skip
    return rows


def format_table(rows: list[tuple[str, ...]]) -> str:
    table = [COLUMNS, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in table)  # fmt: skip


def cmd_describe(args: argparse.Namespace) -> int:
    d = _describe(args)
    if d is None:
        return 1
    rows = describe_rows(d, _log_end_offsets(args))
    if not rows:
        exists = d["state"] != "Dead"
        print(f"Consumer group '{args.group}' "
              + ("has no active members." if exists else "does not exist."))  # fmt: skip
        return 0 if exists else 1
    if not d["members"]:
        print(f"Consumer group '{args.group}' has no active members.\n")
    print(format_table(rows))
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("group", help="consumer groups (kafka-consumer-groups --list/--describe)")
    verbs = parser.add_subparsers(dest="group_command", metavar="VERB")
    verbs.required = True
    listing = verbs.add_parser("list", help="every group of every broker")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    listing.set_defaults(handler=guarded(cmd_list))
    describe = verbs.add_parser("describe", help="a group's partitions, offsets, lag and members")
    describe.add_argument("group")
    describe.add_argument("--timeout", type=float, default=15.0,
                          help="seconds to keep retrying while the coordinator loads (default 15)")
    describe.set_defaults(handler=guarded(cmd_describe))
    for p in (listing, describe):
        add_data_dir(p)

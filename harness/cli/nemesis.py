"""`kraftlab nemesis`: faults on a running local cluster, by hand (docs/jepsen.md, "Nemeses").

    kraftlab nemesis isolate ID... [--clients | --clients-only]
    kraftlab nemesis partition A,B C,D [--unlisted group|connected] [--clients | --clients-only]
    kraftlab nemesis heal
    kraftlab nemesis status
    kraftlab nemesis kill|pause|resume|start ID
    kraftlab nemesis clock ID [--jump-ms J] [--rate R] | --reset

Every command acts on every node in DIR/cluster.json, controllers and brokers alike, through the
same surface the Jepsen nemesis uses (harness/jepsen/nemesis.py): `/nemesis/links` on each node's
admin API for the network, the launcher's PID-checked signals for processes.

Semantics (docs/api.md /nemesis/links, harness/net/transport.py LinkFilter):
- `isolate` and `partition` *replace* the link filters of every node (they do not add to what
  is in force): each names the whole network shape. Cuts are symmetric: both ends drop.
- Peers and clients are separate. By default only node-to-node traffic is cut (Raft, controller
  RPC, replica fetches, admin requests a node forwards), so clients still reach every node: a cut
  leader keeps answering producers. `--clients` also cuts client traffic (admin HTTP except
  /nemesis/*, native key/value and data clients) of the isolated nodes, or for `partition` of
  every group but the first (the clients sit with the first group). `--clients-only` cuts only
  that client traffic and leaves the peers connected.
- `partition`: nodes named in no group form one more group of their own (`--unlisted group`, the
  default: every node is on exactly one side), or stay connected to every group
  (`--unlisted connected`: a bridge).
- `heal` clears the filter of every node. A node that restarts comes back healed (filters live
  in memory). Exit code 1 if a running node did not take its filter.
- `clock` steps one node's clock and/or sets its rate (`/nemesis/clock`, harness/runtime/clock.py);
  `--reset` puts it back in step. A restarted node comes back in step.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, OutcomeUnknown
from harness.cli.common import add_data_dir, data_dir_of, guarded
from harness.jepsen.nemesis import Grudge, grudge_components, grudge_from_sides
from harness.launcher import cluster as cl


def parse_groups(specs: Sequence[str], known: Sequence[int]) -> list[list[int]]:
    """`["1,101", "2,3"]` -> [[1, 101], [2, 3]]; every id known and in one group only."""
    groups: list[list[int]] = []
    seen: set[int] = set()
    for spec in specs:
        group = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            try:
                node_id = int(part)
            except ValueError:
                raise cl.ClusterError(f"{part!r} in group {spec!r} is not a node id") from None
            if node_id not in known:
                raise cl.ClusterError(f"no node {node_id}; nodes are {sorted(known)}")
            if node_id in seen:
                raise cl.ClusterError(f"node {node_id} is in two groups")
            seen.add(node_id)
            group.append(node_id)
        if not group:
            raise cl.ClusterError(f"empty group {spec!r}")
        groups.append(group)
    return groups


def partition_grudge(nodes: Sequence[int], groups: list[list[int]], unlisted: str) -> Grudge:
    listed = {n for g in groups for n in g}
    rest = [n for n in nodes if n not in listed]
    if unlisted == "group" or not rest:
        return grudge_components(nodes, *groups, *([rest] if rest else []))
    side_of = {n: i for i, g in enumerate(groups) for n in g}
    return grudge_from_sides(
        nodes, lambda a, b: a not in side_of or b not in side_of or side_of[a] == side_of[b])


def bodies(nodes: Sequence[int], grudge: Grudge, clients_cut: set[int],
           clients_only: bool) -> dict[int, dict[str, Any]]:
    """The /nemesis/links body of every node (an empty filter where nothing is cut)."""
    return {n: {"drop": [] if clients_only else sorted(grudge.get(n, ())),
                "drop_clients": n in clients_cut} for n in nodes}


def apply(cluster: cl.ClusterFile, wanted: dict[int, dict[str, Any] | None]) -> int:
    """POST (or DELETE for None) each node's filter; print one line per node."""
    failed = 0
    for node_id, body in wanted.items():
        node = cluster.node(node_id)
        client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
        try:
            status, data = client.request("DELETE" if body is None else "POST",
                                          "/nemesis/links", body)
        except OSError as exc:
            running = cl.is_our_process(node.pid, node.config_file)
            failed += running
            what = "unreachable" if running else "not running"
            if isinstance(exc, OutcomeUnknown):
                what = "outcome unknown"  # sent, unanswered: the filter may be in place
            print(f"  {node.role} {node_id}: {what} ({type(exc).__name__})")
            continue
        finally:
            client.close()
        if status != 200:
            failed += 1
            print(f"  {node.role} {node_id}: HTTP {status} {data}")
        else:
            print(f"  {node.role} {node_id}: {describe(data)}")
    return 1 if failed else 0


def describe(links: dict[str, Any]) -> str:
    parts = []
    if links.get("drop"):
        parts.append("drops " + ",".join(map(str, links["drop"])))
    if links.get("drop_clients"):
        parts.append("drops clients")
    if links.get("delay_ms"):
        to = links.get("delay_to")
        parts.append(f"delays {links['delay_ms']} ms" + (f" to {to}" if to else ""))
    return "; ".join(parts) or "connected"


def clients_mode(args: argparse.Namespace) -> tuple[bool, bool]:
    """(cut clients, only clients)."""
    return bool(args.clients or args.clients_only), bool(args.clients_only)


def cmd_isolate(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    nodes = [n.id for n in cluster.nodes]
    targets = parse_groups([",".join(map(str, args.ids))], nodes)[0]
    with_clients, only = clients_mode(args)
    grudge = grudge_components(nodes, targets, [n for n in nodes if n not in targets])
    print(f"isolating {targets} from {'clients' if only else 'every other node'}"
          f"{' and from clients' if with_clients and not only else ''}")
    return apply(cluster, dict(bodies(nodes, grudge, set(targets) if with_clients else set(),
                                      only)))


def cmd_partition(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    nodes = [n.id for n in cluster.nodes]
    groups = parse_groups(args.groups, nodes)
    rest = [n for n in nodes if all(n not in g for g in groups)]
    if len(groups) + (1 if rest and args.unlisted == "group" else 0) < 2:
        raise cl.ClusterError("a partition needs two groups (or unlisted nodes as a group)")
    with_clients, only = clients_mode(args)
    grudge = partition_grudge(nodes, groups, args.unlisted)
    shown = [",".join(map(str, g)) for g in groups]
    if rest:
        shown.append(",".join(map(str, rest)) + (" (unlisted)" if args.unlisted == "group"
                                                 else " (unlisted, connected to all)"))
    print("partition: " + " | ".join(shown))
    cut = set() if not with_clients else {
        n for n in nodes if n not in groups[0]
        and (args.unlisted == "group" or n not in rest)}
    if with_clients:
        print(f"clients sit with group {','.join(map(str, groups[0]))}: "
              f"{sorted(cut)} drop client traffic")
    return apply(cluster, dict(bodies(nodes, grudge, cut, only)))


def cmd_heal(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    print("healing every node's links")
    return apply(cluster, {n.id: None for n in cluster.nodes})


def cmd_status(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    print(f"{'NodeId':<7} {'Role':<11} {'Pid':<8} {'Process':<9} Links")
    for node in cluster.nodes:
        alive = cl.is_our_process(node.pid, node.config_file)
        state = "running" if alive else "stopped"
        if alive and _proc_state(node.pid) == "T":
            state = "paused"
        links = "-"
        if alive and state != "paused":
            client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
            try:
                status, data = client.request("GET", "/nemesis/links")
                links = describe(data) if status == 200 else f"HTTP {status}"
            except OSError as exc:
                links = f"unreachable ({type(exc).__name__})"
            finally:
                client.close()
        print(f"{node.id:<7} {node.role:<11} {node.pid or '-'!s:<8} {state:<9} {links}")
    return 0


def _proc_state(pid: int | None) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def cmd_process(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args).resolve()
    cluster = cl.ClusterFile.load(data_dir)
    node = cluster.node(args.id)
    match args.nemesis_command:
        case "kill":
            if not cl.stop_node(node, force=True, timeout_s=5.0):
                print(f"error: {node.role} {node.id} survived SIGKILL?", file=sys.stderr)
                return 1
            print(f"killed {node.role} {node.id} (pid {node.pid})")
            node.pid = None
            cluster.save(data_dir)
        case "pause" | "resume":
            sig = signal.SIGSTOP if args.nemesis_command == "pause" else signal.SIGCONT
            if not cl.signal_node(node, sig):
                print(f"error: {node.role} {node.id} is not running", file=sys.stderr)
                return 1
            print(f"{args.nemesis_command}d {node.role} {node.id} (pid {node.pid})")
        case "start":
            cl.start_node(cluster, data_dir, node)
            print(f"started {node.role} {node.id} (pid {node.pid})")
    return 0


def cmd_clock(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    node = cluster.node(args.id)
    body: dict[str, Any] = {}
    if args.jump_ms is not None:
        body["jump_ms"] = args.jump_ms
    if args.rate is not None:
        body["rate"] = args.rate
    if bool(body) == args.reset:
        print("error: give --jump-ms and/or --rate, or --reset", file=sys.stderr)
        return 2
    client = AdminClient(node.host, node.admin_port, timeout_s=2.0)
    try:
        status, data = (client.request("DELETE", "/nemesis/clock") if args.reset
                        else client.request("POST", "/nemesis/clock", body))
    finally:
        client.close()
    if status != 200:
        print(f"error: {node.role} {node.id}: HTTP {status} {data}", file=sys.stderr)
        return 1
    print(f"{node.role} {node.id}: clock skew {data['skew_ms']:+.0f} ms, rate {data['rate']}")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("nemesis", help="cut links, kill, pause nodes of a running cluster")
    verbs = parser.add_subparsers(dest="nemesis_command", metavar="VERB")
    verbs.required = True

    def verb(name: str, fn: Any, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = verbs.add_parser(name, help=help_text)
        add_data_dir(p)
        p.set_defaults(handler=guarded(fn))
        return p

    def client_flags(p: argparse.ArgumentParser) -> None:
        g = p.add_mutually_exclusive_group()
        g.add_argument("--clients", action="store_true",
                       help="also cut client connections (admin HTTP, native clients)")
        g.add_argument("--clients-only", action="store_true",
                       help="cut only client connections; peers stay connected")

    iso = verb("isolate", cmd_isolate, "cut these nodes from every other node (replaces the "
               "filters in force; clients still reach them unless --clients)")
    iso.add_argument("ids", type=int, nargs="+", metavar="ID")
    client_flags(iso)
    part = verb("partition", cmd_partition, "split the nodes into groups that cannot reach "
                "each other, e.g. `partition 1,101 2,3,102`")
    part.add_argument("groups", nargs="+", metavar="IDS", help="comma-separated node ids")
    part.add_argument("--unlisted", choices=("group", "connected"), default="group",
                      help="nodes in no group: one more group (default), or connected to all")
    client_flags(part)
    verb("heal", cmd_heal, "clear the link filters of every node")
    verb("status", cmd_status, "show every node's process state and current link filter")
    for name, help_text in (("kill", "SIGKILL one node (kill -9)"),
                            ("pause", "SIGSTOP one node"), ("resume", "SIGCONT one node"),
                            ("start", "start a stopped or killed node again")):
        verb(name, cmd_process, help_text).add_argument("id", type=int)
    clock = verb("clock", cmd_clock, "step one node's clock (--jump-ms, negative: back), set "
                 "its rate, or --reset it")
    clock.add_argument("id", type=int)
    clock.add_argument("--jump-ms", type=int, default=None, metavar="J")
    clock.add_argument("--rate", type=float, default=None, metavar="R")
    clock.add_argument("--reset", action="store_true", help="back in step with the machine")

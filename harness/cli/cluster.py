"""`kraftlab cluster up|status|down|kill|pause|resume|restart`: the minimal local launcher's command line.

`up` lays out (or reuses) DIR, starts every controller and broker detached, writes
DIR/cluster.json and waits, showing progress, until every controller names the same leader and
every broker is registered and unfenced; it refuses to start over a running cluster. `status`
prints one row per node, then the fenced brokers and the partitions offline / under-replicated /
under-min-ISR (from GET /cluster `partition_health`). `down` stops gracefully (SIGTERM: the node resigns with EndQuorumEpoch and exits) or with
--force (SIGKILL). `kill ID` is SIGKILL by recorded PID; `restart ID` stops then starts one node and
waits until it agrees on the leader (a broker: until its new registration, a higher broker epoch
than the one it left, is unfenced). Exit code 0 means success.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from harness.cli.common import add_data_dir, data_dir_of, guarded, progress
from harness.cli.config import plan_overrides
from harness.cli.logs import cmd_logs as show_logs
from harness.launcher import cluster as cl


def print_status(cluster: cl.ClusterFile) -> None:
    views = cl.quorum_view(cluster)
    print(f"cluster {cluster.cluster_id}")
    broker_state: dict[int, str] = {}
    registrations: dict[str, Any] | None = None
    if cluster.brokers:
        registrations = cl.broker_view(cluster)
        for b in (registrations or {}).get("brokers", []):
            broker_state[b["id"]] = (
                "shutdown" if b.get("in_controlled_shutdown") else
                "fenced" if b["fenced"] else "unfenced"
            ) + f" epoch {b['epoch']}"
    print(f"{'NodeId':<7} {'Role':<11} {'Pid':<8} {'Rpc':<6} {'Admin':<6} {'Kafka':<6} {'Leader':<7} "
          f"{'Epoch':<6} {'HighWatermark':<14} LogEndOffset")
    for node in cluster.nodes:
        alive = cl.is_our_process(node.pid, node.config_file)
        view: dict[str, Any] | None = views.get(node.id)
        if view is None:
            state = "running?" if alive else "stopped"
            known = f"  ({broker_state[node.id]})" if node.id in broker_state else ""
            print(f"{node.id:<7} {state:<11} {node.pid or '-'!s:<8} {node.rpc_port:<6} "
                  f"{node.admin_port:<6} {node.kafka_port or '-'!s:<6} -{known}")
            continue
        role = view.get("role", "?")
        extra = ""
        if node.role == "broker":
            role = "broker"
            extra = f"  ({broker_state.get(node.id, 'not registered')})"
        print(f"{node.id:<7} {role:<11} {node.pid or '-'!s:<8} {node.rpc_port:<6} "
              f"{node.admin_port:<6} {node.kafka_port or '-'!s:<6} "
              f"{view.get('leader_id')!s:<7} {view.get('leader_epoch')!s:<6} "
              f"{view.get('high_watermark')!s:<14} {view.get('log_end_offset')}{extra}")
    if cluster.brokers:
        print_health(registrations)


def print_health(view: dict[str, Any] | None) -> None:
    """The summary under the table: fenced brokers and partitions offline / under-replicated /
    under-min-ISR (Kafka's definitions, computed by the answering node from its metadata image:
    harness/runtime/status.py `partition_health`), each naming up to 10 partitions."""
    if view is None:
        print("partitions: unknown (no node answered GET /cluster)")
        return
    fenced = [b["id"] for b in view.get("brokers", []) if b.get("fenced")]
    print(f"fenced brokers: {fenced if fenced else 'none'}")
    features = view.get("features") or {}
    if features:  # finalized in the metadata log (e.g. KIP-966's eligible.leader.replicas.version)
        print("features: " + ", ".join(f"{k}={v}" for k, v in sorted(features.items())))
    health = view.get("partition_health")
    if health is None:
        return
    print(f"partitions: {health['total']} total, {len(health['offline'])} offline, "
          f"{len(health['under_replicated'])} under-replicated, "
          f"{len(health['under_min_isr'])} under-min-ISR, {len(health['at_min_isr'])} at-min-ISR")
    for label, key in (("offline", "offline"), ("under-replicated", "under_replicated"),
                       ("under-min-ISR", "under_min_isr")):
        names = health[key]
        if names:
            more = f" (+{len(names) - 10} more)" if len(names) > 10 else ""
            print(f"  {label}: {' '.join(names[:10])}{more}")


def cmd_up(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args)
    overrides = cl.parse_overrides(args.config)
    # Unknown keys, bad values, topic keys, unknown node ids: refused before anything starts.
    plan = plan_overrides(overrides, cl.layout_of(args.controllers or 3, args.brokers or 0))
    path = cl.ClusterFile.path_in(data_dir)
    if path.exists():
        cluster = cl.ClusterFile.load(data_dir)
        running = cl.running_nodes(cluster)
        if running:
            print(f"error: a cluster is already running in {data_dir} (nodes "
                  f"{[n.id for n in running]}); use `kraftlab cluster status` or "
                  f"`kraftlab cluster down`", file=sys.stderr)
            return 1
        if overrides or (args.controllers and args.controllers != len(cluster.controllers)) or (
            args.brokers is not None and args.brokers != len(cluster.brokers)
        ):
            print(f"error: {path} describes a stopped cluster of {len(cluster.controllers)} "
                  f"controllers and {len(cluster.brokers)} brokers; remove {data_dir} to lay "
                  f"out a new one", file=sys.stderr)
            return 1
        print(f"restarting the stopped cluster {cluster.cluster_id} in {data_dir}", file=sys.stderr)
    else:
        cluster = cl.create_cluster(data_dir, args.controllers or 3, plan.cluster,
                                    args.brokers or 0, node_overrides=plan.nodes)
        print(f"created cluster {cluster.cluster_id} in {data_dir.resolve()}", file=sys.stderr)
    data_dir = data_dir.resolve()
    for node in cluster.nodes:
        cl.start_node(cluster, data_dir, node)
        progress(f"started {node.role} {node.id} (pid {node.pid}, rpc {node.rpc_port}, "
                 f"admin {node.admin_port}, log {node.log_file})")
    controllers = [n.id for n in cluster.controllers]
    leader = cl.wait_for_leader(cluster, controllers, args.timeout, progress)
    progress(f"controller {leader} is the active controller; all controllers agree")
    if cluster.brokers:
        cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers], args.timeout, progress)
        progress(f"brokers {[n.id for n in cluster.brokers]} are registered and unfenced")
    print_status(cluster)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cluster = cl.ClusterFile.load(data_dir_of(args))
    print_status(cluster)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args)
    cluster = cl.ClusterFile.load(data_dir)
    failed = []
    # Brokers first: their controlled shutdown needs an active controller.
    for node in cluster.brokers + cluster.controllers:
        if not cl.is_our_process(node.pid, node.config_file):
            node.pid = None
            continue
        progress(f"stopping {node.role} {node.id} (pid {node.pid}, "
                 f"{'SIGKILL' if args.force else 'SIGTERM'})")
        if cl.stop_node(node, force=args.force, timeout_s=args.timeout):
            node.pid = None
        else:
            failed.append(node.id)
    cluster.save(data_dir)
    if failed:
        print(f"error: nodes {failed} did not exit within {args.timeout:.0f} s; "
              f"use `kraftlab cluster down --force`", file=sys.stderr)
        return 1
    print(f"cluster {cluster.cluster_id} stopped (data kept in {data_dir})")
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args)
    cluster = cl.ClusterFile.load(data_dir)
    node = cluster.node(args.id)
    if not cl.stop_node(node, force=True, timeout_s=5.0):
        print(f"error: {node.role} {node.id} (pid {node.pid}) survived SIGKILL?", file=sys.stderr)
        return 1
    print(f"killed {node.role} {node.id} (pid {node.pid})")
    node.pid = None
    cluster.save(data_dir)
    return 0


def cmd_signal(args: argparse.Namespace) -> int:
    """pause (SIGSTOP) / resume (SIGCONT): a hung process, as the nemesis would make one."""
    cluster = cl.ClusterFile.load(data_dir_of(args))
    node = cluster.node(args.id)
    sig = signal.SIGSTOP if args.cluster_command == "pause" else signal.SIGCONT
    if not cl.signal_node(node, sig):
        print(f"error: {node.role} {node.id} is not running", file=sys.stderr)
        return 1
    print(f"{'paused' if sig == signal.SIGSTOP else 'resumed'} {node.role} {node.id} "
          f"(pid {node.pid})")
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    data_dir = data_dir_of(args).resolve()
    cluster = cl.ClusterFile.load(data_dir)
    node = cluster.node(args.id)
    # The registration the stopped broker leaves behind (still unfenced after a kill -9 until its
    # session times out) is not the restarted broker's: it waits for a newer broker epoch.
    old_epoch = cl.broker_epochs(cluster, args.timeout) if node.role == "broker" else {}
    if not cl.stop_node(node, force=args.force, timeout_s=args.timeout):
        print(f"error: {node.role} {node.id} did not stop; use --force", file=sys.stderr)
        return 1
    node.pid = None
    cl.start_node(cluster, data_dir, node)
    progress(f"started {node.role} {node.id} (pid {node.pid})")
    running = [n.id for n in cl.running_nodes(cluster)]
    leader = cl.wait_for_leader(cluster, running, args.timeout, progress)
    if node.role == "broker":
        # A restarted broker registers again (new incarnation, new broker epoch; after a kill -9
        # only once the old session expired) and is unfenced once caught up.
        cl.wait_for_brokers(cluster, [node.id], args.timeout, progress, newer_than=old_epoch)
    print(f"{node.role} {node.id} restarted (pid {node.pid}); leader is {leader}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    return show_logs(args, data_dir_of(args).resolve())


def register(sub: Any) -> None:
    parser = sub.add_parser("cluster", help="start, inspect and stop a local cluster")
    verbs = parser.add_subparsers(dest="cluster_command", metavar="VERB")
    verbs.required = True

    def verb(name: str, fn: Any, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = verbs.add_parser(name, help=help_text)
        add_data_dir(p)
        p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
        p.set_defaults(handler=guarded(fn))
        return p

    up = verb("up", cmd_up, "start controllers and brokers in the background and wait until "
              "there is a leader and every broker is unfenced")
    up.add_argument("--controllers", type=int, default=None, help="number of controllers (3)")
    up.add_argument("--brokers", type=int, default=None,
                    help="number of brokers, ids 101.. (default 0)")
    up.add_argument("--config", action="append", metavar="KEY=VALUE",
                    help="node config override, e.g. controller.quorum.election.timeout.ms=500; "
                         "one node only: broker.101.rack=a, controller.1.KEY=VALUE; "
                         "kraftlab.bind.host=ADDR (non-127.0.0.1: writes need the admin token)")
    verb("status", cmd_status, "show each node's role, leader, epoch and offsets")
    down = verb("down", cmd_down, "stop every node (graceful: SIGTERM, the leader resigns)")
    down.add_argument("--force", action="store_true", help="SIGKILL instead of SIGTERM")
    kill = verb("kill", cmd_kill, "SIGKILL one node by its recorded PID")
    kill.add_argument("id", type=int)
    pause = verb("pause", cmd_signal, "SIGSTOP one node (it hangs; peers see no closed socket)")
    pause.add_argument("id", type=int)
    resume = verb("resume", cmd_signal, "SIGCONT a paused node")
    resume.add_argument("id", type=int)
    logs = verb("logs", cmd_logs, "print one node's log file (JSON lines)")
    logs.add_argument("id", type=int)
    logs.add_argument("--follow", action="store_true",
                      help="keep printing new lines until Ctrl-C or the node exits")
    restart = verb("restart", cmd_restart, "stop (SIGTERM) and start one node, wait until healthy")
    restart.add_argument("id", type=int)
    restart.add_argument("--force", action="store_true", help="SIGKILL instead of SIGTERM")

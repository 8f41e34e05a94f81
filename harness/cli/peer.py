"""`kraftlab peer kafka`: Apache Kafka itself beside kraftlab (docs/kafka-peer.md).

    kraftlab peer kafka install [--write-lock]      # Maven Central -> .peers/ (pinned, checked)
    kraftlab peer kafka up [--layout combined|split] [--controllers 3] [--brokers 3]
                           [--config key=value ...] [--net loopback|netns] [--faketime]
                           [--lazyfs] [--data-dir DIR]
    kraftlab peer kafka status [--json] [--data-dir DIR]
    kraftlab peer kafka down [--force] [--data-dir DIR]
    kraftlab peer kafka kill|pause|resume|start ID [--data-dir DIR]
    kraftlab peer kafka power-loss ID [--data-dir DIR]                        # needs --lazyfs
    kraftlab peer kafka clock ID [--skew-ms MS] [--rate R] [--data-dir DIR]   # needs --faketime
    kraftlab peer kafka tool NAME [ARGS...]         # e.g. kafka-topics --bootstrap-server B --list

The data dir defaults to ./kraftlab-kafka-peer (or $KRAFTLAB_PEER_DIR). `up` returns once the
quorum has a leader and every broker is unfenced and prints the bootstrap servers on stdout;
`--config` takes the same settings as `kraftlab cluster up` (Kafka's names). `--net netns`
(root) lays the peer out in network namespaces of its own (harness/launcher/netns.py) and leaves
them in place with the peer; `status` reaches the nodes there and `down` deletes them.
`--faketime` starts every JVM with libfaketime preloaded (harness/peers/kafka/faketime.py), so
`clock` can set one node's clock SKEW ms ahead (negative: behind) running at RATE; `clock ID`
alone puts it back in step. `--lazyfs` puts every broker's log dir on the lazy file system
(harness/peers/lazyfs, docs/lazyfs.md), so `power-loss ID` (kill -9 of the JVM, then of its
page cache) loses what the broker did not fsync; `start ID` brings it back.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import progress
from harness.launcher import cluster as cl
from harness.launcher import netns
from harness.peers.kafka import cluster as peer
from harness.peers.kafka import faketime, tools
from harness.peers.kafka import install as inst

DEFAULT_DIR = "kraftlab-kafka-peer"


def _dir(args: argparse.Namespace) -> Path:
    if args.data_dir:
        return Path(args.data_dir).resolve()
    return Path(os.environ.get("KRAFTLAB_PEER_DIR", DEFAULT_DIR)).resolve()


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (peer.PeerError, inst.InstallError, tools.ToolError, cl.ClusterError,
                netns.NetnsError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return run


def _install(args: argparse.Namespace) -> int:
    inst.install(progress, write_lock=args.write_lock)
    return 0


def _up(args: argparse.Namespace) -> int:
    net = None
    if args.net == "netns":
        reason = netns.missing()
        if reason is not None:
            raise peer.PeerError(f"--net netns: {reason}")
        ids = [i for i, _ in peer.layout_of(args.layout, args.controllers, args.brokers)]
        net = netns.Netns(tuple(ids)).create()
    try:
        started = peer.up(_dir(args), layout=args.layout, controllers=args.controllers,
                          brokers=args.brokers, overrides=cl.parse_overrides(args.config),
                          timeout_s=args.timeout, progress=progress, net=net,
                          faketime=args.faketime, lazyfs=args.lazyfs)
    except BaseException:
        if net is not None:
            net.teardown()
        raise
    if net is not None:
        net.keep()  # they go with the peer: `down` deletes them
    print(started.bootstrap)
    return 0


def _status(args: argparse.Namespace) -> int:
    state = peer.status(_dir(args))
    if args.json:
        print(json.dumps(state, indent=2))
        return 0 if state["ready"] else 1
    q = state["quorum"]
    print(f"Apache Kafka {state['version']} ({state['layout']}), cluster {state['cluster_id']}: "
          f"{'ready' if state['ready'] else 'NOT ready'}")
    print(f"bootstrap {state['bootstrap']}")
    if q:
        print(f"quorum: leader {q['leader_id']} epoch {q['leader_epoch']} high watermark "
              f"{q['high_watermark']}; voters " + ", ".join(
                  f"{v['id']} (lag {v['lag']})" for v in q["voters"]))
    else:
        print("quorum: no answer")
    for n in state["nodes"]:
        seen = state["brokers_seen"].get(str(n["id"]))
        extra = f", lists brokers {seen}" if "broker" in n["roles"] and seen is not None else ""
        print(f"  node {n['id']} {'+'.join(n['roles'])}: "
              f"{'running pid ' + str(n['pid']) if n['running'] else 'stopped'}{extra}")
    return 0 if state["ready"] else 1


def _down(args: argparse.Namespace) -> int:
    stuck = peer.down(_dir(args), force=args.force)
    if stuck:
        print(f"error: nodes {stuck} did not stop", file=sys.stderr)
        return 1
    progress("Apache Kafka peer stopped")
    return 0


SIGNALS = {"kill": signal.SIGKILL, "pause": signal.SIGSTOP, "resume": signal.SIGCONT}


def _signal(args: argparse.Namespace) -> int:
    data_dir = _dir(args)
    state = peer.PeerFile.load(data_dir)
    node = state.node(args.id)
    if args.action == "start":
        peer.start_node(state, data_dir, node)
        peer.wait_ready(state, args.timeout, [node.id], progress)
        return 0
    if not peer.signal_node(node, SIGNALS[args.action]):
        print(f"error: node {node.id} is not running", file=sys.stderr)
        return 1
    if args.action == "kill":
        peer.wait_dead(node, 10.0)
    return 0


def _power_loss(args: argparse.Namespace) -> int:
    data_dir = _dir(args)
    state = peer.PeerFile.load(data_dir)
    node = state.node(args.id)
    if not peer.running(node):
        print(f"error: node {node.id} is not running", file=sys.stderr)
        return 1
    progress(f"node {node.id}: {peer.power_loss(state, data_dir, node)}")
    return 0


def _clock(args: argparse.Namespace) -> int:
    state = peer.PeerFile.load(_dir(args))
    node = state.node(args.id)
    if not state.faketime:
        raise peer.PeerError("this peer runs without libfaketime: `peer kafka down`, then "
                             "`peer kafka up --faketime`")
    if node.pid is None or not peer.running(node):
        raise peer.PeerError(f"node {node.id} is not running")
    try:
        line = faketime.set_clock(Path(node.data_dir), node.pid, args.skew_ms, args.rate)
    except faketime.FaketimeError as exc:
        raise peer.PeerError(str(exc)) from exc
    progress(f"node {node.id}: clock {args.skew_ms:+g} ms, rate {args.rate:g} ({line!r})")
    return 0


def _tool(args: argparse.Namespace) -> int:
    rest = [a for a in args.args if a != "--"] if args.args[:1] == ["--"] else args.args
    done = tools.run(args.name, rest, timeout_s=args.timeout,
                     input_text=sys.stdin.read() if args.stdin else None)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("peer", help="Apache Kafka itself beside kraftlab (docs/kafka-peer.md)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    systems = p.add_subparsers(dest="system", metavar="SYSTEM")
    systems.required = True
    k = systems.add_parser("kafka", help="a real Apache Kafka KRaft cluster on loopback",
                           description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = k.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    def with_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--data-dir", help=f"peer directory (default ./{DEFAULT_DIR} or "
                            "$KRAFTLAB_PEER_DIR)")
        return parser

    v = verbs.add_parser("install", help="resolve the pinned Kafka from Maven Central")
    v.add_argument("--write-lock", action="store_true",
                   help="rewrite kafka.sha256 from what Maven resolves (a version change)")
    v.set_defaults(handler=_guard(_install))

    v = with_dir(verbs.add_parser("up", help="format and start a KRaft cluster, wait for it"))
    v.add_argument("--layout", choices=peer.LAYOUTS, default="combined",
                   help="combined: N nodes with both roles; split: controllers 1.. and "
                        "brokers 101.. as separate JVMs")
    v.add_argument("--controllers", type=int, default=3)
    v.add_argument("--brokers", type=int, default=3, help="split layout only")
    v.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a server setting for every node (Kafka's names, as cluster up)")
    v.add_argument("--timeout", type=float, default=90.0)
    v.add_argument("--net", choices=("loopback", "netns"), default="loopback",
                   help="netns: each node in a network namespace of its own (needs root)")
    v.add_argument("--faketime", action="store_true",
                   help="preload libfaketime into every JVM, so `clock` can skew a node")
    v.add_argument("--lazyfs", action="store_true",
                   help="every broker's log dir on the lazy file system, so `power-loss` "
                        "loses what it did not fsync")
    v.set_defaults(handler=_guard(_up))

    v = with_dir(verbs.add_parser("status", help="nodes, quorum leader, unfenced brokers"))
    v.add_argument("--json", action="store_true")
    v.set_defaults(handler=_guard(_status))

    v = with_dir(verbs.add_parser("down", help="stop every node this peer started"))
    v.add_argument("--force", action="store_true", help="SIGKILL at once")
    v.set_defaults(handler=_guard(_down))

    for action in ("kill", "pause", "resume", "start"):
        v = with_dir(verbs.add_parser(action, help=f"{action} one node by its recorded PID"))
        v.add_argument("id", type=int)
        v.add_argument("--timeout", type=float, default=90.0)
        v.set_defaults(handler=_guard(_signal), action=action)

    v = with_dir(verbs.add_parser("power-loss", help="kill -9 one node and lose what it did "
                                  "not fsync (a peer up with --lazyfs)"))
    v.add_argument("id", type=int)
    v.set_defaults(handler=_guard(_power_loss))

    v = with_dir(verbs.add_parser("clock", help="skew one node's clock (a peer up with "
                                  "--faketime); no options: back in step"))
    v.add_argument("id", type=int)
    v.add_argument("--skew-ms", type=float, default=0.0, help="ahead of the machine (<0: behind)")
    v.add_argument("--rate", type=float, default=1.0, help="its speed (1: in step)")
    v.set_defaults(handler=_guard(_clock))

    v = verbs.add_parser("tool", help="run one of Kafka's command-line tools",
                         description="Kafka's own tools: " + ", ".join(sorted(tools.TOOLS)))
    v.add_argument("name", help="e.g. kafka-topics")
    v.add_argument("--timeout", type=float, default=120.0)
    v.add_argument("--stdin", action="store_true", help="pass this command's stdin to the tool")
    v.add_argument("args", nargs=argparse.REMAINDER)
    v.set_defaults(handler=_guard(_tool))

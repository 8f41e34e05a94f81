"""`kraftlab jepsen run`: a Jepsen-style run on real processes (harness/jepsen/runner.py).

    kraftlab jepsen run --workload kv --nemesis NAME [--time-limit S] [--out DIR] [--seed N]
                        [--consistency linearizable|local] [--data-dir DIR] ...
    kraftlab jepsen run --workload queue --nemesis NAME [--acks 0|1|all]
                        [--min-insync-replicas N] [--replication-factor R] [--partitions P]
                        [--unclean] [--no-idempotence] [--replication-mode isr|quorum|raft] ...
    kraftlab jepsen run ... --net netns      (nodes in network namespaces; needs root)
    kraftlab jepsen run --system kafka --workload queue --nemesis kill-partition-leader ...
                                             (against Apache Kafka: docs/kafka-peer.md)
    kraftlab jepsen soak [--duration S] [--segment S] [--net netns] [--out DIR]

Progress goes to stderr; the last stdout line is a one-line summary. Exit 0 valid, 1 anomalies,
2 unknown, 3 the run could not be done (bad option, cluster did not start).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness.cli.common import progress
from harness.jepsen.nemesis import FAULTS, GROUPS, NemesisError
from harness.jepsen.runner import (
    DEFAULT_OVERRIDES,
    EXIT_ERROR,
    NETS,
    PLANNED_WORKLOADS,
    SYSTEMS,
    WORKLOADS,
    RunError,
    RunOptions,
    run,
)
from harness.jepsen.soak import ROTATION, SoakOptions, soak
from harness.jepsen.workload_kv import KvOptions
from harness.jepsen.workload_queue import ACKS, QueueOptions


def _range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(",", 1)) if "," in text else (float(text),) * 2
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN,MAX seconds, got {text!r}") from None
    if not 0 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"need 0 <= MIN <= MAX, got {text!r}")
    return lo, hi


def register(sub: Any) -> None:
    parser = sub.add_parser("jepsen", help="Jepsen-style runs on real processes")
    verbs = parser.add_subparsers(dest="jepsen_command", metavar="VERB")
    verbs.required = True
    p = verbs.add_parser(
        "run", help="run a workload under a nemesis on a fresh local cluster, then check it",
        description="Faults: " + ", ".join(FAULTS) + ". Groups: "
        + ", ".join(f"{k} ({', '.join(v) or 'no faults'})" for k, v in GROUPS.items()) + ".",
    )
    p.add_argument("--workload", default="kv", choices=WORKLOADS + tuple(PLANNED_WORKLOADS))
    p.add_argument("--system", choices=SYSTEMS, default="kraftlab",
                   help="what the run runs against: kraftlab (default, its own cluster) or "
                        "kafka (an Apache Kafka KRaft cluster of the peer kit: controllers 1-3, "
                        "brokers 101-103; queue workload, process faults, and with "
                        "--net netns link faults; "
                        "docs/kafka-peer.md)")
    p.add_argument("--nemesis", default="partition",
                   help="fault names or groups, comma-separated (default: partition)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S",
                   help="seconds of workload under faults (default 10)")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./kraftlab-jepsen/<workload>-<time>)")
    p.add_argument("--seed", type=int, default=None, help="seed of clients and nemesis")
    p.add_argument("--consistency", choices=("linearizable", "local"), default="linearizable",
                   help="kv reads (local: may be stale; the checker should say so)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="cluster directory (default: a new temporary one, removed afterwards)")
    p.add_argument("--keys", type=int, default=3, help="kv keys (default 3)")
    p.add_argument("--concurrency", type=int, default=None,
                   help="client workers: kv clients (default 5), queue producers (default 3)")
    p.add_argument("--rate", type=float, default=None,
                   help="kv ops/s of all clients (default 40); queue sends/s (default 60)")
    q = p.add_argument_group("queue workload (topic created by the run with these settings)")
    q.add_argument("--topic", default="jepsen-queue",
                   help="topic the run creates; must not exist yet (default jepsen-queue)")
    q.add_argument("--partitions", type=int, default=3, help="partitions (default 3)")
    q.add_argument("--replication-factor", type=int, default=3, help="RF (default 3)")
    q.add_argument("--acks", choices=tuple(ACKS), default="all", help="producer acks (all)")
    q.add_argument("--min-insync-replicas", type=int, default=2,
                   help="topic min.insync.replicas (default 2)")
    q.add_argument("--unclean", action="store_true",
                   help="topic unclean.leader.election.enable=true (default false)")
    q.add_argument("--idempotence", action=argparse.BooleanOptionalAction, default=None,
                   help="enable.idempotence (default: on with acks=all, off otherwise)")
    q.add_argument("--replication-mode", choices=("isr", "quorum", "raft"), default="isr",
                   help="topic replication.mode (default isr)")
    q.add_argument("--no-leader-epoch", dest="leader_epoch_enable", action="store_false",
                   help="topic leader.epoch.enable=false: the UNSAFE pre-0.11 follower that "
                        "truncates to its own HW (KIP-101; docs/replication.md)")
    q.add_argument("--consumers", type=int, default=2, help="consumer workers (default 2)")
    q.add_argument("--subscribe", action="store_true",
                   help="consumers are one consumer group (subscribe, commit after processing; "
                        "Kafka protocol, confluent-kafka) instead of reading every partition")
    q.add_argument("--client", choices=("native", "kafka"), default="native",
                   help="producers and consumers: native (kraftlab's protocol) or kafka "
                        "(aiokafka to the brokers' Kafka listeners, as on --system kafka, "
                        "which always uses kafka)")
    q.add_argument("--brokers", type=int, default=None,
                   help="brokers of the run's cluster (default 3 for queue, 0 for kv)")
    p.add_argument("--op-timeout", type=float, default=2.5, metavar="S",
                   help="client timeout per operation; then it is info (default 2.5)")
    p.add_argument("--fault-s", type=_range, default=(1.0, 3.0), metavar="MIN,MAX",
                   help="how long each fault lasts (default 1,3)")
    p.add_argument("--quiet-s", type=_range, default=(1.0, 2.0), metavar="MIN,MAX",
                   help="quiet time after each heal (default 1,2)")
    p.add_argument("--lead-in", type=float, default=1.0, metavar="S",
                   help="quiet time before the first fault (default 1)")
    p.add_argument("--check-timeout", type=float, default=60.0, metavar="S",
                   help="linearizability search budget; then exit 2 (default 60)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="node config override (defaults: "
                   + ", ".join(f"{k}={v}" for k, v in DEFAULT_OVERRIDES.items()) + ")")
    p.add_argument("--net", choices=NETS, default="loopback",
                   help="loopback (default): nodes on 127.0.0.1, partitions by the nodes' link "
                        "filter; netns: each node in a network namespace the run creates and "
                        "deletes, partitions dropped by the kernel (nftables; needs root)")
    p.add_argument("--json", action="store_true", help="print results.json to stdout")
    p.set_defaults(handler=cmd_run)
    s = verbs.add_parser(
        "soak", help="one cluster, jepsen runs in a row under every nemesis, memory sampled",
        description="Runs " + ", ".join(f"{w} under {n}" for w, n in ROTATION)
        + " in rotation on one cluster (3 controllers, 3 brokers) with safe settings until the "
        "duration is spent, sampling every node's RSS; writes DIR/soak.json, DIR/memory.png, "
        "DIR/memory.csv and each run's own artefacts. Exit 0 all valid and memory within the "
        "bound, 1 an anomaly or memory beyond it, 2 unknown, 3 could not run.")
    s.add_argument("--duration", type=float, default=600.0, metavar="S",
                   help="seconds of runs (default 600); the last run ends by then")
    s.add_argument("--segment", type=float, default=50.0, metavar="S",
                   help="fault phase of each run (default 50)")
    s.add_argument("--warmup", type=float, default=120.0, metavar="S",
                   help="memory growth is measured after this (default 120)")
    s.add_argument("--max-growth-mb", type=float, default=30.0, metavar="MB",
                   help="bound on any node's RSS growth over the measured window (default 30)")
    s.add_argument("--sample", type=float, default=2.0, metavar="S",
                   help="RSS sampling period (default 2)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--net", choices=NETS, default="loopback",
                   help="as for `jepsen run` (netns: real partitions; needs root)")
    s.add_argument("--out", type=Path, default=None,
                   help="output directory (default ./kraftlab-jepsen/soak-<time>)")
    s.set_defaults(handler=cmd_soak)


def options_from_args(args: argparse.Namespace) -> RunOptions:
    queue = args.workload == "queue"
    concurrency = args.concurrency if args.concurrency is not None else (3 if queue else 5)
    rate = args.rate if args.rate is not None else (60.0 if queue else 40.0)
    if args.time_limit <= 0 or concurrency < 1 or args.keys < 1 or rate <= 0:
        raise RunError("--time-limit, --rate must be > 0; --concurrency, --keys >= 1")
    overrides = dict(DEFAULT_OVERRIDES)
    for item in args.config or []:
        if "=" not in item:
            raise RunError(f"--config expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = value.strip()
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    out = args.out or Path("kraftlab-jepsen") / f"{args.workload}-{time.strftime('%Y%m%dT%H%M%S')}"
    kv = KvOptions(keys=args.keys, concurrency=concurrency, rate=rate,
                   op_timeout_s=args.op_timeout, consistency=args.consistency,
                   check_timeout_s=args.check_timeout)
    idempotence = args.idempotence if args.idempotence is not None else args.acks == "all"
    try:
        queue_options = QueueOptions(
            topic=args.topic, partitions=args.partitions, replication_factor=args.replication_factor,
            acks=args.acks, min_insync_replicas=args.min_insync_replicas,
            unclean_leader_election=args.unclean, idempotence=idempotence,
            replication_mode=args.replication_mode, producers=concurrency,
            consumers=args.consumers, rate=rate, op_timeout_s=args.op_timeout,
            subscribe=args.subscribe, leader_epoch_enable=args.leader_epoch_enable,
            client="kafka" if args.system == "kafka" else args.client,
        )
    except ValueError as exc:
        raise RunError(str(exc)) from None
    return RunOptions(out_dir=out, workload=args.workload, nemesis=args.nemesis,
                      time_limit_s=args.time_limit, seed=seed, data_dir=args.data_dir, kv=kv,
                      queue=queue_options, brokers=args.brokers,
                      fault_s=args.fault_s, quiet_s=args.quiet_s, lead_in_s=args.lead_in,
                      overrides=overrides, progress=progress, net=args.net,
                      system=args.system)


def cmd_soak(args: argparse.Namespace) -> int:
    out = args.out or Path("kraftlab-jepsen") / f"soak-{time.strftime('%Y%m%dT%H%M%S')}"
    options = SoakOptions(out_dir=out, duration_s=args.duration, segment_s=args.segment,
                          seed=args.seed, net=args.net, sample_s=args.sample,
                          warmup_s=args.warmup, max_growth_mb=args.max_growth_mb,
                          progress=progress)
    try:
        result = soak(options)
    except (RunError, NemesisError, ValueError) as exc:
        print(json.dumps({"error": "INVALID_REQUEST", "message": str(exc)}), file=sys.stderr)
        return EXIT_ERROR
    r = result.results
    m = r["memory"]
    print(f"SOAK {r['elapsed_s']:.0f} s, {len(r['segments'])} runs {r['verdicts']}, "
          f"{r['anomalies']} anomalies, faults {sum(r['faults_applied'].values())} "
          f"({len(r['faults_applied'])} kinds); memory max growth {m['max_growth_mb']} MB "
          f"over {m['window_s']:.0f} s (bound {m['max_growth_mb_bound']} MB); "
          f"report {out / 'soak.json'}")
    return result.exit_code


def cmd_run(args: argparse.Namespace) -> int:
    try:
        options = options_from_args(args)
        progress(f"jepsen run on {options.system}: workload {options.workload}, nemesis "
                 f"{options.nemesis}, seed {options.seed}, {options.time_limit_s} s -> "
                 f"{options.out_dir}")
        result = run(options)
    except (RunError, NemesisError, ValueError) as exc:
        print(json.dumps({"error": "INVALID_REQUEST", "message": str(exc)}), file=sys.stderr)
        return EXIT_ERROR
    r = result.results
    s = r["summary"]
    if args.json:
        print(json.dumps(r, default=str))
    else:
        print(f"{result.verdict.upper()}: {s['ops']} ops (ok {s['totals']['ok']}, fail "
              f"{s['totals']['fail']}, info {s['totals']['info']}), availability "
              f"{s['availability']} (during faults "
              f"{s['phases']['during_fault']['availability']}), {len(s['faults'])} faults, "
              f"recovered in {r['recovery_s']} s; anomalies {sorted(r['anomalies']) or 'none'}; "
              f"system {r['system']}; report {result.out_dir / 'report.html'}")
    return result.exit_code

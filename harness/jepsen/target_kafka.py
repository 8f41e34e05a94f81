"""The Apache Kafka target of a Jepsen run (`kraftlab jepsen run --system kafka`).

The same run as on kraftlab (harness/jepsen/runner.py), steps and artefacts alike, with the
cluster an Apache Kafka KRaft cluster of the peer kit (harness/peers/kafka, docs/kafka-peer.md):

1. bring up the peer in a temporary data dir (or `--data-dir`) in the split layout, controllers
   1..3 and brokers 101..103 as kraftlab's launcher numbers them, with the run's node settings
   (the queue's broker timings under `--config`: Kafka's names, so one list configures both;
   keys only kraftlab knows are left out and listed in results.json `peer.ignored`); a data dir
   whose peer already runs is used as it is and left running;
2-3. the workload (harness/jepsen/workload_queue_kafka.py) and the nemesis
   (harness/jepsen/nemesis_kafka.py) through the shared phases (harness/jepsen/run_core.py);
4. the same checker, report and summary row, with `system: kafka` and the peer's version;
5. the peer down by its recorded PIDs (SIGTERM, SIGKILL after STOP_TIMEOUT_S) unless it was
   running before the run, its node logs copied into DIR/logs.

With `--net netns` (`net="netns"`, root) the run creates network namespaces for the peer as the
kraftlab runner does for its nodes (harness/launcher/netns.py, `make_net`): each JVM starts
in its node's namespace and binds its address (harness/peers/kafka/cluster.py), the run's
clients (aiokafka, the raw Wire) and the nemesis talk from the clients' namespace (the run's
thread enters it, and the threads it starts are there too), and link faults are nftables drops
in the kernel (nemesis_kafka.py). Teardown: every JVM stopped by PID, then every namespace
deleted, in the `finally` and by Netns's atexit hook, so a run failing half-way leaves none.

What the Kafka target takes (`check_options` refuses the rest before anything starts, with the
reason): the `queue` workload, and the `kv` workload with `--consistency local` (a register
per key in a topic's config, harness/jepsen/workload_kv_kafka.py: Kafka has no linearizable
config read), process faults, and with `--net netns` link faults and the staged `staggered-isr-drop` and
`truncate-restart-then-leader-crash` too (on loopback they are refused: "use --net netns");
clock faults on a peer it starts with libfaketime preloaded (a nemesis with clock faults
starts it so: harness/peers/kafka/faketime.py); with `--config
kraftlab.log.unflushed.in.process=1`, the key that makes kraftlab's brokers lose what they did
not fsync at a crash, a peer whose brokers' log dirs are on the lazy file system
(harness/peers/lazyfs), so `crash-unflushed` is a power loss on both systems; replication mode
`isr` with leader epochs. `--subscribe` runs as on kraftlab: the consumer workers are one
consumer group of confluent-kafka members (harness/jepsen/workload_subscribe.py) that join
through the peer's brokers, the group coordinator Kafka's own (group-coordinator/).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from harness.jepsen.nemesis import (
    CLOCK_FAULTS,
    UNFLUSHED_KEY,
    NemesisError,
    Schedule,
    parse_nemesis,
)
from harness.jepsen.nemesis_kafka import (
    NETNS_FAULTS,
    KafkaNemesis,
    supported,
    unsupported,
)
from harness.jepsen.recorder import Recorder, RunContext
from harness.jepsen.run_core import (
    QUEUE_BROKERS,
    RunError,
    RunOptions,
    RunResult,
    _say,
    cluster_overrides,
    finish,
    run_phases,
)
from harness.jepsen.workload_kv_kafka import KafkaKvWorkload
from harness.jepsen.workload_queue import QueueSetupError
from harness.jepsen.workload_queue_kafka import KafkaQueueWorkload
from harness.launcher import netns
from harness.launcher.netns import Netns
from harness.peers.kafka import cluster as pk
from harness.peers.kafka import install as inst

SYSTEM = "kafka"
LAYOUT = "split"
# Six JVMs on two cores take about 30 s to be ready when the machine is idle; a restarted
# broker about 10 s to be unfenced again. The run's own timeouts are the floor.
PEER_STARTUP_S = 120.0
PEER_RECOVERY_S = 60.0
STOP_TIMEOUT_S = 10.0


def check_options(options: RunOptions) -> None:
    """Raise RunError if the Kafka target cannot run these options (module docstring)."""
    if options.workload not in ("queue", "kv"):
        raise RunError(f"--system kafka runs the queue and kv workloads (got {options.workload!r})")
    if options.workload == "kv" and options.kv.consistency != "local":
        raise RunError(
            "--system kafka --workload kv needs --consistency local: a Kafka broker answers "
            "DescribeConfigs from its own metadata image, and Kafka has no linearizable "
            "config read (harness/jepsen/workload_kv_kafka.py)"
        )
    if options.net not in ("loopback", "netns"):
        raise RunError(f"unknown net {options.net!r}; use loopback or netns")
    faults = parse_nemesis(options.nemesis)
    in_netns = options.net == "netns"
    links = [f for f in unsupported(faults, in_netns) if f in NETNS_FAULTS]
    if links:
        raise RunError(
            f"--system kafka cuts links only in network namespaces: use --net netns "
            f"for {', '.join(links)} (a Kafka JVM has no /nemesis/links; the kernel "
            "drops the packets)"
        )
    bad = unsupported(faults, in_netns)
    if bad:
        raise RunError(
            f"--system kafka does {', '.join(supported(in_netns))}; not {', '.join(bad)}"
        )
    q = options.queue
    if options.workload != "queue":
        return
    if q.replication_mode != "isr" or not q.leader_epoch_enable:
        raise RunError(
            "--system kafka: Kafka's replication is the ISR with leader epochs "
            "(--replication-mode and --no-leader-epoch are kraftlab's)"
        )
    if q.replication_factor > kafka_brokers(options):
        raise RunError(
            f"replication factor {q.replication_factor} needs at least as many "
            f"brokers (have {kafka_brokers(options)})"
        )


def loses_unflushed(overrides: dict[str, str]) -> bool:
    """Whether the node settings ask for brokers that lose what they did not fsync at a crash
    (UNFLUSHED_KEY, kraftlab's name: one list configures both systems): on Kafka, log dirs on
    the lazy file system."""
    return overrides.get(UNFLUSHED_KEY, "0").strip().lower() in ("1", "true")


def kafka_brokers(options: RunOptions) -> int:
    """The peer's broker count: kv too needs brokers on Kafka (they serve its config reads
    and forward its writes), so it gets the queue's default where kraftlab's kv has none."""
    return options.brokers if options.brokers is not None else QUEUE_BROKERS


def make_workload(options: RunOptions) -> KafkaQueueWorkload | KafkaKvWorkload:
    if options.workload == "kv":
        return KafkaKvWorkload(options.kv)
    return KafkaQueueWorkload(options.queue)


def nemesis_partitions(workload: KafkaQueueWorkload | KafkaKvWorkload) -> list[tuple[str, None]]:
    """The partitions broker faults pick a leader of: the queue's topic, or the kv register's
    topics (a leader fault then falls on a broker that serves reads)."""
    if isinstance(workload, KafkaKvWorkload):
        return [(t, None) for t in workload.topics]
    return [(workload.options.topic, None)]


def make_net(options: RunOptions, data_dir: Path) -> Netns | None:
    """The peer's namespaces for `net="netns"` (created), None on loopback; RunError if this
    machine cannot have them (the reason) or the data dir already holds a peer."""
    if options.net != "netns":
        return None
    reason = netns.missing()
    if reason is not None:
        raise RunError(f"--net netns: {reason}")
    if pk.PeerFile.path_in(data_dir).exists():
        raise RunError("--net netns lays out a new peer: give an empty --data-dir")
    ids = [i for i, _ in pk.layout_of(LAYOUT, options.controllers, kafka_brokers(options))]
    try:
        return Netns(tuple(ids)).create()
    except netns.NetnsError as exc:
        raise RunError(f"--net netns: {exc}") from exc


def already_running(data_dir: Path) -> bool:
    """True if data_dir holds a peer with a running node (the run then uses it as is)."""
    if not pk.PeerFile.path_in(data_dir).exists():
        return False
    return any(pk.running(n) for n in pk.PeerFile.load(data_dir).nodes)


def copy_logs(data_dir: Path, out_dir: Path) -> None:
    """Each node's server.log as DIR/logs/<role>-<id>.log (kraftlab's names)."""
    logs = out_dir / "logs"
    logs.mkdir(exist_ok=True)
    for node in pk.PeerFile.load(data_dir).nodes:
        src = Path(node.log_file)
        if src.exists():
            role = "broker" if node.is_broker else "controller"
            shutil.copyfile(src, logs / f"{role}-{node.id}.log")


async def _run_async(options: RunOptions, data_dir: Path,
                     workload: KafkaQueueWorkload | KafkaKvWorkload,
                     rec: Recorder, net: Netns | None = None) -> dict[str, Any]:  # fmt: skip
    faults = parse_nemesis(options.nemesis)
    rng = random.Random(options.seed)  # drawn from in the kraftlab runner's order
    schedule = Schedule(faults, options.fault_s, options.quiet_s, options.lead_in_s)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=1.0)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        ctx = RunContext(
            {}, session, rec, random.Random(rng.random()), options.progress, data_dir=data_dir
        )
        nemesis = KafkaNemesis(
            data_dir,
            rec,
            random.Random(rng.random()),
            schedule,
            partitions=nemesis_partitions(workload),
            net=net,
        )

        async def recovered(timeout_s: float) -> float | None:
            return await nemesis.recovered(max(timeout_s, PEER_RECOVERY_S))

        return await run_phases(
            options, workload, rec, ctx, nemesis, recovered, nemesis.controller_epoch
        )


def run(options: RunOptions) -> RunResult:
    """One run against an Apache Kafka peer (module docstring)."""
    check_options(options)
    try:
        workload = make_workload(options)
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    temp = options.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="kraftlab-jepsen-kafka-")) if temp \
        else options.data_dir  # fmt: skip
    assert data_dir is not None
    data_dir = data_dir.resolve()
    rec = Recorder()
    started_s = time.time()  # the run id's stamp (wall clock, for people)
    wall_started = time.monotonic()
    owned = not already_running(data_dir)
    startup_s = max(options.startup_timeout_s, PEER_STARTUP_S)
    say = lambda m: _say(options, m)  # noqa: E731
    if not owned:
        _say(options, f"using the Apache Kafka peer already running in {data_dir} (left running)")
    net = make_net(options, data_dir) if owned else None
    if options.net == "netns" and not owned:
        raise RunError("--net netns lays out a new peer: give an empty --data-dir")
    if net is not None:
        _say(options, f"network namespaces {net.prefix}-* on {net.subnet}.0/24 "
             "(partitions by nftables in the kernel)")  # fmt: skip
    try:
        # In the clients' namespace (netns): the nodes are reachable only from there.
        with net.entered() if net is not None else contextlib.nullcontext():
            if owned:
                peer = pk.up(
                    data_dir,
                    layout=LAYOUT,
                    controllers=options.controllers,
                    brokers=kafka_brokers(options),
                    overrides=cluster_overrides(options),
                    timeout_s=startup_s,
                    progress=say,
                    net=net,
                    faketime=any(f in CLOCK_FAULTS for f in parse_nemesis(options.nemesis)),
                    lazyfs=loses_unflushed(cluster_overrides(options)),
                )
            else:
                peer = pk.PeerFile.load(data_dir)
                if any(f in CLOCK_FAULTS for f in parse_nemesis(options.nemesis)) \
                        and not peer.faketime:
                    raise RunError(f"clock faults: the peer running in {data_dir} was started "
                                   "without libfaketime: start it with `peer kafka up "
                                   "--faketime`")
                if loses_unflushed(cluster_overrides(options)) and not peer.lazyfs:
                    raise RunError(f"{UNFLUSHED_KEY}=1: the peer running in {data_dir} keeps "
                                   "its log dirs off the lazy file system (a crash would keep "
                                   "the page cache): start it with `peer kafka up --lazyfs`")
                pk.wait_ready(peer, startup_s, [], say)
            info = asyncio.run(_run_async(options, data_dir, workload, rec, net))
        peer = pk.PeerFile.load(data_dir)
        info["cluster"] = {"controllers": len(peer.controllers), "brokers": len(peer.brokers)}
        info["peer"] = {
            "system": peer.system,
            "version": peer.version,
            "layout": peer.layout,
            "cluster_id": peer.cluster_id,
            "ignored": peer.ignored,
        }
        if net is not None:
            info["net"] = {"netns_prefix": net.prefix, "subnet": f"{net.subnet}.0/24",
                           "hosts": {str(k): v for k, v in net.hosts().items()}}  # fmt: skip
    except (pk.PeerError, inst.InstallError, OSError, QueueSetupError, NemesisError,
            netns.NetnsError) as exc:  # fmt: skip
        raise RunError(f"run failed: {exc}") from exc
    finally:
        if owned and pk.PeerFile.path_in(data_dir).exists():
            try:
                stuck = pk.down(data_dir, timeout_s=STOP_TIMEOUT_S)
            except pk.PeerError as exc:  # its namespaces would not go: said below
                _say(options, f"WARNING: {exc}")
                stuck = []
            if stuck:
                _say(options, f"WARNING: Kafka nodes {stuck} did not stop")
        if net is not None:
            left = net.teardown()  # after the JVMs: a namespace outlives no process of ours
            if left:
                _say(options, f"WARNING: network namespaces {left} could not be deleted")
        if pk.PeerFile.path_in(data_dir).exists():
            copy_logs(data_dir, out_dir)
        rec.write(out_dir / "history.jsonl")
        if temp and owned:
            shutil.rmtree(data_dir, ignore_errors=True)
    info["wall_ms"] = int((time.monotonic() - wall_started) * 1000)
    info["started_s"] = started_s
    return finish(options, workload, rec, info)

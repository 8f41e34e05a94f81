"""A Jepsen-style run on real processes: cluster up, workload under a nemesis, heal, recover,
final phase, check, write the artefacts, cluster down.

Sequence (`run`), every step bounded in time:
1. bring up a 3-controller cluster (plus 3 brokers for the `queue` workload) in a temporary
   data dir (or `--data-dir`) through the launcher (`harness.launcher.cluster`), wait for an agreed
   leader (and every broker registered and unfenced);
2. run the workload's clients and the nemesis schedule together until the time limit (clients
   finish their in-flight operation, each bounded by the op timeout);
3. heal everything (`ClusterNemesis.heal_all`), wait until every controller names the same
   leader (recovery time is measured), run the workload's final phase (kv: final reads;
   queue: a probe send per partition, then the final drain);
4. check the history with the workload's checker; write DIR/history.jsonl, DIR/results.json,
   DIR/report.html, DIR/report.png (and the checker's failure view when invalid), and the
   comparison's summary row (DIR/summary/part-<run_id>.parquet, DIR/summary.json;
   summary_row.py);
5. bring the cluster down (only the PIDs in its own cluster.json) unless it was already
   running before the run, and copy the node logs into DIR/logs.
With `net="netns"` (`--net netns`) the cluster runs in network namespaces the run creates and
deletes (harness/launcher/netns.py): nodes bind private addresses, the run's clients and nemesis
talk from the clients' namespace, and partitions are nftables drops in the kernel. Needs root;
without it the run fails at once with the reason (exit 3), tests skip with it.
With `system="kafka"` (`--system kafka`) the same run goes against an Apache Kafka KRaft cluster
of the peer kit instead (harness/jepsen/target_kafka.py: queue workload, process faults, and
with `--net netns` link faults in the kernel, the JVMs in namespaces of their own); steps
2-4 are shared by both targets (harness/jepsen/run_core.py), and results.json and the summary
row name the system.
Exit codes: 0 valid, 1 anomalies (invalid), 2 unknown (checker gave up, or the cluster never
recovered and the history is still valid), 3 the run could not be done.
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

from harness.admin.auth import bearer
from harness.jepsen import target_kafka
from harness.jepsen.nemesis import ClusterNemesis, Schedule, parse_nemesis
from harness.jepsen.recorder import Recorder, RunContext, Workload
from harness.jepsen.run_core import (  # noqa: F401 - re-exported: the runner's public names
    DEFAULT_OVERRIDES,
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    NETS,
    PLANNED_WORKLOADS,
    QUEUE_BROKERS,
    QUEUE_OVERRIDES,
    STOP_POLL_S,
    SUBSCRIBE_OVERRIDES,
    SYSTEMS,
    WORKLOADS,
    RunError,
    RunOptions,
    RunResult,
    _say,
    broker_count,
    cluster_overrides,
    finish,
    run_phases,
)
from harness.jepsen.workload_kv import KvWorkload
from harness.jepsen.workload_queue import QueueOptions, QueueSetupError, QueueWorkload
from harness.launcher import cluster as cl
from harness.launcher import netns
from harness.launcher.netns import Netns
from harness.net.http_session import disable_idempotent_retry


def make_workload(options: RunOptions) -> Workload:
    if options.workload == "kv":
        return KvWorkload(options.kv)
    if options.workload == "queue":
        if options.queue.replication_factor > broker_count(options):
            raise RunError(f"replication factor {options.queue.replication_factor} needs at "
                           f"least as many brokers (have {broker_count(options)})")
        if options.queue.client == "kafka":
            from harness.jepsen.workload_queue_kafka import KafkaClientQueueWorkload

            return KafkaClientQueueWorkload(options.queue)
        return QueueWorkload(options.queue)
    if options.workload in PLANNED_WORKLOADS:
        raise RunError(f"workload {options.workload!r} is not available yet: "
                       f"{PLANNED_WORKLOADS[options.workload]}")
    raise RunError(f"unknown workload {options.workload!r}; use one of {', '.join(WORKLOADS)}")


# ---------------------------------------------------------------------------------- cluster


def already_running(data_dir: Path) -> bool:
    """True if data_dir holds a cluster with running nodes (the run then uses it as is)."""
    if not cl.ClusterFile.path_in(data_dir).exists():
        return False
    return bool(cl.running_nodes(cl.ClusterFile.load(data_dir)))


def bring_up(options: RunOptions, data_dir: Path, net: Netns | None = None) -> None:
    """Lay out (or reuse a stopped) cluster in data_dir, start every node, wait for a leader."""
    if cl.ClusterFile.path_in(data_dir).exists():
        cluster = cl.ClusterFile.load(data_dir)
    else:
        cluster = cl.create_cluster(
            data_dir, options.controllers, cluster_overrides(options), broker_count(options),
            hosts=net.hosts() if net else None, netns=net.namespaces() if net else None)
    for node in cluster.nodes:
        cl.start_node(cluster, data_dir, node)
    leader = cl.wait_for_leader(cluster, [n.id for n in cluster.controllers],
                                options.startup_timeout_s, lambda m: _say(options, m))
    if cluster.brokers:
        cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers], options.startup_timeout_s,
                            lambda m: _say(options, m))
    _say(options, f"cluster {cluster.cluster_id} up in {data_dir}; leader {leader}; "
         f"brokers {[n.id for n in cluster.brokers]}")


def bring_down(data_dir: Path) -> list[int]:
    """Stop every node of this cluster by its recorded PID (SIGTERM, then SIGKILL). Returns
    the ids that would not stop."""
    cluster = cl.ClusterFile.load(data_dir)
    stuck = []
    for node in cluster.nodes:
        if not cl.stop_node(node, force=False, timeout_s=3.0) and not cl.stop_node(
            node, force=True, timeout_s=5.0
        ):
            stuck.append(node.id)
            continue
        node.pid = None
    cluster.save(data_dir)
    return stuck


def copy_logs(data_dir: Path, out_dir: Path) -> None:
    logs = out_dir / "logs"
    logs.mkdir(exist_ok=True)
    for node in cl.ClusterFile.load(data_dir).nodes:
        src = Path(node.log_file)
        if src.exists():
            shutil.copyfile(src, logs / f"{node.role}-{node.id}.log")


# ------------------------------------------------------------------------------ the run


async def _wait_recovery(nemesis: ClusterNemesis, timeout_s: float) -> float | None:
    """Seconds until every controller names the same leader in the same epoch, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        views = await asyncio.gather(*(nemesis._status(i) for i in nemesis.node_ids))
        named = {(v.get("leader_epoch"), v.get("leader_id")) for v in views if v is not None}
        if all(v is not None for v in views) and len(named) == 1 and None not in next(iter(named)):
            return round(time.monotonic() - started, 3)
        await asyncio.sleep(0.05)  # poll interval
    return None


def client_session(data_dir: Path) -> aiohttp.ClientSession:
    """The workloads' HTTP session: never resends a request (`disable_idempotent_retry`), and
    carries the cluster's admin bearer token (DIR/admin-token, harness/admin/auth.py) on every
    request when the cluster has one: a node bound beyond 127.0.0.1, or started with
    kraftlab.admin.require.token=true, answers 401 to any write without it. Call it inside the
    running event loop."""
    token = cl.read_token(data_dir)
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=64),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=1.0),
        headers=bearer(token) if token else None,
    )
    disable_idempotent_retry(session)
    return session


def make_net(options: RunOptions, data_dir: Path) -> Netns | None:
    """The run's namespaces for `net="netns"` (created), None on loopback; RunError if this
    machine cannot have them (the reason: root, ip, nft, kernel) or the cluster is not new."""
    if options.net == "loopback":
        return None
    if options.net != "netns":
        raise RunError(f"unknown net {options.net!r}; use one of {', '.join(NETS)}")
    reason = netns.missing()
    if reason is not None:
        raise RunError(f"--net netns: {reason}")
    if cl.ClusterFile.path_in(data_dir).exists():
        raise RunError("--net netns lays out a new cluster: give an empty --data-dir")
    ids = tuple(i for i, _ in cl.layout_of(options.controllers, broker_count(options)))
    try:
        return Netns(ids).create()
    except netns.NetnsError as exc:
        raise RunError(f"--net netns: {exc}") from exc


async def _run_async(options: RunOptions, data_dir: Path, workload: Workload,
                     rec: Recorder, net: Netns | None = None) -> dict[str, Any]:
    faults = parse_nemesis(options.nemesis)
    cluster = cl.ClusterFile.load(data_dir)
    urls = {n.id: n.admin_url for n in cluster.controllers}
    rng = random.Random(options.seed)
    schedule = Schedule(faults, options.fault_s, options.quiet_s, options.lead_in_s)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=1.0)
    # Two sessions: the clients' never resends (a refused connection must mean "not sent");
    # the nemesis's keeps aiohttp's resend (setting or clearing links twice is harmless).
    async with client_session(data_dir) as session, \
            aiohttp.ClientSession(timeout=timeout) as nemesis_session:
        ctx = RunContext(urls, session, rec, random.Random(rng.random()), options.progress,
                         data_dir=data_dir)
        # broker faults pick a partition of the workload's own topic (kv has none)
        topic = getattr(workload, "options", None)
        targets = [(topic.topic, None)] if isinstance(topic, QueueOptions) else None
        nemesis = ClusterNemesis(data_dir, nemesis_session, rec, random.Random(rng.random()),
                                 schedule, partitions=targets, net=net)
        return await run_phases(
            options, workload, rec, ctx, nemesis,
            lambda timeout_s: _wait_recovery(nemesis, timeout_s),
            lambda: _controller_epoch(nemesis))


async def _controller_epoch(nemesis: ClusterNemesis) -> int | None:
    """The highest controller leader epoch any controller reports (None if none answers)."""
    views = await asyncio.gather(*(nemesis._status(i) for i in nemesis.node_ids))
    epochs = [v["leader_epoch"] for v in views
              if v is not None and isinstance(v.get("leader_epoch"), int)]
    return max(epochs) if epochs else None


def run(options: RunOptions, net: Netns | None = None) -> RunResult:
    """One run. `net`: namespaces the cluster in `options.data_dir` already runs in (a soak's;
    the caller created them and deletes them); None: `options.net` decides. `options.system`
    "kafka" runs against an Apache Kafka peer instead (harness/jepsen/target_kafka.py)."""
    parse_nemesis(options.nemesis)  # bad names fail before anything starts
    if options.system not in SYSTEMS:
        raise RunError(f"unknown system {options.system!r}; use one of {', '.join(SYSTEMS)}")
    if options.system == target_kafka.SYSTEM:
        if net is not None:
            raise RunError("--system kafka lays out namespaces of its own (--net netns); "
                           "it does not join a caller's")
        return target_kafka.run(options)
    workload = make_workload(options)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    temp = options.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="kraftlab-jepsen-")) if temp else options.data_dir
    assert data_dir is not None
    data_dir = data_dir.resolve()
    rec = Recorder()
    started_s = time.time()  # the run id's stamp (wall clock, for people)
    wall_started = time.monotonic()
    owned = not already_running(data_dir)
    if not owned:
        _say(options, f"using the cluster already running in {data_dir} (left running)")
    own_net = net is None
    if own_net:
        net = make_net(options, data_dir)
    if net is not None and own_net:
        _say(options, f"network namespaces {net.prefix}-* on {net.subnet}.0/24 "
             f"(partitions by nftables in the kernel)")
    try:
        # In the clients' namespace (netns): the nodes are reachable only from there.
        with net.entered() if net is not None else contextlib.nullcontext():
            if owned:
                bring_up(options, data_dir, net)
            elif broker_count(options):
                # a cluster left by an earlier run may still be fencing or restarting a broker
                cluster = cl.ClusterFile.load(data_dir)
                cl.wait_for_brokers(cluster, [n.id for n in cluster.brokers],
                                    options.startup_timeout_s, lambda m: _say(options, m))
            info = asyncio.run(_run_async(options, data_dir, workload, rec, net))
        cluster = cl.ClusterFile.load(data_dir)
        info["cluster"] = {"controllers": len(cluster.controllers),
                           "brokers": len(cluster.brokers)}
        if net is not None:
            info["net"] = {"netns_prefix": net.prefix, "subnet": f"{net.subnet}.0/24",
                           "hosts": {str(k): v for k, v in net.hosts().items()}}
    except (cl.ClusterError, OSError, QueueSetupError, netns.NetnsError) as exc:
        raise RunError(f"run failed: {exc}") from exc
    finally:
        if owned and cl.ClusterFile.path_in(data_dir).exists():
            stuck = bring_down(data_dir)
            if stuck:
                _say(options, f"WARNING: nodes {stuck} did not stop")
        if net is not None and own_net:
            left = net.teardown()  # after the nodes: a namespace outlives no process of ours
            if left:
                _say(options, f"WARNING: network namespaces {left} could not be deleted")
        if cl.ClusterFile.path_in(data_dir).exists():
            copy_logs(data_dir, out_dir)
        rec.write(out_dir / "history.jsonl")
        if temp and owned:
            shutil.rmtree(data_dir, ignore_errors=True)
    info["wall_ms"] = int((time.monotonic() - wall_started) * 1000)
    info["started_s"] = started_s
    return finish(options, workload, rec, info)

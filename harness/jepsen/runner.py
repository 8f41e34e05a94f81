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
Exit codes: 0 valid, 1 anomalies (invalid), 2 unknown (checker gave up, or the cluster never
recovered and the history is still valid), 3 the run could not be done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness.admin.auth import bearer
from harness.check.history import HistoryError
from harness.check.report import render_html, summarise, write_png
from harness.jepsen.nemesis import ClusterNemesis, Schedule, parse_nemesis
from harness.jepsen.recorder import Recorder, RunContext, Workload
from harness.jepsen.summary_row import build_row, write_row
from harness.jepsen.workload_kv import KvOptions, KvWorkload
from harness.jepsen.workload_queue import QueueOptions, QueueSetupError, QueueWorkload
from harness.launcher import cluster as cl
from harness.launcher import netns
from harness.launcher.netns import Netns
from harness.net.http_session import disable_idempotent_retry

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_ERROR = 0, 1, 2, 3

# Faster failure detection than the defaults, so a short run sees several fault/heal cycles.
DEFAULT_OVERRIDES = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.request.timeout.ms": "1500",
}

# The queue workload's brokers: fast fencing and ISR shrink, so a 10-20 s run sees a leader
# cut off, fenced and replaced (Kafka's defaults: 9000, 2000 and 30000 ms), and high watermarks
# checkpointed every second (Kafka's default 5000 ms), so a run's lead-in outlasts one checkpoint
# in seconds (KIP-101's truncation to the checkpointed HW, docs/jepsen.md).
QUEUE_OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
}
QUEUE_BROKERS = 3
# `--subscribe` (a consumer group): a few offsets partitions (Kafka's 50 are many replicas for a
# laptop-sized run) and no initial rebalance delay, so the group forms within the lead-in.
SUBSCRIBE_OVERRIDES = {
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
}

STOP_POLL_S = 0.1  # how often `RunOptions.stop_when` is asked

WORKLOADS = ("kv", "queue")
NETS = ("loopback", "netns")
PLANNED_WORKLOADS: dict[str, str] = {}


class RunError(RuntimeError):
    """The run could not be done (cluster did not start, bad options)."""


@dataclass(frozen=True)
class RunOptions:
    out_dir: Path
    workload: str = "kv"
    nemesis: str = "partition"
    time_limit_s: float = 10.0
    seed: int = 0
    data_dir: Path | None = None
    kv: KvOptions = field(default_factory=KvOptions)
    queue: QueueOptions = field(default_factory=QueueOptions)
    brokers: int | None = None  # None: 0 for kv, QUEUE_BROKERS for queue
    fault_s: tuple[float, float] = (1.0, 3.0)
    quiet_s: tuple[float, float] = (1.0, 2.0)
    lead_in_s: float = 1.0
    controllers: int = 3
    overrides: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_OVERRIDES))
    startup_timeout_s: float = 30.0
    recovery_timeout_s: float = 20.0
    final_timeout_s: float = 15.0
    progress: Callable[[str], None] | None = None
    # End the fault phase early, before the time limit, once this holds (polled every
    # STOP_POLL_S while the phase runs; the time limit stays the bound). Tests use it to heal
    # only after the fault has had its effect (e.g. a new partition leader elected), instead
    # of guessing how long that takes on a loaded machine.
    stop_when: Callable[[ClusterNemesis], Awaitable[bool]] | None = None
    # "loopback": every node on 127.0.0.1, partitions by the nodes' link filter; "netns":
    # each node in its own network namespace, partitions by the kernel (module docstring).
    net: str = "loopback"


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    verdict: str
    results: dict[str, Any]
    out_dir: Path


def make_workload(options: RunOptions) -> Workload:
    if options.workload == "kv":
        return KvWorkload(options.kv)
    if options.workload == "queue":
        if options.queue.replication_factor > broker_count(options):
            raise RunError(f"replication factor {options.queue.replication_factor} needs at "
                           f"least as many brokers (have {broker_count(options)})")
        return QueueWorkload(options.queue)
    if options.workload in PLANNED_WORKLOADS:
        raise RunError(f"workload {options.workload!r} is not available yet: "
                       f"{PLANNED_WORKLOADS[options.workload]}")
    raise RunError(f"unknown workload {options.workload!r}; use one of {', '.join(WORKLOADS)}")


def broker_count(options: RunOptions) -> int:
    if options.brokers is not None:
        return options.brokers
    return QUEUE_BROKERS if options.workload == "queue" else 0


def cluster_overrides(options: RunOptions) -> dict[str, str]:
    """The node configs of the run: the queue's broker timings under the user's overrides."""
    if options.workload != "queue":
        return dict(options.overrides)
    group = SUBSCRIBE_OVERRIDES if options.queue.subscribe else {}
    return {**QUEUE_OVERRIDES, **group, **options.overrides}


def _say(options: RunOptions, message: str) -> None:
    if options.progress is not None:
        options.progress(message)


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


async def _progress_loop(options: RunOptions, rec: Recorder, nemesis: ClusterNemesis,
                         started: float) -> None:
    while True:
        await asyncio.sleep(1.0)  # display cadence
        c = rec.completions
        fault = nemesis.active.describe() if nemesis.active is not None else "-"
        _say(options, f"[{time.monotonic() - started:5.1f}s] ok {c['ok']} fail {c['fail']} "
             f"info {c['info']} | nemesis: {fault}")


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
        epoch_start = await _controller_epoch(nemesis)
        await workload.setup(ctx)
        rec.restart_clock()
        started = time.monotonic()
        deadline = started + options.time_limit_s
        progress = asyncio.create_task(_progress_loop(options, rec, nemesis, started))
        # The nemesis and the clients are tasks the runner owns: whatever ends the phase (the
        # deadline, a bound, a crashed task), every one of them has stopped before heal_all
        # runs, so the heal never races a fault action still in progress.
        tasks = [asyncio.create_task(nemesis.run(deadline))]
        tasks += [asyncio.create_task(workload.run_worker(ctx, w, deadline))
                  for w in range(workload.concurrency)]
        outcomes: list[Any] = []
        phase = asyncio.gather(*tasks, return_exceptions=True)
        stopper = (asyncio.create_task(_stop_when(options.stop_when, nemesis, deadline))
                   if options.stop_when is not None else None)
        try:
            # bounded: the deadline, plus one op timeout, plus a fault action's own timeouts
            async with asyncio.timeout(options.time_limit_s + workload.op_timeout_s + 30):
                if stopper is None:
                    await phase
                else:
                    waited: list[asyncio.Future[Any]] = [phase, stopper]
                    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                    if (not phase.done() and stopper.done() and stopper.exception() is None
                            and stopper.result()):
                        # the condition held: stop now. Operations in flight stay open (an
                        # invoke without completion is `info`: it may have happened).
                        ctx.stats["stopped_early_s"] = round(time.monotonic() - started, 3)
                        _say(options, "stop condition met: ending the fault phase")
                    else:  # the phase ended, or the condition never held (or raised)
                        if stopper.done() and stopper.exception() is not None:
                            ctx.stats["stop_when_error"] = repr(stopper.exception())
                        await phase
        finally:
            for task in [*tasks, *([stopper] if stopper is not None else [])]:
                task.cancel()
            # Collected here, whatever ended the phase: on an early stop (or the outer timeout)
            # the phase's gather is never awaited, and an exception a task raised before the
            # stop would be lost. cancel() leaves a finished task's exception in place; a task we
            # cancelled ourselves answers CancelledError, which is not a crash.
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            if stopper is not None:
                await asyncio.gather(stopper, return_exceptions=True)
            _say(options, "time limit reached: healing")
            heal = await nemesis.heal_all()
            ctx.stats["healed_at"] = time.monotonic()  # recovery times count from here
        # A crashed client or nemesis is a harness bug: the run goes on (the history stays
        # sound: the crashed operation is left open) and results.json says what happened.
        crashed = [f"{'nemesis' if i == 0 else f'worker {i - 1}'}: {r!r}"
                   for i, r in enumerate(outcomes)
                   if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
        if "stop_when_error" in ctx.stats:
            crashed.append(f"stop_when: {ctx.stats['stop_when_error']}")
        for line in crashed:
            _say(options, f"WARNING: {line}")
        recovery_s = await _wait_recovery(nemesis, options.recovery_timeout_s)
        _say(options, f"recovered in {recovery_s} s" if recovery_s is not None
             else f"NOT recovered within {options.recovery_timeout_s} s")
        final = await workload.final(ctx, time.monotonic() + options.final_timeout_s) or {}
        progress.cancel()
        epoch_end = await _controller_epoch(nemesis)
    elections = (max(0, epoch_end - epoch_start)
                 if epoch_start is not None and epoch_end is not None else None)
    return {"heal": heal, "recovery_s": recovery_s, "recovered": recovery_s is not None,
            "faults_applied": nemesis.applied, "controller_leader_elections": elections,
            "crashed_tasks": crashed, "stopped_early_s": ctx.stats.get("stopped_early_s"),
            **final}


async def _stop_when(condition: Callable[[ClusterNemesis], Awaitable[bool]],
                     nemesis: ClusterNemesis, deadline: float) -> bool:
    """True once `condition` holds; False at the deadline (the phase then ends by itself)."""
    while time.monotonic() < deadline:
        if await condition(nemesis):
            return True
        await asyncio.sleep(STOP_POLL_S)  # poll interval
    return False


async def _controller_epoch(nemesis: ClusterNemesis) -> int | None:
    """The highest controller leader epoch any controller reports (None if none answers)."""
    views = await asyncio.gather(*(nemesis._status(i) for i in nemesis.node_ids))
    epochs = [v["leader_epoch"] for v in views
              if v is not None and isinstance(v.get("leader_epoch"), int)]
    return max(epochs) if epochs else None


def run(options: RunOptions, net: Netns | None = None) -> RunResult:
    """One run. `net`: namespaces the cluster in `options.data_dir` already runs in (a soak's;
    the caller created them and deletes them); None: `options.net` decides."""
    parse_nemesis(options.nemesis)  # bad names fail before anything starts
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


def finish(options: RunOptions, workload: Workload, rec: Recorder,
           info: dict[str, Any]) -> RunResult:
    out_dir = options.out_dir
    try:
        ops = rec.operations()
    except HistoryError as exc:  # a recorder bug; the history is on disk for inspection
        raise RunError(f"recorded history is malformed: {exc}") from exc
    _say(options, f"checking {sum(1 for op in ops if op.is_client)} operations")
    if isinstance(workload, QueueWorkload) and "partition_leader_elections" in info:
        # the brokers' logs (copied by now) fill in leader states the watcher did not see
        info = {**info, **workload.count_elections(out_dir / "logs")}
    outcome = workload.check(ops, out_dir)
    verdict = outcome.verdict
    if verdict == "valid" and not info["recovered"]:
        verdict = "unknown"  # nothing wrong was seen, but the cluster never came back
    results: dict[str, Any] = {
        "workload": workload.name,
        "nemesis": options.nemesis,
        "faults": list(parse_nemesis(options.nemesis)),
        "seed": options.seed,
        "time_limit_s": options.time_limit_s,
        **workload.describe(),
        "valid": {"valid": True, "invalid": False}.get(verdict),
        "verdict": verdict,
        "anomalies": outcome.anomalies,
        **info,
        "summary": summarise(ops),
        "checker": outcome.checker,
        "options": {k: v for k, v in asdict(options).items()
                    if k not in ("progress", "stop_when")},
        "files": {"history": "history.jsonl", "report_html": "report.html",
                  "report_png": "report.png", **outcome.files},
    }
    cluster = info.get("cluster", {})
    row = build_row(ops, results, wall_ms=int(info.get("wall_ms", 0)),
                    controllers=int(cluster.get("controllers", options.controllers)),
                    brokers=int(cluster.get("brokers", broker_count(options))),
                    started_s=float(info.get("started_s", time.time())),
                    overrides=cluster_overrides(options), logs_dir=out_dir / "logs")
    results["summary_row"] = {"run_id": row.run_id, "nemesis": row.nemesis,
                              "acked_writes": row.acked_writes, "lost_writes": row.lost_writes,
                              "recovery_time_ms": row.recovery_time_ms}
    results["files"].update(write_row(row, out_dir))
    workers = workload.concurrency
    (out_dir / "report.html").write_text(render_html(ops, results, workers), encoding="utf-8")
    write_png(ops, results, workers, out_dir / "report.png")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    code = {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)
    return RunResult(code, verdict, results, out_dir)

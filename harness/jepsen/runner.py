"""A Jepsen-style run on real processes: cluster up, workload under a nemesis, heal, recover,
final phase, check, write the artefacts, cluster down.

Sequence (`run`), every step bounded in time:
1. bring up a 3-controller cluster in a temporary data dir (or `--data-dir`) through the
   launcher (`harness.cluster`), wait for an agreed leader;
2. run the workload's clients and the nemesis schedule together until the time limit (clients
   finish their in-flight operation, each bounded by the op timeout);
3. heal everything (`ClusterNemesis.heal_all`), wait until every controller names the same
   leader (recovery time is measured), run the workload's final phase (final reads);
4. check the history with the workload's checker; write DIR/history.jsonl, DIR/results.json,
   DIR/report.html, DIR/report.png (and the checker's failure view when invalid);
5. bring the cluster down (only the PIDs in its own cluster.json) unless it was already
   running before the run, and copy the node logs into DIR/logs.
Exit codes: 0 valid, 1 anomalies (invalid), 2 unknown (checker gave up, or the cluster never
recovered and the history is still valid), 3 the run could not be done.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness import cluster as cl
from harness.jepsen.history import HistoryError
from harness.jepsen.nemesis import ClusterNemesis, Schedule, parse_nemesis
from harness.jepsen.recorder import Recorder, RunContext, Workload
from harness.jepsen.report import render_html, summarise, write_png
from harness.jepsen.workload_kv import KvOptions, KvWorkload, disable_idempotent_retry

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_ERROR = 0, 1, 2, 3

# Faster failure detection than the defaults, so a short run sees several fault/heal cycles.
DEFAULT_OVERRIDES = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.request.timeout.ms": "1500",
}

WORKLOADS = ("kv",)
PLANNED_WORKLOADS = {"queue": "needs the data plane (brokers' produce/consume), a later issue"}


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
    fault_s: tuple[float, float] = (1.0, 3.0)
    quiet_s: tuple[float, float] = (1.0, 2.0)
    lead_in_s: float = 1.0
    controllers: int = 3
    overrides: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_OVERRIDES))
    startup_timeout_s: float = 30.0
    recovery_timeout_s: float = 20.0
    final_timeout_s: float = 10.0
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    verdict: str
    results: dict[str, Any]
    out_dir: Path


def make_workload(options: RunOptions) -> Workload:
    if options.workload == "kv":
        return KvWorkload(options.kv)
    if options.workload in PLANNED_WORKLOADS:
        raise RunError(f"workload {options.workload!r} is not available yet: "
                       f"{PLANNED_WORKLOADS[options.workload]}")
    raise RunError(f"unknown workload {options.workload!r}; use one of {', '.join(WORKLOADS)}")


def _say(options: RunOptions, message: str) -> None:
    if options.progress is not None:
        options.progress(message)


# ---------------------------------------------------------------------------------- cluster


def already_running(data_dir: Path) -> bool:
    """True if data_dir holds a cluster with running nodes (the run then uses it as is)."""
    if not cl.ClusterFile.path_in(data_dir).exists():
        return False
    return bool(cl.running_nodes(cl.ClusterFile.load(data_dir)))


def bring_up(options: RunOptions, data_dir: Path) -> None:
    """Lay out (or reuse a stopped) cluster in data_dir, start every node, wait for a leader."""
    if cl.ClusterFile.path_in(data_dir).exists():
        cluster = cl.ClusterFile.load(data_dir)
    else:
        cluster = cl.create_cluster(data_dir, options.controllers, options.overrides)
    for node in cluster.nodes:
        cl.start_node(cluster, data_dir, node)
    leader = cl.wait_for_leader(cluster, [n.id for n in cluster.controllers],
                                options.startup_timeout_s, lambda m: _say(options, m))
    _say(options, f"cluster {cluster.cluster_id} up in {data_dir}; leader {leader}")


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


async def _run_async(options: RunOptions, data_dir: Path, workload: Workload,
                     rec: Recorder) -> dict[str, Any]:
    faults = parse_nemesis(options.nemesis)
    cluster = cl.ClusterFile.load(data_dir)
    urls = {n.id: n.admin_url for n in cluster.controllers}
    rng = random.Random(options.seed)
    schedule = Schedule(faults, options.fault_s, options.quiet_s, options.lead_in_s)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=1.0)
    connector = aiohttp.TCPConnector(limit=64)
    # Two sessions: the clients' never resends (a refused connection must mean "not sent");
    # the nemesis's keeps aiohttp's resend (setting or clearing links twice is harmless).
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session, \
            aiohttp.ClientSession(timeout=timeout) as nemesis_session:
        disable_idempotent_retry(session)
        ctx = RunContext(urls, session, rec, random.Random(rng.random()), options.progress)
        nemesis = ClusterNemesis(data_dir, nemesis_session, rec, random.Random(rng.random()),
                                 schedule)
        await workload.setup(ctx)
        rec.restart_clock()
        started = time.monotonic()
        deadline = started + options.time_limit_s
        progress = asyncio.create_task(_progress_loop(options, rec, nemesis, started))
        try:
            workers = [asyncio.create_task(workload.run_worker(ctx, w, deadline))
                       for w in range(workload.concurrency)]
            # bounded: the deadline, plus one op timeout, plus a fault action's own timeouts
            async with asyncio.timeout(options.time_limit_s + workload.op_timeout_s + 30):
                await asyncio.gather(nemesis.run(deadline), *workers)
        finally:
            for task in workers:
                task.cancel()
            _say(options, "time limit reached: healing")
            heal = await nemesis.heal_all()
        recovery_s = await _wait_recovery(nemesis, options.recovery_timeout_s)
        _say(options, f"recovered in {recovery_s} s" if recovery_s is not None
             else f"NOT recovered within {options.recovery_timeout_s} s")
        await workload.final(ctx, time.monotonic() + options.final_timeout_s)
        progress.cancel()
    return {"heal": heal, "recovery_s": recovery_s, "recovered": recovery_s is not None,
            "faults_applied": nemesis.applied}


def run(options: RunOptions) -> RunResult:
    parse_nemesis(options.nemesis)  # bad names fail before anything starts
    workload = make_workload(options)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    temp = options.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="kraftlab-jepsen-")) if temp else options.data_dir
    assert data_dir is not None
    data_dir = data_dir.resolve()
    rec = Recorder()
    owned = not already_running(data_dir)
    if not owned:
        _say(options, f"using the cluster already running in {data_dir} (left running)")
    try:
        if owned:
            bring_up(options, data_dir)
        info = asyncio.run(_run_async(options, data_dir, workload, rec))
    except (cl.ClusterError, OSError) as exc:
        raise RunError(f"run failed: {exc}") from exc
    finally:
        if owned and cl.ClusterFile.path_in(data_dir).exists():
            stuck = bring_down(data_dir)
            if stuck:
                _say(options, f"WARNING: nodes {stuck} did not stop")
        if cl.ClusterFile.path_in(data_dir).exists():
            copy_logs(data_dir, out_dir)
        rec.write(out_dir / "history.jsonl")
        if temp and owned:
            shutil.rmtree(data_dir, ignore_errors=True)
    return finish(options, workload, rec, info)


def finish(options: RunOptions, workload: Workload, rec: Recorder,
           info: dict[str, Any]) -> RunResult:
    out_dir = options.out_dir
    try:
        ops = rec.operations()
    except HistoryError as exc:  # a recorder bug; the history is on disk for inspection
        raise RunError(f"recorded history is malformed: {exc}") from exc
    _say(options, f"checking {sum(1 for op in ops if op.is_client)} operations")
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
        "options": {k: v for k, v in asdict(options).items() if k not in ("progress",)},
        "files": {"history": "history.jsonl", "report_html": "report.html",
                  "report_png": "report.png", **outcome.files},
    }
    workers = workload.concurrency
    (out_dir / "report.html").write_text(render_html(ops, results, workers), encoding="utf-8")
    write_png(ops, results, workers, out_dir / "report.png")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    code = {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)
    return RunResult(code, verdict, results, out_dir)

"""What every target of a Jepsen run shares (harness/jepsen/runner.py: kraftlab's own
cluster; harness/jepsen/target_kafka.py: an Apache Kafka peer): the options, the phases of a run
once its cluster is up, and the check and artefacts at the end.

`run_phases` is steps 2-3 of the runner's sequence for any target: the workload's setup, its
clients and the nemesis schedule together until the time limit (or `stop_when`), the heal, the
wait for the cluster to recover, and the workload's final phase. A target hands it its nemesis
(an object with `run(deadline)`, `heal_all()`, `active`, `applied`) and two probes of its
metadata quorum: `recovered(timeout_s)` (seconds until it agreed on a leader, or None) and
`controller_epoch()` (the highest controller leader epoch it reports, or None).

`finish` checks the history with the workload's checker and writes DIR/history.jsonl's
companions: results.json, report.html, report.png and the summary row, each naming the system
the run ran against (`system`: `kraftlab` or `kafka`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.check.history import HistoryError
from harness.check.report import render_html, summarise, write_png
from harness.jepsen.nemesis import parse_nemesis
from harness.jepsen.recorder import Recorder, RunContext, Workload
from harness.jepsen.summary_row import build_row, write_row
from harness.jepsen.workload_kv import KvOptions
from harness.jepsen.workload_queue import QueueOptions, QueueWorkload

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
# What a run runs against: kraftlab's own cluster, or Apache Kafka (harness/peers/kafka).
SYSTEMS = ("kraftlab", "kafka")
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
    stop_when: Callable[[Any], Awaitable[bool]] | None = None
    # Hold the first fault until this holds (polled every STOP_POLL_S, asked with the
    # recorder; the lead-in runs after it, the time limit stays the bound). Tests use it to
    # fault only a cluster that has served the workload (e.g. a write acknowledged on every
    # partition), instead of guessing how long clients take to get going.
    start_when: Callable[[Recorder], Awaitable[bool]] | None = None
    # "loopback": every node on 127.0.0.1, partitions by the nodes' link filter; "netns":
    # each node in its own network namespace, partitions by the kernel (module docstring).
    net: str = "loopback"
    # "kraftlab": kraftlab's own cluster (harness/launcher); "kafka": an Apache Kafka KRaft
    # cluster started by the peer kit (harness/jepsen/target_kafka.py, docs/kafka-peer.md).
    system: str = "kraftlab"


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    verdict: str
    results: dict[str, Any]
    out_dir: Path


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


async def _progress_loop(options: RunOptions, rec: Recorder, nemesis: Any, started: float) -> None:
    while True:
        await asyncio.sleep(1.0)  # display cadence
        c = rec.completions
        fault = nemesis.active.describe() if nemesis.active is not None else "-"
        _say(
            options,
            f"[{time.monotonic() - started:5.1f}s] ok {c['ok']} fail {c['fail']} "
            f"info {c['info']} | nemesis: {fault}",
        )


async def run_phases(
    options: RunOptions,
    workload: Workload,
    rec: Recorder,
    ctx: RunContext,
    nemesis: Any,
    recovered: Callable[[float], Awaitable[float | None]],
    controller_epoch: Callable[[], Awaitable[int | None]],
) -> dict[str, Any]:
    """Setup, clients and nemesis until the time limit, heal, recovery, final phase (module
    docstring); the run's facts for results.json."""
    epoch_start = await controller_epoch()
    await workload.setup(ctx)
    rec.restart_clock()
    started = time.monotonic()
    deadline = started + options.time_limit_s
    progress = asyncio.create_task(_progress_loop(options, rec, nemesis, started))
    # The nemesis and the clients are tasks the runner owns: whatever ends the phase (the
    # deadline, a bound, a crashed task), every one of them has stopped before heal_all
    # runs, so the heal never races a fault action still in progress.
    tasks = [asyncio.create_task(_nemesis_after(options.start_when, rec, nemesis, deadline))]
    tasks += [
        asyncio.create_task(workload.run_worker(ctx, w, deadline))
        for w in range(workload.concurrency)
    ]
    outcomes: list[Any] = []
    phase = asyncio.gather(*tasks, return_exceptions=True)
    stopper = (
        asyncio.create_task(_stop_when(options.stop_when, nemesis, deadline))
        if options.stop_when is not None
        else None
    )
    try:
        # bounded: the deadline, plus one op timeout, plus a fault action's own timeouts
        async with asyncio.timeout(options.time_limit_s + workload.op_timeout_s + 30):
            if stopper is None:
                await phase
            else:
                waited: list[asyncio.Future[Any]] = [phase, stopper]
                await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
                if (
                    not phase.done()
                    and stopper.done()
                    and stopper.exception() is None
                    and stopper.result()
                ):
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
    crashed = [
        f"{'nemesis' if i == 0 else f'worker {i - 1}'}: {r!r}"
        for i, r in enumerate(outcomes)
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    ]
    if "stop_when_error" in ctx.stats:
        crashed.append(f"stop_when: {ctx.stats['stop_when_error']}")
    for line in crashed:
        _say(options, f"WARNING: {line}")
    recovery_s = await recovered(options.recovery_timeout_s)
    _say(
        options,
        f"recovered in {recovery_s} s"
        if recovery_s is not None
        else f"NOT recovered within {options.recovery_timeout_s} s",
    )
    final = await workload.final(ctx, time.monotonic() + options.final_timeout_s) or {}
    progress.cancel()
    epoch_end = await controller_epoch()
    elections = (
        max(0, epoch_end - epoch_start)
        if epoch_start is not None and epoch_end is not None
        else None
    )
    return {
        "heal": heal,
        "recovery_s": recovery_s,
        "recovered": recovery_s is not None,
        "faults_applied": nemesis.applied,
        "controller_leader_elections": elections,
        "crashed_tasks": crashed,
        "stopped_early_s": ctx.stats.get("stopped_early_s"),
        **final,
    }


async def _stop_when(
    condition: Callable[[Any], Awaitable[bool]], subject: Any, deadline: float
) -> bool:
    """True once `condition(subject)` holds; False at the deadline."""
    while time.monotonic() < deadline:
        if await condition(subject):
            return True
        await asyncio.sleep(STOP_POLL_S)  # poll interval
    return False


def served_on_every_partition(partitions: int) -> Callable[[Recorder], Awaitable[bool]]:
    """A `RunOptions.start_when`: a send was acknowledged on each of the topic's `partitions`
    (the queue workload's send completions name their partition), so a fault that follows has
    writes before it on whichever partition it picks, and a run measures the fault, not the
    clients' start-up."""

    async def condition(rec: Recorder) -> bool:
        acked = {e.value[0] for e in rec.events if e.f == "send" and e.type == "ok"}
        return len(acked) >= partitions

    return condition


async def _nemesis_after(
    start_when: Callable[[Recorder], Awaitable[bool]] | None,
    rec: Recorder,
    nemesis: Any,
    deadline: float,
) -> None:
    """The nemesis's schedule, once `start_when` holds (at once without one). A condition
    that never holds leaves the run unfaulted: results.json's faults_applied says 0."""
    if start_when is None or await _stop_when(start_when, rec, deadline):
        await nemesis.run(deadline)


def finish(
    options: RunOptions, workload: Workload, rec: Recorder, info: dict[str, Any]
) -> RunResult:
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
        "system": options.system,
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
        "options": {
            k: v
            for k, v in asdict(options).items()
            if k not in ("progress", "stop_when", "start_when")
        },
        "files": {
            "history": "history.jsonl",
            "report_html": "report.html",
            "report_png": "report.png",
            **outcome.files,
        },
    }
    cluster = info.get("cluster", {})
    row = build_row(
        ops,
        results,
        wall_ms=int(info.get("wall_ms", 0)),
        controllers=int(cluster.get("controllers", options.controllers)),
        brokers=int(cluster.get("brokers", broker_count(options))),
        started_s=float(info.get("started_s", time.time())),
        overrides=cluster_overrides(options),
        logs_dir=out_dir / "logs",
    )
    results["summary_row"] = {
        "run_id": row.run_id,
        "system": row.system,
        "nemesis": row.nemesis,
        "acked_writes": row.acked_writes,
        "lost_writes": row.lost_writes,
        "recovery_time_ms": row.recovery_time_ms,
    }
    results["files"].update(write_row(row, out_dir))
    workers = workload.concurrency
    (out_dir / "report.html").write_text(render_html(ops, results, workers), encoding="utf-8")
    write_png(ops, results, workers, out_dir / "report.png")
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    code = {"valid": EXIT_VALID, "invalid": EXIT_INVALID}.get(verdict, EXIT_UNKNOWN)
    return RunResult(code, verdict, results, out_dir)

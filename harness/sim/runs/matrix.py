"""`kraftlab sim matrix`: the scenario matrix of the replication-mode comparison (docs/compare.md)
over the data-plane simulation, one summary row per run in the run-summary schema
(harness/results/schema.py).

The matrix is replication.mode x acks x min.insync.replicas x unclean x ELR x RF x nemesis x
fault duration x seeds (`MatrixSpec`); `default_spec()` is the matrix `kraftlab compare` runs
(the three modes, the main settings DEFAULT_SETTINGS, every nemesis, faults of 1 and 5 s, 20
seeds, seeded start times). `summarize(result)` turns one run
(harness/sim/runs/scenario_run.py) into a RunSummary; it is a pure function of the run's config
except `wall_duration_ms`, so two engines give equal rows apart from that column.

Engines: `run_local` fans runs out over worker processes (multiprocessing, one per core) and
prints a progress line (runs done, runs/s, simulated s per wall s); harness/spark/matrix.py
runs slices as Spark tasks.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from harness.results.row import NemesisEvent, RunSummary, SecondCounts, Window
from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs.cluster import DataTiming
from harness.sim.runs.measures import latency_columns, probe_columns, visibility_columns
from harness.sim.runs.replay import replay_command
from harness.sim.runs.scenario_run import (
    WORKLOAD_START_MS,
    ScenarioConfig,
    ScenarioResult,
    run_scenario,
)

# World violations that are simulator invariants (the run is wrong, not a finding): `kraftlab sim
# matrix` exits 1 on any. divergence-below-hw is one only where it must hold (leader epochs on,
# no unclean election, no lost disk tail: checks/replicas.py on_high_watermark); elsewhere the
# world counts it apart (Counters.divergence_after_loss), since the loss rewrites the prefix.
BROKEN_INVARIANTS = ("hw-above-isr-leo", "leader-epoch-regressed", "divergence-below-hw:",
                     "quorum-safety", "two-leaders", "hw-regressed", "hw-above-majority-leo")
UNAVAILABLE_GAP_MS = 1000  # no acknowledged write for this long: an unavailability window
MODES = ("isr", "quorum", "raft")
# Settings that do not apply to replication.mode=raft (no unclean election, no ELR, leader epochs
# always on): the product of dimensions skips raft with any of them changed (configs()).
RAFT_FIXED = {"unclean": False, "elr": False, "leader_epoch": True}
ACKS = ("1", "all")
DURATIONS_MS = (1000, 5000, 30000)
# Seeds alone vary only the network's 1-3 ms delays and a few victim choices, which left the
# runs of one cell almost identical; seeded broker and producer start times
# (ScenarioConfig.start_jitter_ms) also vary where the fault falls against writes in flight,
# heartbeats, fetches and HW checkpoints.
MATRIX_START_JITTER_MS = 500
# The flush policies each replication mode may run with (harness.sim.actors.disk); None, the
# cost-free disk, with any.
FLUSH_POLICIES_OF_MODE: dict[str, tuple[str | None, ...]] = {
    "isr": (None, "page-cache", "flush-every-message"),
    "quorum": (None, "fsync-before-ack", "no-fsync"),
    # Raft partitions fsync through their host (harness.sim.actors.raft_host), always.
    "raft": (None, "fsync-before-ack"),
}


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    modes: tuple[str, ...] = MODES
    acks: tuple[str, ...] = ACKS
    min_isr: tuple[int, ...] = (1, 2)
    unclean: tuple[bool, ...] = (False, True)
    elr: tuple[bool, ...] = (False, True)
    leader_epoch: tuple[bool, ...] = (True,)  # leader.epoch.enable (False: pre-KIP-101)
    rf: tuple[int, ...] = (3, 5)
    nemeses: tuple[str, ...] = NEMESES
    durations_ms: tuple[int, ...] = DURATIONS_MS
    seeds: int = 20
    first_seed: int = 1
    start_jitter_ms: int = MATRIX_START_JITTER_MS
    # The metadata side (ScenarioConfig.metadata): the comparison's runs are whole clusters, so a Raft
    # quorum of 3 simulated voters by default; "abstract" keeps the single fixed-delay controller.
    metadata: str = "raft"
    settings: tuple[tuple[Any, ...], ...] | None = None  # explicit
    # (mode, acks, min_isr, unclean, elr, leader_epoch[, flush_policy]) instead of the product
    # of the lists (a setting without a flush policy takes each of `flush_policies`)
    # The study's dimensions: the disk (flush policies a mode may run with, see
    # FLUSH_POLICIES_OF_MODE), the writers, and the timeouts swept for the trade-off curves
    # (empty: DataTiming's).
    flush_policies: tuple[str | None, ...] = (None,)
    producer: str = "simple"
    probe_interval_ms: int = 0
    lag_ms: tuple[int, ...] = ()
    session_ms: tuple[int, ...] = ()
    # Raft partitions' election timeouts (raft-mode settings only; empty: drawn per seed).
    election_ms: tuple[int, ...] = ()

    def timings(self) -> list[DataTiming]:
        base = DataTiming()
        return [replace(base, replica_lag_time_max_ms=lag, session_timeout_ms=session)
                for lag, session in itertools.product(
                    self.lag_ms or (base.replica_lag_time_max_ms,),
                    self.session_ms or (base.session_timeout_ms,))]

    def _settings(self) -> list[tuple[Any, ...]]:
        """(mode, acks, min_isr, unclean, elr, epochs, flush policy) of every setting."""
        settings = self.settings or tuple(itertools.product(
            self.modes, self.acks, self.min_isr, self.unclean, self.elr, self.leader_epoch))
        out = []
        for setting in settings:
            policies = setting[6:] or self.flush_policies
            for policy in policies:
                if policy in FLUSH_POLICIES_OF_MODE.get(setting[0], (None,)):
                    out.append((*setting[:6], policy))
        return out

    def configs(self) -> list[ScenarioConfig]:
        """Every run, in a fixed order (settings, rf, timing, election timeout, nemesis, duration,
        seed)."""
        out: list[ScenarioConfig] = []
        elections: tuple[int | None, ...] = self.election_ms or (None,)
        for (mode, acks, min_isr, unclean, elr, epochs, policy), rf, timing, election in \
                itertools.product(self._settings(), self.rf, self.timings(), elections):
            if min_isr > rf or (election is not None and mode != "raft"):
                continue
            if mode == "raft" and (unclean, elr, epochs) != tuple(RAFT_FIXED.values()):
                continue
            for nemesis in self.nemeses:
                durations = self.durations_ms[:1] if nemesis == "none" else self.durations_ms
                for duration, seed in itertools.product(
                        durations, range(self.first_seed, self.first_seed + self.seeds)):
                    out.append(ScenarioConfig(
                        seed=seed, replication_mode=mode, acks=acks, min_insync_replicas=min_isr,
                        unclean_leader_election=unclean, eligible_leader_replicas=elr,
                        leader_epoch_enable=epochs,
                        replication_factor=rf, nemesis=nemesis,
                        fault_duration_ms=0 if nemesis == "none" else duration,
                        start_jitter_ms=self.start_jitter_ms, metadata=self.metadata,
                        flush_policy=policy, producer=self.producer,
                        probe_interval_ms=self.probe_interval_ms, timing=timing,
                        raft_election_timeout_ms=election))
        return out


# The main settings (mode, acks, min.insync.replicas, unclean, ELR, leader.epoch.enable) for
# the default matrix, each there for a claim of the comparison (harness/spark/conclude.py rules):
# ISR's durability ladder (acks=1, acks=all with min ISR 1 and 2), unclean election at min ISR 1
# and 2 (the cut-off leader losing leadership, and the loss/availability trade),
# pre-KIP-101 truncation against its epoch-enabled twin (divergence needs an unclean election
# or a lost disk tail: a clean election never hands leadership to a shorter log), ELR (KIP-966),
# quorum mode, and raft mode's acks=all (a Raft group per partition: docs/replication.md)
# beside quorum mode's (min.insync.replicas does not apply to it: the 2 pairs its rows with
# quorum's). A raft run costs about 1.5 times an ISR run: the one raft row adds about a sixth
# to the default matrix's time (docs/simulation.md); acks=1 raft cells are one option away.
DEFAULT_SETTINGS: tuple[tuple[str, str, int, bool, bool, bool], ...] = (
    ("isr", "1", 1, False, False, True),
    ("isr", "all", 1, False, False, True),
    ("isr", "all", 1, True, False, True),
    ("isr", "all", 1, True, False, False),
    ("isr", "all", 2, False, False, True),
    ("isr", "all", 2, True, False, True),
    ("isr", "all", 2, False, True, True),
    ("quorum", "1", 1, False, False, True),
    ("quorum", "all", 2, False, False, True),
    ("raft", "all", 2, False, False, True),
)


# Budget: the default matrix (both modes, the main settings, every nemesis, 20 seeds) runs in
# under 10 minutes on 2 cores; docs/benchmarks.md has the measured time.
DEFAULT_SEEDS = 20


def default_spec(seeds: int = DEFAULT_SEEDS, metadata: str = "raft") -> MatrixSpec:
    return MatrixSpec(rf=(3,), durations_ms=(1000, 5000), seeds=seeds,
                      settings=DEFAULT_SETTINGS, metadata=metadata)


# -- one run -> one row -------------------------------------------------------------------------


def _per_second(result: ScenarioResult) -> tuple[SecondCounts, ...]:
    first = WORKLOAD_START_MS // 1000
    last = (result.workload_end_ms - 1) // 1000
    counts = {s: dict.fromkeys(("wa", "ws", "wf", "wi", "ra", "rs", "rf", "ri"), 0)
              for s in range(first, last + 1)}
    opened: dict[Any, tuple[str, int]] = {}
    for e in result.history.events:
        if e.extra.get("final") or e.extra.get("probe"):
            continue
        if e.type == "invoke":
            opened[e.process] = (e.f, e.time // 1_000_000_000)
            continue
        f, second = opened.pop(e.process, (e.f, -1))
        if second not in counts:
            continue
        kind = "w" if f == "send" else "r"
        c = counts[second]
        c[kind + "a"] += 1
        c[kind + {"ok": "s", "fail": "f"}.get(e.type, "i")] += 1
    for f, second in opened.values():  # never completed: indeterminate
        if second in counts:
            kind = "w" if f == "send" else "r"
            counts[second][kind + "a"] += 1
            counts[second][kind + "i"] += 1
    return tuple(SecondCounts(s, c["wa"], c["ws"], c["wf"], c["wi"], c["ra"], c["rs"], c["rf"],
                              c["ri"]) for s, c in sorted(counts.items()))


def _ok_write_times(result: ScenarioResult) -> list[int]:
    return [e.time // 1_000_000 for e in result.history.events
            if e.f == "send" and e.type == "ok" and not e.extra.get("probe")]


def _windows(result: ScenarioResult) -> tuple[Window, ...]:
    times = [t for t in _ok_write_times(result) if t <= result.workload_end_ms]
    out = []
    previous = times[0] if times else WORKLOAD_START_MS
    for t in [*times[1:], result.workload_end_ms]:
        if t - previous >= UNAVAILABLE_GAP_MS:
            out.append(Window(previous, t))
        previous = t
    return tuple(out)


def _recovery_ms(result: ScenarioResult) -> int | None:
    if result.heal_ms is None:
        return None
    after = [t for t in _ok_write_times(result) if t >= result.heal_ms]
    return after[0] - result.heal_ms if after else None


def summarize(result: ScenarioResult) -> RunSummary:
    c = result.config
    counts = result.queue.counts
    acked = sum(1 for e in result.history.events if e.f == "send" and e.type == "ok")
    # Replicas disagreeing below their HWs at the end (KIP-101 divergence). Not the client-side
    # `inconsistent-offsets` nor the transient `divergence-below-hw`: both also count the offsets
    # of lost writes reused by later ones, which is loss (counted in lost_writes), and made 31 of
    # 405 epoch-enabled ISR runs look divergent in an earlier count.
    divergent = result.divergent_offsets
    return RunSummary(
        run_id=c.key(), source="sim", seed=c.seed, replication_mode=c.replication_mode,
        acks=c.acks, min_insync_replicas=c.min_insync_replicas,
        unclean_leader_election=c.unclean_leader_election,
        eligible_leader_replicas=c.eligible_leader_replicas,
        leader_epoch_enable=c.leader_epoch_enable, replication_factor=c.replication_factor,
        brokers=c.brokers, nemesis=c.nemesis, fault_duration_ms=c.fault_duration_ms,
        duration_ms=result.workload_end_ms, wall_duration_ms=result.wall_ms,
        nemesis_timeline=tuple(NemesisEvent(s.start_ms, s.end_ms, s.kind)
                               for s in result.timeline),
        per_second=_per_second(result), unavailability_windows=_windows(result),
        fault_start_ms=result.fault_start_ms, fault_end_ms=result.fault_end_ms,
        heal_ms=result.heal_ms, acked_writes=acked,
        lost_writes=min(counts.get("lost-write", 0), acked),
        duplicates=counts.get("duplicate", 0), divergent_offsets=divergent,
        stale_reads=0,
        nonmonotonic_reads=counts.get("nonmonotonic-poll", 0)
        + counts.get("int-nonmonotonic-poll", 0),
        metadata_linearizable=None, recovery_time_ms=_recovery_ms(result),
        leader_elections=result.leader_elections,
        unclean_elections=min(result.unclean_elections, result.leader_elections),
        isr_shrinks=result.isr_shrinks, isr_expands=result.isr_expands,
        metadata_quorum=c.metadata,
        flush_policy=c.flush_policy, producer=c.producer,
        replica_lag_time_max_ms=c.timing.replica_lag_time_max_ms,
        broker_session_timeout_ms=c.timing.session_timeout_ms,
        election_timeout_ms=c.raft_election_timeout_ms,
        **latency_columns(result.history.events, result.fault_start_ms, result.heal_ms,
                          result.first_leader_ms),
        **probe_columns(result.history.events, c.probe_interval_ms, result.fault_start_ms,
                        result.heal_ms, result.workload_end_ms),
        **visibility_columns(result.history.events, result.hw_marks, result.fault_start_ms,
                             result.heal_ms),
        replay_command=replay_command(c),
    )


@dataclass(frozen=True, slots=True)
class RunOutput:
    row: RunSummary
    sim_ms: int
    invariant_violations: tuple[str, ...]  # hw-above-isr-leo / leader-epoch-regressed examples
    history: tuple[dict[str, Any], ...] = ()


def run_one(config: ScenarioConfig, keep_history: bool = False) -> RunOutput:
    """One run (logging is left as configured: workers and the CLI quiet it)."""
    result = run_scenario(config)
    bad = tuple(x for x in result.violation_examples
                if any(name in x for name in BROKEN_INVARIANTS))
    history = tuple(e.to_json() for e in result.history.events) if keep_history else ()
    return RunOutput(summarize(result), result.sim_ms, bad, history)


def config_to_dict(config: ScenarioConfig) -> dict[str, Any]:
    """Plain values (a worker process or Spark task rebuilds the config from them)."""
    out = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "timing"}
    out["timing"] = {f.name: getattr(config.timing, f.name) for f in fields(config.timing)}
    return out


def config_from_dict(values: dict[str, Any]) -> ScenarioConfig:
    values = dict(values)
    timing = values.pop("timing", None)
    config = replace(ScenarioConfig(), **values)
    return config if timing is None else replace(config, timing=DataTiming(**timing))


# -- the local engine -----------------------------------------------------------------------------


class Progress:
    """Runs done, runs/s, simulated seconds per wall second and the time left, on stderr: one
    line redrawn every second on a terminal; a new line every `log_interval_s` otherwise (a log
    file or CI output gets readable lines, not thousands of carriage returns)."""

    def __init__(self, total: int, stream: Any = sys.stderr, log_interval_s: float = 15.0) -> None:
        self.total = total
        self.done = 0
        self.sim_ms = 0
        self.started = time.monotonic()
        self.stream = stream
        # None, not 0.0: monotonic time starts near zero on a freshly booted machine, so a
        # zero start would hold back the first line for `interval_s` after boot.
        self._last: float | None = None
        isatty = getattr(stream, "isatty", None)
        self.terminal = bool(isatty is not None and isatty())
        self.interval_s = 1.0 if self.terminal else log_interval_s

    def add(self, sim_ms: int) -> None:
        self.advance(1, sim_ms)

    def advance(self, runs: int, sim_ms: int) -> None:
        """`runs` more runs done, `sim_ms` simulated ms between them (the Spark engine reports
        whole tasks at a time)."""
        self.done += runs
        self.sim_ms += sim_ms
        now = time.monotonic()
        due = self._last is None or now - self._last >= self.interval_s
        if due or self.done == self.total:
            self._last = now
            if self.terminal:
                self.stream.write("\r" + self.line())
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(self.line() + "\n")
            self.stream.flush()

    @property
    def wall_s(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    def line(self) -> str:
        width = 30
        filled = width * self.done // max(self.total, 1)
        rate = self.done / self.wall_s
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs "
                f"{rate:.1f} runs/s "
                f"{self.sim_ms / 1000 / self.wall_s:.0f} sim s/wall s"
                f"{eta(self.total - self.done, rate)}")


def eta(left: int, rate: float) -> str:
    """` ETA 1h02m` from runs left and runs/s; empty before the first run and at the end."""
    if left <= 0 or rate <= 0:
        return ""
    seconds = int(left / rate)
    hours, rest = divmod(seconds, 3600)
    return f" ETA {hours}h{rest // 60:02d}m" if hours else f" ETA {rest // 60}m{rest % 60:02d}s"


def _work(args: tuple[dict[str, Any], bool]) -> RunOutput:
    return run_one(config_from_dict(args[0]), args[1])


def _quiet_worker() -> None:
    from harness.sim.runs.runner import quiet_logging

    quiet_logging()


def run_local(configs: Sequence[ScenarioConfig], jobs: int | None = None,
              keep_history: bool = False, progress: Progress | None = None,
              on_output: Callable[[RunOutput], None] | None = None) -> list[RunOutput]:
    """Every run, results in the order of `configs` (runs are independent and pure)."""
    jobs = jobs or os.cpu_count() or 2
    tasks = [(config_to_dict(c), keep_history) for c in configs]
    outputs: list[RunOutput] = []

    def collect(outs: Iterable[RunOutput]) -> None:
        for out in outs:
            outputs.append(out)
            if progress is not None:
                progress.add(out.sim_ms)
            if on_output is not None:
                on_output(out)

    if jobs <= 1 or len(tasks) <= 1:
        collect(_work(t) for t in tasks)
    else:
        ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
        with ctx.Pool(jobs, initializer=_quiet_worker) as pool:
            collect(pool.imap(_work, tasks, chunksize=max(1, min(8, len(tasks) // (jobs * 8)))))
    return outputs


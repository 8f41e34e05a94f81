"""Running many seeds: in this process or fanned out over worker processes, with the results
reduced to small picklable summaries (a full run keeps its history only in its own process).

Each seed is independent and deterministic, so the order runs finish in does not matter; the
summaries come back in seed order (`Pool.imap`), so output is the same for any `jobs`.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

from harness.sim.kernel.events import SIM_CLOCK
from harness.sim.runs.simulation import SimConfig, run_seed

A = TypeVar("A")
B = TypeVar("B")


@dataclass(frozen=True, slots=True)
class RunSummary:
    seed: int
    ok: bool
    violation: str | None
    replay_command: str
    digest: str
    events: int
    sim_ms: int
    committed: int
    epochs: int
    faults: tuple[tuple[str, int], ...] = ()  # nemesis actions taken, by kind
    client_ok: int = 0
    paths: tuple[tuple[str, int], ...] = ()  # code paths reached: truncate, install_snapshot...
    trace_tail: tuple[str, ...] = ()

    @property
    def invariant(self) -> str | None:
        return None if self.violation is None else self.violation.split(" at ", 1)[0]


_CODE_ROOTS = ("quorum", "partition", "harness/sim", "harness/drive")


def code_fingerprint() -> str:
    """A short hash of the source a simulation runs (cores, log, drivers, simulator). A seed
    replays bit-for-bit only on the same code: failing seeds are reported with this."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.blake2b(digest_size=6)
    for name in _CODE_ROOTS:
        path = root / name
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for f in files:
            digest.update(str(f.relative_to(root)).encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()


def _stamp_sim_time(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    event_dict["sim_ms"] = SIM_CLOCK.now_ms
    return event_dict


def quiet_logging(level: int = logging.ERROR) -> None:
    """The cores and the log log through structlog; simulated runs only want errors by default
    (thousands of runs, each with crashes and truncations, would otherwise print millions of
    warnings). Lines carry the simulated time (`sim_ms`), never the wall clock, so a seed's log
    is byte-identical on every run (`kraftlab --log-level info sim quorum --seed S`)."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _stamp_sim_time,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def summarize(config: SimConfig) -> RunSummary:
    result = run_seed(config)
    v = result.violation
    return RunSummary(
        seed=config.seed,
        ok=v is None,
        violation=None if v is None else str(v),
        replay_command=config.replay_command(),
        digest=result.digest,
        events=result.events,
        sim_ms=result.sim_ms,
        committed=int(result.stats.get("committed", 0)),
        epochs=int(result.stats.get("epochs", 0)),
        faults=tuple(sorted(result.stats.get("nemesis", {}).items())),
        client_ok=int(result.stats.get("client", {}).get("ok", 0)),
        paths=tuple(sorted(result.stats.get("paths", {}).items())),
        trace_tail=() if v is None else tuple(result.trace_tail),
    )


def run_many(
    configs: Iterable[SimConfig],
    jobs: int = 1,
    worker: Callable[[SimConfig], RunSummary] = summarize,
) -> Iterator[RunSummary]:
    """Summaries in the order of `configs` (logging quiet here too when run here)."""
    if jobs <= 1:
        quiet_logging()
    yield from map_in_order(worker, configs, jobs, chunksize=4)


def map_in_order(fn: Callable[[A], B], items: Iterable[A], jobs: int,
                 chunksize: int = 1) -> Iterator[B]:  # fmt: skip
    """`fn` over `items`, results in the order of `items`: here with `jobs` <= 1, else in
    `jobs` forked processes whose logging is quiet (quiet_logging)."""
    if jobs <= 1:
        for item in items:
            yield fn(item)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(jobs, initializer=quiet_logging) as pool:
        yield from pool.imap(fn, items, chunksize=chunksize)


@dataclass(slots=True)
class Totals:
    runs: int = 0
    violations: int = 0
    events: int = 0
    sim_ms: int = 0
    wall_started: float = 0.0

    def add(self, summary: RunSummary) -> None:
        self.runs += 1
        self.violations += 0 if summary.ok else 1
        self.events += summary.events
        self.sim_ms += summary.sim_ms

    @property
    def wall_s(self) -> float:
        return time.monotonic() - self.wall_started  # measuring the harness, not simulated time

    def speed(self) -> float:
        """Simulated seconds per wall-clock second."""
        return (self.sim_ms / 1000) / max(self.wall_s, 1e-9)

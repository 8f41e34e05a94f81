"""The live history of a real-process run, and the interface a workload implements.

`Recorder` appends events (docs/jepsen.md) as the run's single asyncio loop observes them: an
invoke is recorded *before* the request leaves, a completion *after* the answer arrived. The
loop is single-threaded, so the order of `events` (their `index`) is a real-time order that
the checkers may rely on: if the completion of op A precedes the invoke of op B in the list,
A really returned before B was called. `time` is nanoseconds since the recorder was created (monotonic
clock), for reports only.

`Workload` is the pluggable part of a run (`kv`, workload_kv.py; `queue`, workload_queue.py):
clients that record operations, a final phase after the cluster healed (final reads, a drain)
and the checker that judges the history. `RunContext` is what the runner hands a workload.

Invariants:
- every client operation is an invoke followed by exactly one completion of the same `f` by
  the same process; a client whose operation ended `info` continues under a new process id
  (`ProcessIds.retire`), as Jepsen does, so an open operation never blocks its process;
- nemesis operations are recorded by process "nemesis" as two `info` events (start, done).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from harness.check.history import NEMESIS, Event, Operation, pair_operations, write_jsonl


class Recorder:
    """Append-only history with live counters for progress lines."""

    def __init__(self) -> None:
        self._t0_ns = time.monotonic_ns()
        self.events: list[Event] = []
        self.completions: Counter[str] = Counter()  # "ok" / "fail" / "info" of client ops

    def restart_clock(self) -> None:
        """Time zero is when the workload starts (not when the cluster was being started)."""
        assert not self.events, "the clock may only be restarted before the first event"
        self._t0_ns = time.monotonic_ns()

    def now_ns(self) -> int:
        return time.monotonic_ns() - self._t0_ns

    def record(
        self,
        process: Hashable,
        type_: str,
        f: str,
        value: Any,
        error: str | None = None,
        **extra: Any,
    ) -> Event:
        event = Event(
            index=len(self.events),
            time=self.now_ns(),
            process=process,
            type=type_,  # type: ignore[arg-type]
            f=f,
            value=value,
            error=error,
            extra=extra,
        )
        self.events.append(event)
        if process != NEMESIS and type_ != "invoke":
            self.completions[type_] += 1
        return event

    def operations(self) -> list[Operation]:
        return pair_operations(self.events)

    def write(self, path: Path) -> None:
        write_jsonl(self.events, path)


class ProcessIds:
    """Logical Jepsen processes for `workers` concurrent clients.

    Worker w starts as process w; after an indeterminate (info) operation it is retired and the
    worker continues as w + workers, then w + 2*workers, ... So `process % workers` is the
    worker (the report's timeline lane) and no process ever has two open operations.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._current = list(range(workers))

    def current(self, worker: int) -> int:
        return self._current[worker]

    def retire(self, worker: int) -> int:
        self._current[worker] += self.workers
        return self._current[worker]


@dataclass
class RunContext:
    """What the runner gives a workload: where the nodes are, the shared HTTP session, the
    recorder, a seeded RNG and the options of the run."""

    admin_urls: dict[int, str]  # node id -> http://127.0.0.1:port
    session: aiohttp.ClientSession
    recorder: Recorder
    rng: random.Random
    progress: Any = None  # callable(str) or None
    # facts the runner shares with the workload; `healed_at`: time.monotonic() at the end of
    # the final heal (recovery times count from it)
    stats: dict[str, Any] = field(default_factory=dict)
    data_dir: Path | None = None  # the cluster's directory (cluster.json: brokers' addresses)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """A checker's verdict in the shape results.json uses."""

    verdict: str  # "valid" | "invalid" | "unknown"
    anomalies: dict[str, Any]  # anomaly name -> details (empty when valid)
    checker: dict[str, Any]  # the checker's own JSON report
    files: dict[str, str] = field(default_factory=dict)  # extra files written (failure view)


class Workload(Protocol):
    """A pluggable workload: clients, a final phase, and its checker."""

    name: str
    concurrency: int  # client workers (the runner starts one `run_worker` task each)
    op_timeout_s: float  # the bound of one client operation

    def describe(self) -> dict[str, Any]:
        """Workload options worth recording in results.json (e.g. kv read consistency)."""
        ...

    async def setup(self, ctx: RunContext) -> None:
        """Prepare before clients start (create topics, ...)."""
        ...

    async def run_worker(self, ctx: RunContext, worker: int, deadline: float) -> None:
        """One client loop: issue operations until `deadline` (time.monotonic()); every
        operation bounded by the workload's timeout."""
        ...

    async def final(self, ctx: RunContext, deadline: float) -> dict[str, Any] | None:
        """After the final heal and recovery: final reads / drain, bounded by `deadline`.
        May return facts for results.json (e.g. the queue's probe recovery time)."""
        ...

    def check(self, ops: Sequence[Operation], out_dir: Path) -> CheckOutcome:
        """Judge the history (pure, apart from writing a failure view into out_dir)."""
        ...

"""The purgatory: requests parked until their condition holds or their deadline passes, written
once for every partition core (Kafka's DelayedOperationPurgatory; DelayedProduce and
DelayedFetch are its two kinds here too). Its users: the ISR leader's acks=all produces and long
polls (partition.replica.leader), a follower's parked consumer reads
(partition.replica.follower_reads) and a raft partition leader's produces and long polls
(partition.raft.replica).

Sans-IO: time comes in as `now_ms`, deadlines are absolute integer milliseconds, and nothing is
answered here. Every call that takes operations out returns them (or the caller's answers for
them) in park order, and the core turns them into its effects in that order, as Kafka's
DelayedOperation.onComplete answers once, whoever completes it.

The contract:
- `park(op, deadline_ms)`: the op waits, behind every op parked before it.
- `complete(is_satisfied)`: the parked ops whose condition holds now (a produce: the high
  watermark passed its last offset), taken out in park order (Kafka's checkAndComplete).
- `expire(now_ms)`: the parked ops whose deadline is at or before `now_ms`, taken out.
- `fail_all()`: every parked op, taken out; nothing is parked afterwards (leadership lost, or
  ISR below min.insync.replicas: the caller names the error).
- `wake()` / `sweep(now_ms, settle)`: for conditions the core can only check by reading its log
  (a fetch: is there data?), which it may do only after the driver executed the effects of the
  call that changed it. `wake()` says a condition may have changed; the next `sweep` passes
  `woken` to `settle(op, woken, expired)` for each parked op in park order, takes out the ops
  it answers (a value) and keeps those it leaves (None). An op past its deadline must be
  answered (Kafka's onExpiration then onComplete: a timed-out long poll still gets its answer).
- `next_deadline_ms(now_ms)`: None with nothing parked; `now_ms` while a wake waits for the next
  sweep; otherwise the earliest deadline.

Invariants: an op leaves the purgatory exactly once, by the one call that returns it; ops leave
in park order within each call; `fail_all` leaves nothing; `sweep` never keeps an expired op
(PurgatoryUsageError: the caller's settle must answer it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Parked", "Purgatory", "PurgatoryUsageError"]

Op = TypeVar("Op")
R = TypeVar("R")


class PurgatoryUsageError(RuntimeError):
    """The caller broke the contract: a sweep's `settle` left an expired op parked."""


@dataclass(frozen=True, slots=True)
class Parked(Generic[Op]):
    """One parked operation and when its wait ends."""

    op: Op
    deadline_ms: int


class Purgatory(Generic[Op]):
    """Parked operations of one kind, in park order, each with its deadline."""

    __slots__ = ("_parked", "_woken")

    def __init__(self) -> None:
        self._parked: list[Parked[Op]] = []
        self._woken = False

    def __len__(self) -> int:
        return len(self._parked)

    def __iter__(self) -> Iterator[Parked[Op]]:
        return iter(tuple(self._parked))

    @property
    def is_woken(self) -> bool:
        """A wake waits for the next sweep and something is parked to check."""
        return self._woken and bool(self._parked)

    def park(self, op: Op, deadline_ms: int) -> None:
        self._parked.append(Parked(op, deadline_ms))

    def complete(self, is_satisfied: Callable[[Op], bool]) -> list[Op]:
        return self._take(lambda p: is_satisfied(p.op))

    def expire(self, now_ms: int) -> list[Op]:
        return self._take(lambda p: p.deadline_ms <= now_ms)

    def fail_all(self) -> list[Op]:
        failed, self._parked = self._parked, []
        return [p.op for p in failed]

    def wake(self) -> None:
        """A parked op's condition may hold now: checked at the next sweep. A wake with nothing
        parked is kept too, for what is parked before that sweep."""
        self._woken = True

    def sweep(self, now_ms: int, settle: Callable[[Op, bool, bool], R | None]) -> list[R]:
        """`settle(op, woken, expired)` for each parked op in park order: its answer takes it
        out, None keeps it parked. Clears the wake."""
        woken, self._woken = self._woken, False
        answers: list[R] = []
        kept: list[Parked[Op]] = []
        for parked in self._parked:
            expired = parked.deadline_ms <= now_ms
            answer = settle(parked.op, woken, expired)
            if answer is not None:
                answers.append(answer)
            elif expired:
                raise PurgatoryUsageError(f"{parked.op!r} kept past its deadline "
                                         f"{parked.deadline_ms} at {now_ms}")  # fmt: skip
            else:
                kept.append(parked)
        self._parked = kept
        return answers

    def next_deadline_ms(self, now_ms: int) -> int | None:
        if not self._parked:
            return None
        if self._woken:
            return now_ms
        return min(p.deadline_ms for p in self._parked)

    def _take(self, done: Callable[[Parked[Op]], bool]) -> list[Op]:
        taken: list[Op] = []
        kept: list[Parked[Op]] = []
        for parked in self._parked:
            if done(parked):
                taken.append(parked.op)
            else:
                kept.append(parked)
        self._parked = kept
        return taken

"""The simulator's one nemesis: it applies the shapes of harness.sim.faults.shapes.SHAPES to a
run (a FaultTarget, harness.sim.faults.fault) in one of three ways:

- `step()`: the quorum runs' random steps (Jepsen's vocabulary): a kind drawn by the weights of
  the run's NemesisProfile (crash, restart, partition, heal, pause), a partition shape drawn
  uniformly; instant faults, healed by later steps or by the liveness phase. Crashes may take
  down a majority: safety must hold regardless; only the liveness phase needs a majority back.
- `schedule(name, start_ms, duration_ms)`: the scenario matrix's one shape per run, applied at
  `start_ms` and healed `duration_ms` later (plus the shape's restart after the end);
- `schedule_random(shapes, ...)`: `kraftlab sim cluster`'s schedule, one shape at a time drawn
  from a list, each with a drawn duration and a drawn gap before the next.
`heal_all()` ends every fault (network healed, stopped processes restarted, paused ones resumed).

Invariants: every choice draws from the one rng given to the nemesis, in event order, over node
lists in a fixed order, so one seed gives one fault schedule; each applied shape returns a short
description (it goes into the quorum runs' trace digest and the cluster run's fault list); the
timeline of span faults is kept for the run summary.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from harness.sim.faults.fault import Fault, FaultTarget, Span
from harness.sim.faults.shapes import QUORUM_PARTITIONS, SHAPES, STEP_KINDS


@dataclass(frozen=True, slots=True)
class NemesisProfile:
    """How often and how hard the random steps strike during the safety phase.

    `shutdown_weight` is drawn (so a seed's draws stay what they were) but the step does not
    use it: STEP_KINDS has no shutdown; the shape exists for runs that name it."""

    min_interval_ms: int = 50
    max_interval_ms: int = 400
    crash_weight: int = 3
    restart_weight: int = 4
    partition_weight: int = 4
    heal_weight: int = 3
    pause_weight: int = 1
    shutdown_weight: int = 1
    max_pause_ms: int = 600
    torn_writes: bool = True
    # Not drawn (a seed's draws stay what they were): a run that wants clock steps sets it
    # (SimConfig.clock_weight, `kraftlab sim quorum --clock-weight`).
    clock_weight: int = 0

    @classmethod
    def draw(cls, rng: random.Random) -> NemesisProfile:
        return cls(
            min_interval_ms=rng.choice((20, 50, 100)),
            max_interval_ms=rng.choice((200, 400, 800)),
            crash_weight=rng.randint(1, 4),
            restart_weight=4,
            partition_weight=rng.randint(1, 5),
            heal_weight=3,
            pause_weight=rng.randint(0, 2),
            shutdown_weight=rng.randint(0, 2),
            max_pause_ms=rng.choice((200, 600, 1500)),
            torn_writes=rng.random() < 0.8,
        )


def check_shape(name: str) -> None:
    if name not in SHAPES:
        raise ValueError(f"unknown nemesis {name!r}; known: {', '.join(SHAPES)}")


class Nemesis:
    """Applies SHAPES to `target` with `rng`; counts kinds, keeps the timeline of span faults."""

    __slots__ = ("_rng", "counts", "heal_ms", "profile", "target", "timeline")

    def __init__(
        self,
        target: FaultTarget,
        rng: random.Random,
        profile: NemesisProfile | None = None,
    ) -> None:
        self.target = target
        self._rng = rng
        self.profile = profile or NemesisProfile()
        self.counts: dict[str, int] = {}
        self.timeline: list[Span] = []
        self.heal_ms: int | None = None

    # -- applying one shape ------------------------------------------------------------------

    def apply(self, name: str, end_ms: int | None = None) -> str:
        """Apply shape `name` now (until `end_ms`; None: an instant fault); its description."""
        fault = Fault(self.target, self._rng, end_ms, self.profile.max_pause_ms)
        description = SHAPES[name].apply(fault)
        self.timeline += fault.timeline
        if fault.heal_ms is not None:
            self.heal_ms = max(self.heal_ms or 0, fault.heal_ms)
        return description

    # -- the quorum runs' random steps -------------------------------------------------------

    def next_interval_ms(self) -> int:
        return self._rng.randint(self.profile.min_interval_ms, self.profile.max_interval_ms)

    def step(self) -> str:
        """One random instant fault; what it did, e.g. 'crash 2' or 'partition halves [...]'."""
        p = self.profile
        weights = [getattr(p, f"{kind}_weight") for kind in STEP_KINDS]
        kind = self._rng.choices(STEP_KINDS, weights=weights)[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        name = self._rng.choice(QUORUM_PARTITIONS) if kind == "partition" else kind
        return self.apply(name)

    def crash_rng(self) -> random.Random | None:
        """The rng a crash uses to keep a random prefix of unsynced writes (torn writes), or
        None to lose every unsynced byte."""
        return self._rng if self.profile.torn_writes else None

    # -- span faults: the data-plane runs ----------------------------------------------------

    def schedule(self, name: str, start_ms: int, duration_ms: int) -> None:
        """Shape `name` from `start_ms` for `duration_ms` ("none": no fault)."""
        if name == "none":
            return
        check_shape(name)
        self.target.queue.call_at(start_ms, self.apply, name, start_ms + duration_ms)

    def schedule_random(
        self,
        shapes: Sequence[str],
        start_ms: int,
        last_start_ms: int,
        duration_ms: tuple[int, int],
        gap_ms: tuple[int, int],
        faults: list[tuple[int, int, str, str]],
    ) -> None:
        """One fault at a time from `start_ms`: a shape drawn from `shapes`, a duration drawn
        from `duration_ms` (cut to end by `last_start_ms`, unless shorter than its minimum), a
        gap drawn from `gap_ms`; none starts at or after `last_start_ms`. Each fault is appended
        to `faults` as (start ms, end ms, shape, target)."""
        for name in shapes:
            check_shape(name)
        if shapes:
            self.target.queue.call_at(
                start_ms, self._next_random, tuple(shapes), last_start_ms, duration_ms, gap_ms,
                faults,
            )

    def _next_random(
        self,
        shapes: tuple[str, ...],
        last_start_ms: int,
        duration_ms: tuple[int, int],
        gap_ms: tuple[int, int],
        faults: list[tuple[int, int, str, str]],
    ) -> None:
        now_ms = self.target.queue.now_ms
        if now_ms >= last_start_ms:
            return
        name = self._rng.choice(shapes)
        low, high = duration_ms
        end_ms = now_ms + min(self._rng.randint(low, high), max(last_start_ms - now_ms, low))
        description = self.apply(name, end_ms)
        faults.append((now_ms, end_ms, name, description))
        self.target.queue.call_at(
            end_ms + self._rng.randint(*gap_ms), self._next_random, shapes, last_start_ms,
            duration_ms, gap_ms, faults,
        )

    def heal_all(self) -> None:
        """End every fault: heal the network, restart what is down, resume what is paused."""
        t = self.target
        t.network.heal()
        for n in t.node_ids:
            if not t.is_up(n):
                t.restart(n)
            elif t.is_paused(n):
                t.resume(n)

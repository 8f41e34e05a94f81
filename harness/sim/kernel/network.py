"""The simulated network, the one every simulated run uses: per-message delay (with reordering),
drop and duplication, and cut links that the nemesis opens and heals. Pure bookkeeping: the run
schedules the deliveries this module decides on (`Deliver` events, harness.sim.kernel.events)
and checks `can_reach` again when each one arrives.

Model (what real TCP + iptables would do to the nodes' traffic):
- every message gets its own delay, uniform in [min_delay_ms, max_delay_ms], and with
  `slow_probability` a long one up to `slow_max_delay_ms`, so messages overtake each other;
- with `drop_probability` a message is lost, with `duplicate_probability` it arrives twice
  (independent delays), while `faults_enabled`; the liveness phase turns these off;
- a partition is a set of cut directed links; a message crosses a link only if the link is open
  both when it is sent and when it arrives (a cut in between drops it, as iptables would);
- the quorum run's kv client is not on this network: it reaches every live node (it models an
  admin client on another network); the data-plane runs' producers and consumers are, and the
  nemesis may cut them off;
- the data-plane runs use a quiet profile (QUIET: 1-3 ms, no drop, duplicate or slow message):
  their faults are the nemesis' cuts, kills and pauses.

Invariants: every random draw comes from the one seeded `random.Random` given to the network,
in the order messages are sent, so one seed reproduces every delay, drop and duplicate.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NetworkProfile:
    """How hostile the network is during the safety phase."""

    min_delay_ms: int = 1
    max_delay_ms: int = 8
    slow_probability: float = 0.05
    slow_max_delay_ms: int = 150
    drop_probability: float = 0.02
    duplicate_probability: float = 0.01

    @classmethod
    def draw(cls, rng: random.Random) -> NetworkProfile:
        """An aggressive random profile for one seed."""
        min_delay_ms = rng.randint(0, 3)
        return cls(
            min_delay_ms=min_delay_ms,
            max_delay_ms=min_delay_ms + rng.randint(1, 20),
            slow_probability=rng.choice((0.0, 0.02, 0.1)),
            slow_max_delay_ms=rng.randint(50, 400),
            drop_probability=rng.choice((0.0, 0.01, 0.05, 0.15)),
            duplicate_probability=rng.choice((0.0, 0.01, 0.05)),
        )


QUIET = NetworkProfile(
    min_delay_ms=1,
    max_delay_ms=3,
    slow_probability=0.0,
    drop_probability=0.0,
    duplicate_probability=0.0,
)


class SimNetwork:
    """Link state and per-message fate for the simulated cluster."""

    __slots__ = ("_cut", "_rng", "faults_enabled", "profile", "stats")

    def __init__(self, rng: random.Random, profile: NetworkProfile) -> None:
        self._rng = rng
        self.profile = profile
        self._cut: frozenset[tuple[int, int]] = frozenset()
        self.faults_enabled = True
        self.stats = {"sent": 0, "dropped": 0, "duplicated": 0, "cut": 0}

    # -- partitions ------------------------------------------------------------------------------

    def can_reach(self, src: int, dst: int) -> bool:
        return (src, dst) not in self._cut

    def is_partitioned(self) -> bool:
        return bool(self._cut)

    def partition(self, groups: Sequence[Iterable[int]]) -> None:
        """Cut every link between nodes of different groups (both directions). Nodes missing
        from every group keep all their links (used for the bridge)."""
        members = [sorted(g) for g in groups]
        cut: set[tuple[int, int]] = set()
        for i, left in enumerate(members):
            for right in members[i + 1 :]:
                for a in left:
                    for b in right:
                        cut.add((a, b))
                        cut.add((b, a))
        self._cut = frozenset(cut)

    def cut_one_way(self, sources: Iterable[int], destinations: Iterable[int]) -> None:
        """An asymmetric partition: messages from `sources` to `destinations` are lost, the
        other direction still flows (a half-broken NIC or firewall rule)."""
        dsts = sorted(destinations)
        self._cut = frozenset((a, b) for a in sorted(sources) for b in dsts if a != b)

    def cut_between(self, node: int, others: Iterable[int]) -> None:
        """Add to the current cut every link between `node` and each of `others`, both ways
        (the data-plane shapes build their partitions a node at a time)."""
        links = {(a, b) for o in others if o != node for a, b in ((node, o), (o, node))}
        self._cut = self._cut | links

    def heal(self) -> None:
        self._cut = frozenset()

    def describe_cut(self) -> list[tuple[int, int]]:
        return sorted(self._cut)

    # -- per-message fate --------------------------------------------------------------------------

    def delays_ms(self, src: int, dst: int) -> list[int]:
        """Delays of the copies of one message from `src` to `dst`: [] lost, [d] delivered once,
        [d1, d2] duplicated. Draws from the rng in a fixed order."""
        self.stats["sent"] += 1
        if not self.can_reach(src, dst):
            self.stats["cut"] += 1
            return []
        p = self.profile
        if self.faults_enabled and p.drop_probability and self._rng.random() < p.drop_probability:
            self.stats["dropped"] += 1
            return []
        copies = 1
        if (
            self.faults_enabled
            and p.duplicate_probability
            and self._rng.random() < p.duplicate_probability
        ):
            copies = 2
            self.stats["duplicated"] += 1
        return [self._delay_ms() for _ in range(copies)]

    def _delay_ms(self) -> int:
        p = self.profile
        if self.faults_enabled and p.slow_probability and self._rng.random() < p.slow_probability:
            return self._rng.randint(p.max_delay_ms, max(p.max_delay_ms, p.slow_max_delay_ms))
        return self._rng.randint(p.min_delay_ms, p.max_delay_ms)

"""The simulator's nemesis: picks the next fault from the seed and applies it to the cluster.

Faults (Jepsen's vocabulary): network partitions (random halves, one node isolated, the leader
isolated, a voter majority against a minority, a bridge where one node sees both sides, a one-way
cut where one node can receive but not send or the reverse), heal, graceful shutdown (the leader
resigns with EndQuorumEpoch, everything is flushed, the process stops),
process crash (simulated storage loses what was not fsynced, possibly a torn last write), restart,
and pause (no deliveries, no timers, for a while: SIGSTOP). Crashes may take down a majority:
safety must hold regardless; only the liveness phase needs a majority back.

Invariants: every choice draws from the one seeded rng, over sorted node lists, so one seed gives
one fault schedule; each step returns a short description that goes into the trace digest.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.sim.kernel.network import SimNetwork


class NemesisTarget(Protocol):
    """What the nemesis needs from the simulation."""

    network: SimNetwork

    @property
    def node_ids(self) -> Sequence[int]: ...

    @property
    def voter_ids(self) -> Sequence[int]: ...

    def is_up(self, node_id: int) -> bool: ...

    def is_paused(self, node_id: int) -> bool: ...

    def believed_leader(self) -> int | None: ...

    def crash(self, node_id: int) -> None: ...

    def shutdown(self, node_id: int) -> None: ...

    def restart(self, node_id: int) -> None: ...

    def pause(self, node_id: int, duration_ms: int) -> None: ...


@dataclass(frozen=True, slots=True)
class NemesisProfile:
    """How often and how hard the nemesis strikes during the safety phase."""

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


class Nemesis:
    """One fault per step; `step` returns what it did, e.g. 'crash 2' or 'partition [[1], [2, 3]]'."""

    __slots__ = ("_rng", "counts", "profile")

    def __init__(self, rng: random.Random, profile: NemesisProfile) -> None:
        self._rng = rng
        self.profile = profile
        self.counts: dict[str, int] = {}

    def next_interval_ms(self) -> int:
        return self._rng.randint(self.profile.min_interval_ms, self.profile.max_interval_ms)

    def step(self, target: NemesisTarget) -> str:
        p = self.profile
        kinds = ("crash", "restart", "partition", "heal", "pause")
        weights = (
            p.crash_weight,
            p.restart_weight,
            p.partition_weight,
            p.heal_weight,
            p.pause_weight,
        )
        kind = self._rng.choices(kinds, weights=weights)[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1
        match kind:
            case "crash":
                return self._crash(target)
            case "restart":
                return self._restart(target)
            case "partition":
                return self._partition(target)
            case "heal":
                target.network.heal()
                return "heal"
            case "pause":
                return self._pause(target)
            case "shutdown":
                return self._shutdown(target)
        raise AssertionError(kind)

    def _shutdown(self, target: NemesisTarget) -> str:
        up = [n for n in target.node_ids if target.is_up(n) and not target.is_paused(n)]
        if not up:
            return "shutdown (none up)"
        leader = target.believed_leader()
        # Mostly the leader: a controlled shutdown is where EndQuorumEpoch matters (KIP-595).
        victim = leader if leader in up and self._rng.random() < 0.7 else self._rng.choice(up)
        target.shutdown(victim)
        return f"shutdown {victim}"

    def _crash(self, target: NemesisTarget) -> str:
        up = [n for n in target.node_ids if target.is_up(n)]
        if not up:
            return "crash (none up)"
        leader = target.believed_leader()
        # Crash the leader a third of the time: it is where the interesting states are.
        if leader is not None and leader in up and self._rng.random() < 0.33:
            victim = leader
        else:
            victim = self._rng.choice(up)
        target.crash(victim)
        return f"crash {victim}"

    def _restart(self, target: NemesisTarget) -> str:
        down = [n for n in target.node_ids if not target.is_up(n)]
        if not down:
            return "restart (none down)"
        node = self._rng.choice(down)
        target.restart(node)
        return f"restart {node}"

    def _pause(self, target: NemesisTarget) -> str:
        candidates = [n for n in target.node_ids if target.is_up(n) and not target.is_paused(n)]
        if not candidates:
            return "pause (none)"
        node = self._rng.choice(candidates)
        duration_ms = self._rng.randint(10, self.profile.max_pause_ms)
        target.pause(node, duration_ms)
        return f"pause {node} {duration_ms}ms"

    def _partition(self, target: NemesisTarget) -> str:
        nodes = list(target.node_ids)
        shape = self._rng.choice(
            ("halves", "isolate", "isolate-leader", "majority", "bridge", "one-way")
        )
        groups: list[list[int]]
        match shape:
            case "halves":
                shuffled = nodes[:]
                self._rng.shuffle(shuffled)
                cut = self._rng.randint(1, len(shuffled) - 1)
                groups = [sorted(shuffled[:cut]), sorted(shuffled[cut:])]
            case "isolate" | "isolate-leader":
                leader = target.believed_leader() if shape == "isolate-leader" else None
                lone = leader if leader is not None else self._rng.choice(nodes)
                groups = [[lone], [n for n in nodes if n != lone]]
            case "majority":
                voters = list(target.voter_ids)
                self._rng.shuffle(voters)
                majority = voters[: len(voters) // 2 + 1]
                minority = voters[len(voters) // 2 + 1 :]
                for n in nodes:
                    if n not in target.voter_ids:
                        (majority if self._rng.random() < 0.5 else minority).append(n)
                groups = [sorted(majority), sorted(minority)]
            case "bridge":
                shuffled = nodes[:]
                self._rng.shuffle(shuffled)
                bridge = shuffled[0]
                rest = shuffled[1:]
                cut = max(1, len(rest) // 2)
                groups = [sorted(rest[:cut]), sorted(rest[cut:])]
                target.network.partition(groups)
                return f"partition bridge {bridge} {groups}"
            case "one-way":
                leader = target.believed_leader()
                side = leader if leader is not None and self._rng.random() < 0.5 else None
                one = side if side is not None else self._rng.choice(nodes)
                others = [n for n in nodes if n != one]
                if self._rng.random() < 0.5:
                    target.network.cut_one_way([one], others)
                    return f"partition one-way {one} cannot send"
                target.network.cut_one_way(others, [one])
                return f"partition one-way {one} cannot receive"
            case _:
                raise AssertionError(shape)
        target.network.partition(groups)
        return f"partition {shape} {groups}"

    def crash_rng(self) -> random.Random | None:
        """The rng a crash uses to keep a random prefix of unsynced writes (torn writes), or
        None to lose every unsynced byte."""
        return self._rng if self.profile.torn_writes else None

"""The operator of a membership run (`kraftlab sim quorum --membership`, KIP-853): every few
hundred simulated milliseconds it asks the current leader to add a spare controller as a voter
or to remove a voter (the leader itself too), one request at a time, while the nemesis injects
its faults and the client writes. The core refuses what KIP-853 forbids (a change while another
is in flight or uncommitted, an added voter that has not caught up), and the run's invariants
(one leader per epoch, log matching, committed entries never lost, a linearizable history)
are checked after every event as in any run.

Spare controllers are nodes with controller ids above the bootstrap voters that start as
observers. The voter set never drops below two, so a fault can still stop progress, but
removing and adding keeps cycling through every node.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from quorum.raft.voters import Voter

MIN_VOTERS = 2


class VoterChanger:
    def __init__(self, world: Any, rng: random.Random, controller_ids: Sequence[int]) -> None:
        self.world = world
        self.rng = rng
        self.controller_ids = tuple(controller_ids)
        self.requests = 0
        self.asked: Counter[str] = Counter()

    def next_interval_ms(self) -> int:
        return self.rng.randint(100, 600)

    def step(self, at_ms: int) -> str:
        """Ask the leader for one change; the line for the run's trace."""
        leader_id = self.world.active_controller()
        if leader_id is None:
            self.asked["no leader"] += 1
            return "voter change: no leader"
        node = self.world.actors[leader_id]
        at_ms = node.clock.local(at_ms)  # the node's own clock (skewed under clock faults)
        voters = node.core.voters
        spares = [c for c in self.controller_ids if c not in voters]
        self.requests += 1
        if len(voters) > MIN_VOTERS and (not spares or self.rng.random() < 0.5):
            target = self.rng.choice(voters)
            effects = node.core.remove_voter(self.requests, target, at_ms)
            kind = "remove"
        elif spares:
            target = self.rng.choice(spares)
            effects = node.core.add_voter(self.requests, Voter(target), at_ms)
            kind = "add"
        else:
            return "voter change: nothing to change"
        self.asked[kind] += 1
        node.run_effects(effects)
        self.world.after(node)
        return f"voter change r{self.requests}: {kind} {target} at {leader_id} (voters {voters})"

    def stats(self) -> dict[str, Any]:
        answers: Counter[str] = Counter()
        for n in self.controller_ids:
            answers.update(getattr(self.world.actors[n], "voter_answers", {}))
        return {"asked": dict(sorted(self.asked.items())), "answers": dict(sorted(answers.items()))}

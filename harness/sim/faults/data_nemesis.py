"""Nemesis shapes of the data-plane simulation (issue 8's list), as scheduled actions on the
World. Every shape starts at `start_ms`, lasts `duration_ms` and is healed at its end (network
healed, killed nodes restarted, paused nodes resumed, the controller back). Targets are chosen
when the fault starts, from the committed image (the partition leader) and a seeded rng.

Shapes and what they model (nodes: controller 0, brokers 1..N; clients reach every broker
unless said otherwise):
- isolate-partition-leader: the leader cut from its followers for the first 60% of the fault
  (the ISR may shrink to the leader alone), then from everyone (brokers, controller, clients):
  it loses leadership (Jepsen's 2013 Kafka case);
- leader-cut-from-followers-only: the leader cut from the other brokers only;
- zombie-leader: the leader cut from the controller only (reference section 2, item 4);
- random-halves / majorities-ring / bridge: Jepsen's partition shapes over controller+brokers;
- isolate-controller-leader: the active controller unreachable until the quorum elects another
  (CONTROLLER_FAILOVER_MS, or the fault's end if sooner);
- metadata-quorum-down: no controller for the whole fault (reference item 11);
- kill-leader / kill-2-of-3: process kills (page cache kept), restarted at the end;
- pause-leader: SIGSTOP-like pause, resumed at the end;
- unclean-crash-losing-unflushed-tail: the KIP-966 last-replica shape: the leader is cut from
  its followers for the fault, then loses power (unflushed tail lost) as the network heals, and
  restarts LAST_REPLICA_RESTART_MS later;
- cut-followers-then-kill-leader: reference section 2, item 6: the leader is cut from its
  followers for the fault (longer than replica.lag.time.max.ms, the ISR shrinks to the leader and
  acks=all with min.insync.replicas=1 keeps succeeding on one copy), then it is killed (SIGKILL,
  page cache kept) as the network heals, and restarts KILLED_LEADER_RESTART_MS later: without
  unclean election the partition is offline until then; with it a follower is elected and
  whatever only the old leader held is lost;
- flapping: the leader cut from everyone and healed every FLAP_MS for the fault.

On a Raft metadata quorum (DataRunConfig.metadata="raft", harness/sim/actors/data_quorum.py) "the
controller" in these shapes is every voter: the partition shapes cut brokers from the voters
(random-halves, majorities-ring and bridge shuffle voters and brokers together),
isolate-controller-leader cuts the active voter from every other voter and every broker for the
whole fault (the quorum elects another; healed at the end), and metadata-quorum-down crashes a
majority of the voters, active one first (RaftControllerNode.go_down), restarted at the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from harness.sim.actors.data_world import CLIENT_BASE, CONTROLLER_ID, World

NEMESES = (
    "none", "isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
    "random-halves", "majorities-ring", "bridge", "isolate-controller-leader",
    "metadata-quorum-down", "kill-leader", "pause-leader", "kill-2-of-3",
    "unclean-crash-losing-unflushed-tail", "flapping", "cut-followers-then-kill-leader",
)
CONTROLLER_FAILOVER_MS = 1000
LAST_REPLICA_RESTART_MS = 500
# Longer than broker.session.timeout (WorldTiming: 1 s) so the controller fences the dead
# leader and, if allowed, elects a follower uncleanly before the old leader comes back.
KILLED_LEADER_RESTART_MS = 2000
# Shapes whose last action (a restart) comes after the fault's end: the heal is that much later.
RESTART_AFTER_FAULT_MS = {
    "unclean-crash-losing-unflushed-tail": LAST_REPLICA_RESTART_MS,
    "cut-followers-then-kill-leader": KILLED_LEADER_RESTART_MS,
}
FLAP_MS = 300


@dataclass(frozen=True, slots=True)
class Span:
    start_ms: int
    end_ms: int
    kind: str


class Nemesis:
    """Schedules one shape; records the timeline (Span) for the run summary."""

    def __init__(self, world: World, name: str, start_ms: int, duration_ms: int) -> None:
        if name not in NEMESES:
            raise ValueError(f"unknown nemesis {name!r}; known: {', '.join(NEMESES)}")
        self.world = world
        self.name = name
        self.start_ms = start_ms
        self.duration_ms = duration_ms
        self.rng = random.Random(world.seed * 104729 + 17)
        self.timeline: list[Span] = []
        self.heal_ms: int | None = None

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms

    def schedule(self) -> None:
        if self.name == "none":
            return
        self.world.queue.call_at(self.start_ms, self._begin)

    # -- helpers -------------------------------------------------------------------------------

    def _controllers(self) -> list[int]:
        """The controller's node ids: the voters of a Raft quorum, else CONTROLLER_ID."""
        voters = getattr(self.world.controller, "voter_ids", None)
        return list(voters) if voters else [CONTROLLER_ID]

    def _nodes(self) -> list[int]:
        return [*self._controllers(), *sorted(self.world.brokers)]

    def _clients(self) -> list[int]:
        return sorted(c for c in self.world.clients if c >= CLIENT_BASE)

    def _leader(self) -> int:
        leader = self.world.leader_id()
        return leader if leader > 0 else min(self.world.brokers)

    def _cut(self, a: int, others: list[int]) -> None:
        self.world.network.cut_between(a, others)

    def _heal_network(self) -> None:
        self.world.network.heal()

    def _at_end(self, fn: Callable[[], None], kind: str, at_ms: int | None = None) -> None:
        end = self.end_ms if at_ms is None else at_ms
        self.timeline.append(Span(self.world.queue.now_ms, end, kind))
        self.world.queue.call_at(end, fn)
        self.heal_ms = max(self.heal_ms or 0, end)

    # -- shapes --------------------------------------------------------------------------------

    def _begin(self) -> None:
        w = self.world
        name = self.name
        leader = self._leader()
        brokers = sorted(w.brokers)
        followers = [b for b in brokers if b != leader]
        if name == "isolate-partition-leader":
            # Jepsen's Kafka case: first cut from its followers (the ISR may shrink to the
            # leader alone), then from everyone for the rest of the fault (it loses leadership).
            self._cut(leader, followers)
            w.queue.call_at(self.start_ms + self.duration_ms * 6 // 10,
                       lambda: self._cut(leader, self._nodes() + self._clients()))
            self._at_end(self._heal_network, "partition")
        elif name == "leader-cut-from-followers-only":
            self._cut(leader, followers)
            self._at_end(self._heal_network, "partition")
        elif name == "zombie-leader":
            self._cut(leader, self._controllers())
            self._at_end(self._heal_network, "partition")
        elif name == "random-halves":
            nodes = self._nodes()
            self.rng.shuffle(nodes)
            half = len(nodes) // 2
            for a in nodes[:half]:
                self._cut(a, nodes[half:])
            self._at_end(self._heal_network, "partition")
        elif name == "majorities-ring":
            nodes = self._nodes()
            self.rng.shuffle(nodes)
            n = len(nodes)
            k = (n // 2 + 1) // 2  # each node sees itself and k ring neighbours each side: a majority
            for i, a in enumerate(nodes):
                near = {nodes[(i + d) % n] for d in range(-k, k + 1)}
                self._cut(a, [b for b in nodes if b not in near])
            self._at_end(self._heal_network, "partition")
        elif name == "bridge":
            nodes = self._nodes()
            self.rng.shuffle(nodes)
            bridge = nodes[0]
            rest = nodes[1:]
            half = len(rest) // 2
            for a in rest[:half]:
                self._cut(a, rest[half:])
            del bridge
            self._at_end(self._heal_network, "partition")
        elif name == "isolate-controller-leader" and len(self._controllers()) > 1:
            active = getattr(w.controller, "active_controller", lambda: None)()
            if active is not None:  # no active controller: nothing to isolate
                self._cut(active, self._controllers() + brokers)
            self._at_end(self._heal_network, "partition")
        elif name == "isolate-controller-leader":
            w.controller.go_down()
            end = self.start_ms + min(self.duration_ms, CONTROLLER_FAILOVER_MS)
            self._at_end(w.controller.come_up, "controller-failover", end)
        elif name == "metadata-quorum-down":
            w.controller.go_down()
            self._at_end(w.controller.come_up, "controller-down")
        elif name == "kill-leader":
            w.brokers[leader].kill()
            self._at_end(w.brokers[leader].start, "kill")
        elif name == "kill-2-of-3":
            victims = [leader, self.rng.choice(followers)]
            for v in victims:
                w.brokers[v].kill()

            def restart() -> None:
                for v in victims:
                    w.brokers[v].start()

            self._at_end(restart, "kill")
        elif name == "pause-leader":
            w.brokers[leader].pause()
            self._at_end(w.brokers[leader].resume, "pause")
        elif name == "unclean-crash-losing-unflushed-tail":
            self._cut(leader, followers)
            self._at_end(self._heal_network, "partition")

            def crash() -> None:
                w.brokers[leader].power_crash()
            w.queue.call_at(self.end_ms, crash)
            self._at_end(w.brokers[leader].start, "crash-unflushed",
                         self.end_ms + LAST_REPLICA_RESTART_MS)
        elif name == "cut-followers-then-kill-leader":
            self._cut(leader, followers)
            self._at_end(self._heal_network, "partition")

            def kill() -> None:
                w.brokers[leader].kill()
            w.queue.call_at(self.end_ms, kill)
            self._at_end(w.brokers[leader].start, "kill",
                         self.end_ms + KILLED_LEADER_RESTART_MS)
        elif name == "flapping":
            t = self.start_ms
            cut = True
            while t < self.end_ms:
                if cut:
                    w.queue.call_at(t, self._flap_cut)
                else:
                    w.queue.call_at(t, self._heal_network)
                cut = not cut
                t += FLAP_MS
            self._at_end(self._heal_network, "partition-flapping")

    def _flap_cut(self) -> None:
        leader = self._leader()
        self._cut(leader, self._nodes() + self._clients())

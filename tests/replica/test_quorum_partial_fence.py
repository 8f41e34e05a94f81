"""replication.mode=quorum with a *partial* fence: the fencing change
and the election reach each replica separately (an old leader cut off from the controller keeps
serving at its epoch), followers fetch from the leader they believe in (answers delivered or
lost), time passes, and a replica may restart from disk and be handed a stale partition state
(an image not caught up yet; its persisted fenced epoch must keep it from following an older
leader). Invariant, checked where it must hold (at every election): every acks=all success is
in the elected leader's log, at its offset, with its value."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from partition.replica import (
    MetadataUpdated,
    ReplicaConfig,
    ReplicaPosition,
    SendFetchResponse,
    choose_quorum_leader,
)
from partition.replica.state import Follower
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER, Partition
from tests.replica.router import Cluster, wire

REPLICAS = (1, 2, 3)


class PartialFenceMachine(RuleBasedStateMachine):
    c: Cluster

    @initialize()
    def setup(self) -> None:
        cfg = ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode="quorum")
        self.c = Cluster(replicas=REPLICAS, config=cfg)
        self.counter = 0
        self.values: dict[int, str] = {}  # produce request id -> value
        self.states: list[Partition] = [self.c.partition]  # every partition state published

    @rule(to=st.sampled_from(REPLICAS))
    def produce(self, to: int) -> None:
        leaders = [r for r in REPLICAS if self.c.nodes[r].up and self.c.nodes[r].core.is_leader]
        if leaders and to not in leaders:
            to = leaders[-1]
        self.counter += 1
        rid = self.c.produce(f"v{self.counter}", acks=-1, to=to)
        self.values[rid] = f"v{self.counter}"

    @rule(f=st.sampled_from(REPLICAS), deliver=st.booleans())
    def fetch(self, f: int, deliver: bool) -> None:
        """One fetch of `f` to the leader it believes in (which may be a fenced zombie)."""
        node = self.c.nodes[f]
        role = node.core.role
        if not isinstance(role, Follower) or not self.c.nodes[role.leader_id].up:
            return
        if not node.outbox:
            self.c.tick(f)
        if not node.outbox:
            return
        request = node.outbox.pop(0)
        effects = self.c.nodes[role.leader_id].core.handle(request, self.c.now_ms)
        mine = [e for e in effects if isinstance(e, SendFetchResponse) and e.to == f]
        self.c.execute(role.leader_id, [e for e in effects if e not in mine])
        if deliver:
            for e in mine:
                self.c.step(f, wire(e.response))

    @rule(ms=st.sampled_from([0, 1_000, 31_000]))
    def advance(self, ms: int) -> None:
        self.c.advance(ms)

    @rule(seen=st.sampled_from([(1,), (2,), (3,), (1, 2), (1, 3), (2, 3), REPLICAS]))
    @precondition(lambda self: self.c.partition.leader != NO_LEADER)
    def fence(self, seen: tuple[int, ...]) -> None:
        self.c.fence(nodes=tuple(r for r in seen if self.c.nodes[r].up))
        self.states.append(self.c.partition)

    @rule(node=st.sampled_from(REPLICAS))
    def deliver_metadata(self, node: int) -> None:
        self.c.publish((node,))

    @rule(node=st.sampled_from(REPLICAS), pick=st.integers(0, 10))
    def restart_with_a_stale_image(self, node: int, pick: int) -> None:
        """A clean restart, then an older partition state than the controller's (a snapshot
        not caught up yet)."""
        self.c.clean_restart(node, publish=False)
        stale = self.states[pick % len(self.states)]
        self.c.step(node, wire(MetadataUpdated(stale, self.c.metadata().eligible_brokers)))

    @rule()
    @precondition(lambda self: self.c.partition.leader == NO_LEADER)
    def elect(self) -> None:
        epoch = self.c.partition.leader_epoch
        latest = {r.broker_id: ReplicaPosition(r.broker_id, r.last_epoch, r.log_end_offset)
                  for r in self.c.position_reports if r.leader_epoch == epoch}  # fmt: skip
        leader = choose_quorum_leader(REPLICAS, latest.values())
        if leader is None:
            return
        self.c.elect(leader, publish=False)
        self.states.append(self.c.partition)
        self.c.publish((leader,))
        values = self.c.nodes[leader].values()
        for rid, resp in self.c.responses.items():
            if resp.error is Errors.NONE and resp.base_offset >= 0:
                assert resp.base_offset < len(values), (rid, resp, values)
                assert values[resp.base_offset] == self.values[rid], (rid, resp, values)


TestPartialFence = PartialFenceMachine.TestCase
TestPartialFence.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip

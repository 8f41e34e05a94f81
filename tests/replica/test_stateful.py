"""A hypothesis RuleBasedStateMachine over a leader and two followers (ISR mode): random
produces (acks 0/1/all), fetches (answers delivered or lost), time, controller latency for
AlterPartition, clean leader elections from the ISR, and follower restarts. After every step:

- the leader's HW <= the LEO of every ISR member's actual log (Kafka's HW definition);
- a leader's HW never goes backwards within its epoch; a follower's HW <= its leader's HW;
- no divergence below the HW: every replica's records below its HW equal the leader's;
- nothing committed is lost: every offset below the highest HW ever announced is, unchanged,
  on every ISR member, and every acks=all success is there with its own value;
- consumers, at the leader or at a follower (KIP-392), read only committed records: every
  (offset, value) a read returned is the committed entry at that offset.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from partition.log.batch import decode_records, iter_headers
from partition.replica import ReplicaConfig, ReplicaPosition, choose_quorum_leader
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster

REPLICAS = (1, 2, 3)


class ReplicationMachine(RuleBasedStateMachine):
    c: Cluster

    @initialize(min_isr=st.sampled_from([1, 2]), lag_ms=st.sampled_from([5_000, 30_000]))
    def setup(self, min_isr: int, lag_ms: int) -> None:
        cfg = ReplicaConfig(replica_fetch_wait_max_ms=0, min_insync_replicas=min_isr,
                            replica_lag_time_max_ms=lag_ms)  # fmt: skip
        self.c = Cluster(replicas=REPLICAS, config=cfg, auto_alter=False)
        self.values: dict[int, str] = {}
        self.acks: dict[int, int] = {}
        self.committed: list[tuple[int, int, bytes]] = []  # entries below the highest HW seen
        self.leader_hw: tuple[int, int] = (0, 0)  # (leader epoch, HW)
        self.counter = 0

    # ------------------------------------------------------------------------------ rules

    @rule(acks=st.sampled_from([0, 1, -1]), n=st.integers(1, 3))
    def produce(self, acks: int, n: int) -> None:
        vals = [f"v{self.counter + i}" for i in range(n)]
        self.counter += n
        rid = self.c.produce(*vals, acks=acks, timeout_ms=60_000)
        self.values[rid] = vals[0]
        self.acks[rid] = acks

    @rule(follower=st.sampled_from(REPLICAS), deliver=st.booleans())
    def fetch(self, follower: int, deliver: bool) -> None:
        if follower != self.c.partition.leader:
            self.c.fetch(follower, deliver_response=deliver)

    @rule(ms=st.sampled_from([0, 1, 500, 2_500, 15_000, 31_000]))
    def advance(self, ms: int) -> None:
        self.c.advance(ms)

    @rule()
    def controller_answers(self) -> None:
        self.c.process_alter_partition()

    @rule(data=st.data())
    def elect_from_isr(self, data: st.DataObject) -> None:
        candidates = [r for r in self.c.partition.isr if r != self.c.partition.leader]
        if candidates:
            self.c.elect(data.draw(st.sampled_from(candidates)))

    @rule(data=st.data(), n=st.integers(1, 2))
    def leader_change_with_unreplicated_tail(self, data: st.DataObject, n: int) -> None:
        """The old leader keeps a tail the new one lacks: it must truncate it (KIP-101/320)."""
        self.produce(1, n)
        self.elect_from_isr(data)

    @rule(node=st.sampled_from(REPLICAS))
    def restart_follower(self, node: int) -> None:
        if node != self.c.partition.leader:
            self.c.clean_restart(node)

    @rule(node=st.sampled_from(REPLICAS), offset=st.integers(0, 8),
          wait=st.sampled_from([0, 0, 2_000]))
    def consumer_read(self, node: int, offset: int, wait: int) -> None:
        """A consumer fetch with client metadata at any replica (KIP-392), maybe a long poll."""
        self.c.consume(offset, node=node, max_wait_ms=wait, follower_read=True)

    # ------------------------------------------------------------------------- invariants

    @invariant()
    def hw_below_every_isr_members_leo(self) -> None:
        leader = self.c.leader
        for r in self.c.partition.isr:
            assert leader.core.high_watermark <= self.c.nodes[r].log.log_end_offset, (
                r,
                self.c.partition,
            )

    @invariant()
    def hw_monotonic(self) -> None:
        leader = self.c.leader
        epoch, hw = leader.core.leader_epoch, leader.core.high_watermark
        if epoch == self.leader_hw[0]:
            assert hw >= self.leader_hw[1]
        self.leader_hw = (epoch, hw)
        for r, node in self.c.nodes.items():
            assert node.core.high_watermark <= node.core.log_end_offset
            if r != self.c.partition.leader and node.core.leader_epoch == leader.core.leader_epoch:
                assert node.core.high_watermark <= max(hw, self._committed_end())

    def _committed_end(self) -> int:
        return len(self.committed)

    @invariant()
    def no_divergence_below_hw_and_nothing_committed_lost(self) -> None:
        leader = self.c.leader
        leader_entries = leader.entries()
        for node in self.c.nodes.values():
            hw = node.core.high_watermark
            assert node.entries()[:hw] == leader_entries[:hw], node.node_id
        hw = leader.core.high_watermark
        if hw > len(self.committed):
            self.committed = leader_entries[:hw]
        for r in self.c.partition.isr:
            entries = self.c.nodes[r].entries()
            assert entries[: len(self.committed)] == self.committed, r
        by_offset = {offset: value for offset, _, value in self.committed}
        for rid, resp in self.c.responses.items():
            if self.acks[rid] == -1 and resp.error is Errors.NONE:
                assert by_offset.get(resp.base_offset) == self.values[rid].encode(), rid
        for read in self.c.consumer_responses:
            data = read.records
            for h in iter_headers(data):
                for record in decode_records(data, h):
                    assert by_offset.get(record.offset) == (record.value or b""), record.offset


TestReplicationMachine = ReplicationMachine.TestCase
TestReplicationMachine.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip


class QuorumModeMachine(RuleBasedStateMachine):
    """replication.mode=quorum: elections ignore the ISR: a fence (leader -1, new epoch), then the
    most up-to-date replica of a random majority of the positions reported at that epoch
    (choose_quorum_leader), and the new leader's epoch marker. After every step: the HW is held by a
    majority, no divergence below any HW, nothing committed is ever lost (the Raft "figure 8"
    rule is what keeps the last one true)."""

    c: Cluster

    @initialize()
    def setup(self) -> None:
        cfg = ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode="quorum")
        self.c = Cluster(replicas=REPLICAS, config=cfg)
        self.committed: list[tuple[int, int, bytes]] = []
        self.counter = 0

    @rule(acks=st.sampled_from([1, -1]), n=st.integers(1, 2))
    def produce(self, acks: int, n: int) -> None:
        self.counter += n
        self.c.produce(*[f"q{self.counter - i}" for i in range(n)], acks=acks)

    @rule(follower=st.sampled_from(REPLICAS), deliver=st.booleans())
    def fetch(self, follower: int, deliver: bool) -> None:
        if follower != self.c.partition.leader:
            self.c.fetch(follower, deliver_response=deliver)

    @rule(ms=st.sampled_from([0, 1_000, 31_000]))
    def advance(self, ms: int) -> None:
        self.c.advance(ms)

    @rule(live=st.sampled_from([(1, 2), (1, 3), (2, 3), (1, 2, 3)]))
    def fence_and_elect_most_up_to_date_of_a_majority(self, live: tuple[int, ...]) -> None:
        # The controller's fencing round: leader -1 at a new epoch; each replica reports its
        # position at that epoch (the core's SendReplicaPosition); a majority's best leads.
        self.c.fence()
        epoch = self.c.partition.leader_epoch
        positions = [ReplicaPosition(r.broker_id, r.last_epoch, r.log_end_offset)
                     for r in self.c.position_reports
                     if r.leader_epoch == epoch and r.broker_id in live]  # fmt: skip
        assert sorted(p.replica_id for p in positions) == sorted(live)
        leader = choose_quorum_leader(REPLICAS, positions)
        assert leader is not None
        self.c.elect(leader)

    @invariant()
    def hw_on_a_majority_and_nothing_lost(self) -> None:
        leader = self.c.leader
        hw = leader.core.high_watermark
        holding = sum(node.log.log_end_offset >= hw for node in self.c.nodes.values())
        assert holding >= len(REPLICAS) // 2 + 1
        entries = leader.entries()
        for node in self.c.nodes.values():
            assert node.entries()[: node.core.high_watermark] == entries[: node.core.high_watermark]
        if hw > len(self.committed):
            self.committed = entries[:hw]
        assert entries[: len(self.committed)] == self.committed


TestQuorumModeMachine = QuorumModeMachine.TestCase
TestQuorumModeMachine.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip

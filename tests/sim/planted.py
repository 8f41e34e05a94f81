"""Deliberately broken parts for tests/sim/test_planted_bugs.py: each subclasses the REAL part
and breaks one rule, so a test can show the simulator's checker catches it."""

from __future__ import annotations

from dataclasses import replace

from harness.drive.raft_host import HostedRaft
from harness.sim.actors.kv_client import Operation
from harness.sim.actors.raft_host import RaftSettings, SimRaftPorts
from harness.sim.actors.raft_node import RaftNode
from partition.log import PartitionLog
from partition.raft.log import RaftLogStore
from quorum.raft import membership
from quorum.raft.core import RaftCore
from quorum.raft.effects import Effect, ElectionState
from quorum.raft.leader import VoterChange
from quorum.raft.messages import RaftMessage, VoteRequest
from quorum.raft.state import Voted
from quorum.raft.voters import VotersRecord


class DoubleVoteCore(RaftCore):
    """PLANTED BUG: a voter that voted for one candidate forgets that vote when a second one asks
    in the same epoch, so it grants two votes per epoch (breaks Raft's election safety).
    Candidates still refuse each other (they voted for themselves), so both can win."""

    def handle(self, src: int, message: RaftMessage, now_ms: int) -> list[Effect]:
        qs = self._member.qs
        e = qs.election
        if (
            isinstance(message, VoteRequest)
            and isinstance(qs.role, Voted)
            and not message.pre_vote
            and message.candidate_epoch == e.epoch
            and e.leader_id is None
            and e.voted_id not in (None, message.candidate_id)
        ):
            qs.election = ElectionState(e.epoch)
        return super().handle(src, message, now_ms)


class StaleLogVoteCore(RaftCore):
    """PLANTED BUG: grants (pre-)votes without comparing logs (Raft 5.4.1's up-to-date check),
    so a voter missing committed entries can be elected (breaks leader completeness). Every
    VoteRequest is judged as if the candidate's log ended beyond any log."""

    def handle(self, src: int, message: RaftMessage, now_ms: int) -> list[Effect]:
        if isinstance(message, VoteRequest):
            message = replace(
                message, last_offset_epoch=_BEYOND_ANY_LOG, last_offset=_BEYOND_ANY_LOG
            )
        return super().handle(src, message, now_ms)


_BEYOND_ANY_LOG = 1 << 62


class UnsyncedLogStore(RaftLogStore):
    """PLANTED BUG: flush() does not fsync, so a crash loses entries the core was told are
    durable (and that were counted towards the high watermark)."""

    def flush(self) -> None:
        return


class LocalReadNode(RaftNode):
    """PLANTED BUG (driver): answers a linearizable read from its own image at once, with no
    read barrier, on whatever node the client reached (a stale follower, a deposed leader)."""

    def client_request(self, op: Operation, now_ms: int) -> None:
        if op.f != "read":
            super().client_request(op, now_ms)
            return
        value = self.image_value(op.key)
        self.checker.on_read(self.node_id, op.key, value, self.applied_end, op.required_end)
        self.replies.append((op, "ok", value, None, None))


class SilentLocalReadNode(RaftNode):
    """PLANTED BUG: the same local reads, hidden from the per-read check, so only the Jepsen
    linearizability checker run over the history at the end of the run can catch them."""

    def client_request(self, op: Operation, now_ms: int) -> None:
        if op.f != "read":
            super().client_request(op, now_ms)
            return
        self.replies.append((op, "ok", self.image_value(op.key), None, None))


class DoubleVoteNode(RaftNode):
    core_class = DoubleVoteCore


class StaleLogVoteNode(RaftNode):
    core_class = StaleLogVoteCore


class UnsyncedLogNode(RaftNode):
    log_store_class = UnsyncedLogStore


# -- replication.mode=raft partitions: the simulator's ports (harness/sim/actors/raft_host.py) ------


class SkipFlushPorts(SimRaftPorts):
    """PLANTED BUG: a disk port that skips the flush: the grouped fsync of a round is reported
    done but never happens, so every append a core counts (the leader's own, the followers'
    behind their next fetch) lives only in the page cache. A power loss of a majority then takes
    away acknowledged acks=all writes."""

    def flush_logs(self, logs: list[HostedRaft]) -> None:
        pass


def followers_ack_unflushed(settings: RaftSettings) -> RaftSettings:
    """PLANTED BUG: followers count an unflushed append toward the majority: their next fetch
    reports a log end the disk may not hold (RaftConfig.flush_on_append=False)."""
    raft = replace(settings.config.raft, flush_on_append=False)
    return replace(settings, config=replace(settings.config, raft=raft))


class NoRecoveryFlushPorts(SimRaftPorts):
    """PLANTED BUG: a replica rebuilt after a kill -9 trusts its log as it finds it: appends its
    killed process never fsynced (still in the page cache) are counted by its first fetch,
    though a power loss can still take them away."""

    def recovery_flush(self, plog: PartitionLog) -> None:
        pass


class TwoVotersAtOnceCore(RaftCore):
    """PLANTED BUG: a removal takes two voters out in one VotersRecord (KIP-853 and the Raft
    thesis 4.1 allow one), so the old and the new voter set can have disjoint majorities."""

    def remove_voter(self, request_id: int, node_id: int, now_ms: int) -> list[Effect]:
        m = self._member
        m.begin(now_ms)
        ls, _ = membership._check_leader(m, request_id)
        if ls is None or node_id not in m.voters or len(m.voters) <= 3:
            return super().remove_voter(request_id, node_id, now_ms)
        second = next(v for v in m.voters if v not in (node_id, m.node_id))
        kept = [v for v in m.voters_record.voters if v.node_id not in (node_id, second)]
        deadline = now_ms + m.config.request_timeout_ms
        record = VotersRecord.of(kept)
        ls.voter_change = VoterChange(request_id, "remove", node_id, record, deadline)
        return membership.step(m, now_ms)


class TwoVotersAtOnceNode(RaftNode):
    core_class = TwoVotersAtOnceCore

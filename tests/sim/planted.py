"""Deliberately broken parts for tests/sim/test_planted_bugs.py: each subclasses the REAL part
and breaks one rule, so a test can show the simulator's checker catches it."""

from __future__ import annotations

from harness.drive.raftlog import RaftLogStore
from harness.sim.actors.kv_client import Operation
from harness.sim.actors.raft_node import RaftNode
from quorum.raft.core import RaftCore
from quorum.raft.effects import Effect, ElectionState
from quorum.raft.messages import VoteRequest
from quorum.raft.state import Voted


class DoubleVoteCore(RaftCore):
    """PLANTED BUG: a voter that voted for one candidate forgets that vote when a second one asks
    in the same epoch, so it grants two votes per epoch (breaks Raft's election safety).
    Candidates still refuse each other (they voted for themselves), so both can win."""

    def _on_vote_request(self, src: int, req: VoteRequest, now_ms: int) -> list[Effect]:
        e = self._qs.election
        if (
            isinstance(self._qs.role, Voted)
            and not req.pre_vote
            and req.candidate_epoch == e.epoch
            and e.leader_id is None
            and e.voted_id not in (None, req.candidate_id)
        ):
            self._qs.election = ElectionState(e.epoch)
        return super()._on_vote_request(src, req, now_ms)


class StaleLogVoteCore(RaftCore):
    """PLANTED BUG: grants (pre-)votes without comparing logs (Raft 5.4.1's up-to-date check),
    so a voter missing committed entries can be elected (breaks leader completeness)."""

    def _log_is_ok(self, last_epoch: int, end_offset: int) -> bool:
        return True


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

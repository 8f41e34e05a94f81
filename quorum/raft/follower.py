"""The follower role (after Kafka's FollowerState): the fetch loop towards one leader of one
epoch, applying its answers to the local log view (append, truncation on a diverging epoch,
HW = min(leader HW, own LEO)) and downloading a snapshot in chunks (KIP-630).

A Follower changes no role: losing the leader (fetch timeout, NOT_LEADER_OR_FOLLOWER, a refused
connection) is decided by its caller through QuorumState. What it needs of the node it runs on
is the small `Local` protocol, not the node.

Invariants: an answer is applied only when it was judged on our current log prefix (fetch_offset
and last_fetched_epoch equal our end offset and last epoch; quorum.raft.messages), so a stale or
duplicate answer can neither break log matching nor truncate below the high watermark (which
LogView refuses anyway: InvariantViolation). At most one Fetch or FetchSnapshot is in flight,
re-sent after `fetch_retry_ms` without an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Effect, InstallSnapshot, Send, WriteSnapshotChunk
from quorum.raft.errors import InvariantViolation
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.log_view import LogView
from quorum.raft.messages import (
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from quorum.raft.voters import VotersRecord


class Local(Protocol):
    """What fetching needs of the local node: who it is, its config and its log view."""

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> RaftConfig: ...

    @property
    def log(self) -> LogView: ...

    @property
    def is_voter(self) -> bool: ...

    def voters_appended(self, entries: Sequence[Entry]) -> list[Effect]:
        """A VotersRecord among appended entries is in force from now (KIP-853)."""
        ...

    def log_truncated(self, end_offset: int) -> list[Effect]:
        """Voter changes at and above `end_offset` are undone with the entries."""
        ...

    def snapshot_installed(self, voters: VotersRecord | None) -> list[Effect]:
        """The installed snapshot's voter set is in force."""
        ...


def fetch_request(
    local: Local, epoch: int, read_round: int, max_wait_ms: int | None = None
) -> FetchRequest:
    """A Fetch from our log end (its epoch names the prefix the leader must validate)."""
    cfg = local.config
    wait = cfg.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms
    return FetchRequest(
        local.node_id,
        epoch,
        local.log.end,
        local.log.last_epoch,
        wait,
        cfg.fetch_max_bytes,
        read_round,
    )


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int  # controller.quorum.fetch.timeout.ms without a successful fetch
    fetch_sent_ms: int | None = None  # a Fetch/FetchSnapshot is in flight since then
    last_fetch_ok_ms: int | None = None  # for pre-vote rejections (KIP-996)
    leader_lost: bool = False  # EndQuorumEpoch / NOT_LEADER / refused: grant pre-votes
    snapshot_id: OffsetAndEpoch | None = None  # being fetched with FetchSnapshot
    snapshot_position: int = 0
    snapshot_voters: VotersRecord | None = None  # the voter set the leader named with it
    read_round: int = 0  # newest read-barrier round heard from the leader, echoed in Fetch

    def has_live_leader(self, now_ms: int, fetch_timeout_ms: int) -> bool:
        """KIP-996: refuse pre-votes while the leader answered within the fetch timeout (or
        has not been asked yet), unless it is known to be gone."""
        if self.leader_lost:
            return False
        last = self.last_fetch_ok_ms
        return last is None or now_ms - last < fetch_timeout_ms

    def next_deadline_ms(self, now_ms: int, fetch_retry_ms: int) -> int:
        if self.fetch_sent_ms is None:
            return min(self.fetch_deadline_ms, now_ms)
        return min(self.fetch_deadline_ms, self.fetch_sent_ms + fetch_retry_ms)

    def send_fetch(self, local: Local, now_ms: int) -> list[Effect]:
        self.fetch_sent_ms = now_ms
        if self.snapshot_id is not None:
            request: FetchRequest | FetchSnapshotRequest = FetchSnapshotRequest(
                local.node_id,
                self.epoch,
                self.snapshot_id,
                self.snapshot_position,
                local.config.snapshot_chunk_bytes,
            )
        else:
            request = fetch_request(local, self.epoch, self.read_round)
        return [Send(self.leader_id, request)]

    def maybe_resend(self, local: Local, now_ms: int) -> list[Effect]:
        """Fetch again when nothing is in flight or the last request went unanswered."""
        sent = self.fetch_sent_ms
        if sent is None or now_ms >= sent + local.config.fetch_retry_ms:
            return self.send_fetch(local, now_ms)
        return []

    def _fetched(self, local: Local, now_ms: int) -> None:
        """An answer was applied: the leader is live, the fetch timeout starts again."""
        self.fetch_sent_ms = None
        self.last_fetch_ok_ms = now_ms
        self.fetch_deadline_ms = now_ms + local.config.fetch_timeout_ms

    def on_fetch_answer(self, resp: FetchResponse, local: Local, now_ms: int) -> list[Effect]:
        """A successful (error NONE) FetchResponse from our leader in our epoch."""
        log = local.log
        if (
            resp.fetch_offset != log.end
            or resp.last_fetched_epoch != log.last_epoch
            or self.snapshot_id is not None
        ):
            # Stale or duplicate: judged on another log prefix than ours now. Applying it could
            # append after a different entry (log matching) or truncate below the HW.
            return []
        self._fetched(local, now_ms)
        self.leader_lost = False
        effects: list[Effect] = []
        if resp.snapshot_id is not None:
            self.snapshot_id = resp.snapshot_id
            self.snapshot_position = 0
            self.snapshot_voters = resp.snapshot_voters
        elif resp.diverging_epoch is not None:
            effects += log.truncate_on_divergence(resp.diverging_epoch, self.epoch)
            effects += local.log_truncated(log.end)
        elif resp.records:
            flush = local.is_voter and local.config.flush_on_append
            effects += log.append_fetched(resp.records, flush)
            effects += local.voters_appended(resp.records)
            effects += log.set_hw(min(resp.high_watermark, log.end))
        else:
            effects += log.set_hw(min(resp.high_watermark, log.end))
        return effects + self.send_fetch(local, now_ms)

    def on_snapshot_chunk(
        self, resp: FetchSnapshotResponse, local: Local, now_ms: int
    ) -> list[Effect]:
        """A FetchSnapshotResponse from our leader in our epoch, for the snapshot we fetch."""
        if resp.snapshot_id != self.snapshot_id:
            return []
        if resp.error != ErrorCode.NONE:
            self.snapshot_id = None  # a newer snapshot replaced it: fetch again to learn it
            return self.send_fetch(local, now_ms)
        if resp.position != self.snapshot_position:
            return []
        self._fetched(local, now_ms)
        snapshot = resp.snapshot_id
        effects: list[Effect] = [WriteSnapshotChunk(snapshot, resp.position, resp.data)]
        self.snapshot_position += len(resp.data)
        if self.snapshot_position >= resp.size:
            self.snapshot_id = None
            effects.append(InstallSnapshot(snapshot))
            # complete_snapshot resets our log to start at the snapshot end (we lacked it).
            local.log.snapshot_installed(snapshot)
            local.log.logger.info("quorum.snapshot_installed", snapshot_offset=snapshot.offset)
            effects += local.snapshot_installed(self.snapshot_voters)
            effects += local.log.set_hw(snapshot.offset)
        elif not resp.data:
            raise InvariantViolation(f"empty snapshot chunk at {resp.position} of {resp.size}")
        return effects + self.send_fetch(local, now_ms)

"""Pull replication for RaftCore (a mixin: same object, split by concern). Leader side: Fetch
validation and divergence (Kafka's validateOffsetAndEpoch), long-poll parking, the high watermark,
proposal batches, no-ops, read barriers, check-quorum, FetchSnapshot serving. Follower side: the
fetch loop, truncation on a diverging epoch, HW = min(leader HW, own LEO), snapshot download.

Invariants: see quorum.raft.core and quorum.raft.leader. In particular a follower never truncates
below its high watermark and the HW never goes back (InvariantViolation).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.effects import (
    AppendToLog,
    CommitAdvanced,
    Effect,
    FlushLog,
    InstallSnapshot,
    ReadBarrierCompleted,
    Send,
    TruncateLog,
    WriteSnapshotChunk,
)
from quorum.raft.errors import InvariantViolation
from quorum.raft.leader import LeaderState, ParkedFetch
from quorum.raft.log import Entry, OffsetAndEpoch, RaftLog
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChangeRecord,
    NoOpRecord,
)
from quorum.raft.state import Follower, Prospective, QuorumState, Unattached


class ReplicationMixin:
    # Provided by RaftCore.
    _config: RaftConfig
    _node_id: int
    _voters: tuple[int, ...]
    _log: RaftLog
    _qs: QuorumState
    _hw: int
    _now_ms: int
    _end: int
    _last_epoch: int
    _pending: list[Entry]
    _bootstrap_next_ms: int

    if TYPE_CHECKING:  # defined by RaftCore and ElectionMixin; stubs only for the type checker

        @property
        def leader_id(self) -> int | None: ...

        def _observe(self, leader_id: int | None, epoch: int, now_ms: int) -> list[Effect]: ...

        def _leader_state(self) -> LeaderState | None: ...

        def _abandon_leadership(self) -> list[Effect]: ...

        def _start_prospective(self, now_ms: int, leader_lost: bool = False) -> list[Effect]: ...

        def _resign(self, now_ms: int, reason: str) -> list[Effect]: ...

    # ------------------------------------------------------------------------- log view

    def _read(self, offset: int, max_bytes: int) -> list[Entry]:
        """Entries from `offset`, including appends asked for in this call but not yet done."""
        if offset < self._log.end_offset:
            return self._log.read(offset, max_bytes)
        if self._pending and offset < self._end:
            return self._pending[offset - self._pending[0].offset :]
        return []

    def _epoch_at(self, end_offset: int) -> int:
        """Epoch of the entry just below `end_offset` (the last_fetched_epoch of a fetch there)."""
        if end_offset == self._end:
            return self._last_epoch
        if end_offset > self._log.start_offset:
            return self._log.read(end_offset - 1, 1)[0].epoch
        snapshot = self._log.latest_snapshot()
        return snapshot.epoch if snapshot is not None and snapshot.offset == end_offset else 0

    def _set_hw(self, hw: int) -> list[Effect]:
        if hw <= self._hw:
            return []
        self._hw = hw
        return [CommitAdvanced(hw)]

    # -------------------------------------------------------------------------- follower

    def _fetch_request(
        self, offset: int, last_epoch: int, read_round: int, max_wait_ms: int | None = None
    ) -> FetchRequest:
        wait = self._config.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms
        return FetchRequest(
            self._node_id,
            self._qs.epoch,
            offset,
            last_epoch,
            wait,
            self._config.fetch_max_bytes,
            read_round,
        )

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> list[Effect]:
        effects = self._abandon_leadership()
        effects += self._qs.to_follower(epoch, leader_id, now_ms)
        role = self._qs.role
        assert isinstance(role, Follower)
        return effects + self._send_fetch(role, now_ms)

    def _send_fetch(self, role: Follower, now_ms: int) -> list[Effect]:
        role.fetch_sent_ms = now_ms
        if role.snapshot_id is not None:
            request: FetchRequest | FetchSnapshotRequest = FetchSnapshotRequest(
                self._node_id,
                role.epoch,
                role.snapshot_id,
                role.snapshot_position,
                self._config.snapshot_chunk_bytes,
            )
        else:
            request = self._fetch_request(self._end, self._last_epoch, role.read_round)
        return [Send(role.leader_id, request)]

    def _tick_follower(self, role: Follower, now_ms: int) -> list[Effect]:
        if now_ms >= role.fetch_deadline_ms:
            # controller.quorum.fetch.timeout.ms without a successful fetch (KIP-595).
            if self._qs.is_voter:
                return self._start_prospective(now_ms, leader_lost=True)
            return self._qs.to_unattached(role.epoch, now_ms)
        if role.fetch_sent_ms is None or now_ms >= role.fetch_sent_ms + self._config.fetch_retry_ms:
            return self._send_fetch(role, now_ms)
        return []

    def _current_leader_reply(self, src: int, epoch: int) -> Follower | None:
        role = self._qs.role
        if isinstance(role, Follower) and role.leader_id == src and role.epoch == epoch:
            return role
        return None

    def _on_fetch_response(self, src: int, resp: FetchResponse, now_ms: int) -> list[Effect]:
        effects = self._observe(_usable_hint(src, resp), resp.leader_epoch, now_ms)
        role = self._current_leader_reply(src, resp.leader_epoch)
        if role is None:
            if not self._qs.is_voter and isinstance(self._qs.role, Unattached):
                # That voter knows no leader either: ask the next one soon (observer bootstrap).
                retry = now_ms + self._config.observer_bootstrap_backoff_ms
                self._bootstrap_next_ms = min(self._bootstrap_next_ms, retry)
            return effects
        role.read_round = max(role.read_round, resp.read_round)
        if resp.error != ErrorCode.NONE:
            if resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                role.leader_lost = True  # it resigned: pre-votes may now be granted
                if not self._qs.is_voter:
                    # An observer asks the voters for the successor at once.
                    self._bootstrap_next_ms = now_ms + self._config.observer_bootstrap_backoff_ms
                    return effects + self._qs.to_unattached(role.epoch, now_ms)
            return effects
        if (
            resp.fetch_offset != self._end
            or resp.last_fetched_epoch != self._last_epoch
            or role.snapshot_id is not None
        ):
            # Stale or duplicate: judged on another log prefix than ours now. Applying it could
            # append after a different entry (log matching) or truncate below the HW.
            return effects
        role.fetch_sent_ms = None
        role.last_fetch_ok_ms = now_ms
        role.leader_lost = False
        role.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        if resp.snapshot_id is not None:
            role.snapshot_id = resp.snapshot_id
            role.snapshot_position = 0
        elif resp.diverging_epoch is not None:
            effects += self._truncate_on_divergence(resp.diverging_epoch)
        elif resp.records:
            effects += self._follower_append(resp.records)
            effects += self._set_hw(min(resp.high_watermark, self._end))
        else:
            effects += self._set_hw(min(resp.high_watermark, self._end))
        return effects + self._send_fetch(role, now_ms)

    def _follower_append(self, records: tuple[Entry, ...]) -> list[Effect]:
        if records[0].offset != self._end:
            raise InvariantViolation(
                f"leader sent offset {records[0].offset} for fetch at {self._end}"
            )
        for prev, entry in zip(records, records[1:], strict=False):
            if entry.offset != prev.offset + 1 or entry.epoch < prev.epoch:
                raise InvariantViolation(f"non-contiguous fetch records at {entry.offset}")
        flush = self._qs.is_voter and self._config.flush_on_append
        self._end = records[-1].offset + 1
        self._last_epoch = records[-1].epoch
        # Flushed before the next Fetch acknowledges them (effects run in order).
        return [AppendToLog(records, flush=flush)]

    def _truncate_on_divergence(self, diverging: OffsetAndEpoch) -> list[Effect]:
        """Truncate to min(leader's end of that epoch, our end of it) (Kafka's
        AbstractFetcherThread); repeated fetches walk back through older epochs (KIP-279)."""
        local = self._log.end_offset_for_epoch(diverging.epoch)
        # No epoch <= the leader's known here: nothing of ours can be kept (back to log start).
        target = self._log.start_offset if local.offset < 0 else min(diverging.offset, local.offset)
        target = max(target, self._log.start_offset)
        target = min(target, self._end)
        if target < self._hw:
            raise InvariantViolation(
                f"truncation to {target} below high watermark {self._hw} "
                f"(epoch {self._qs.epoch}, diverging {diverging})"
            )
        self._qs.log.info(
            "quorum.truncated", end_offset=target, from_offset=self._end, epoch=self._qs.epoch
        )
        last_epoch = self._epoch_at(target)
        self._end = target
        self._last_epoch = last_epoch
        return [TruncateLog(target)]

    def _on_fetch_snapshot_response(
        self, src: int, resp: FetchSnapshotResponse, now_ms: int
    ) -> list[Effect]:
        effects = self._observe(_usable_hint(src, resp), resp.leader_epoch, now_ms)
        role = self._current_leader_reply(src, resp.leader_epoch)
        if role is None or role.snapshot_id != resp.snapshot_id:
            return effects
        if resp.error != ErrorCode.NONE:
            role.snapshot_id = None  # a newer snapshot replaced it: fetch again to learn it
            return effects + self._send_fetch(role, now_ms)
        if resp.position != role.snapshot_position:
            return effects
        role.fetch_sent_ms = None
        role.last_fetch_ok_ms = now_ms
        role.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        snapshot = resp.snapshot_id
        effects.append(WriteSnapshotChunk(snapshot, resp.position, resp.data))
        role.snapshot_position += len(resp.data)
        if role.snapshot_position >= resp.size:
            role.snapshot_id = None
            effects.append(InstallSnapshot(snapshot))
            # complete_snapshot resets our log to start at the snapshot end (we lacked it).
            self._end = snapshot.offset
            self._last_epoch = snapshot.epoch
            self._qs.log.info("quorum.snapshot_installed", snapshot_offset=snapshot.offset)
            effects += self._set_hw(snapshot.offset)
        elif not resp.data:
            raise InvariantViolation(f"empty snapshot chunk at {resp.position} of {resp.size}")
        return effects + self._send_fetch(role, now_ms)

    # ---------------------------------------------------------------------------- leader

    def _leader_change_entry(self, ls: LeaderState) -> Entry:
        record = LeaderChangeRecord(self._node_id, ls.epoch, self._voters, ls.granting_voters)
        return Entry(self._end, ls.epoch, codec.encode(record), control=True)

    def _leader_append(self, entries: list[Entry], now_ms: int) -> list[Effect]:
        ls = self._leader_state()
        assert ls is not None
        # Append, hand the records to parked followers, THEN fsync (FlushLog): replication
        # overlaps our own fsync (Raft thesis 10.2.1; Kafka's leader also serves unflushed
        # data). Our own LEO counts for the HW only after the FlushLog, so any CommitAdvanced
        # comes after it in the effect order.
        effects: list[Effect] = [AppendToLog(tuple(entries), flush=False)]
        self._pending.extend(entries)
        self._end = entries[-1].offset + 1
        self._last_epoch = ls.epoch
        ls.last_append_ms = now_ms
        effects += self._complete_parked(now_ms, only_with_data=True)
        effects.append(FlushLog())
        effects += self._maybe_advance_hw(now_ms)
        return effects

    def _flush_batch(self, now_ms: int) -> list[Effect]:
        ls = self._leader_state()
        assert ls is not None
        batch, ls.batch, ls.batch_deadline_ms = ls.batch, [], None
        return self._leader_append(batch, now_ms) if batch else []

    def _maybe_advance_hw(self, now_ms: int) -> list[Effect]:
        ls = self._leader_state()
        assert ls is not None
        candidate = ls.majority_end_offset(self._end)
        # Figure 8 (Raft thesis 3.6.2): only once this epoch's own first entry is committed.
        if candidate <= ls.epoch_start_offset or candidate <= self._hw:
            return []
        effects = self._set_hw(candidate)
        effects += self._complete_parked(now_ms, only_with_data=False)
        effects += self._maybe_complete_barriers()
        return effects

    def _maybe_complete_barriers(self) -> list[Effect]:
        ls = self._leader_state()
        if ls is None or not ls.barriers or self._hw <= ls.epoch_start_offset:
            return []  # not before this leader committed an entry of its own epoch
        confirmed = ls.confirmed_round()
        done = [b for b in ls.barriers if b.read_round <= confirmed]
        if not done:
            return []
        ls.barriers = [b for b in ls.barriers if b.read_round > confirmed]
        return [ReadBarrierCompleted(b.request_id, self._hw) for b in done]

    def _fetch_response(self, ls: LeaderState, src: int, req: FetchRequest) -> FetchResponse:
        ls.progress_for(src).hw_sent = self._hw
        records = self._read(req.fetch_offset, min(req.max_bytes, self._config.fetch_max_bytes))
        return FetchResponse(
            ErrorCode.NONE,
            self._node_id,
            ls.epoch,
            req.fetch_offset,
            self._hw,
            self._log.start_offset,
            tuple(records),
            read_round=ls.read_round,
            last_fetched_epoch=req.last_fetched_epoch,
        )

    def _complete_parked(self, now_ms: int, only_with_data: bool) -> list[Effect]:
        ls = self._leader_state()
        if ls is None or not ls.parked:
            return []
        keep: list[ParkedFetch] = []
        effects: list[Effect] = []
        for p in ls.parked:
            if only_with_data and p.request.fetch_offset >= self._end and now_ms < p.deadline_ms:
                keep.append(p)
            else:
                effects.append(Send(p.src, self._fetch_response(ls, p.src, p.request)))
        ls.parked = keep
        return effects

    def _leader_hint(self) -> int | None:
        """Who we believe leads our epoch, for NOT_LEADER answers: never ourselves (we do not
        lead, or the answer would not be an error; see RaftCore.leader_id), and None while our
        leader seems gone (it resigned, refused our connection or timed out), so the fetcher
        backs off and asks another voter instead of being sent to a dead leader."""
        role = self._qs.role
        if isinstance(role, Follower | Prospective) and role.leader_lost:
            return None
        return self.leader_id

    def _fetch_error(self, req: FetchRequest, error: ErrorCode) -> FetchResponse:
        return FetchResponse(
            error,
            self._leader_hint(),
            self._qs.epoch,
            req.fetch_offset,
            last_fetched_epoch=req.last_fetched_epoch,
        )

    def _validate_fetch(self, req: FetchRequest) -> FetchResponse | None:
        """Kafka's validateOffsetAndEpoch: None if the fetch position is on our log, else the
        answer that sends the fetcher to a snapshot (KIP-630) or back to a diverging epoch."""
        ls = self._leader_state()
        assert ls is not None
        snapshot = self._log.latest_snapshot()
        start = self._log.start_offset
        if req.fetch_offset < start and snapshot is not None:
            return self._answer(ls, req, snapshot_id=snapshot)
        if req.fetch_offset == 0 and req.last_fetched_epoch == 0:
            return None
        if req.last_fetched_epoch == ls.epoch:
            known = OffsetAndEpoch(self._end, ls.epoch)  # the common case; includes this call's
        else:
            known = self._log.end_offset_for_epoch(req.last_fetched_epoch)
        if known.offset < 0 and snapshot is not None:
            return self._answer(ls, req, snapshot_id=snapshot)
        if known.epoch != req.last_fetched_epoch or known.offset < req.fetch_offset:
            diverging = known if known.offset >= 0 else OffsetAndEpoch(start, 0)
            return self._answer(ls, req, diverging_epoch=diverging)
        return None

    def _answer(
        self,
        ls: LeaderState,
        req: FetchRequest,
        snapshot_id: OffsetAndEpoch | None = None,
        diverging_epoch: OffsetAndEpoch | None = None,
    ) -> FetchResponse:
        return FetchResponse(
            ErrorCode.NONE,
            self._node_id,
            ls.epoch,
            req.fetch_offset,
            self._hw,
            self._log.start_offset,
            diverging_epoch=diverging_epoch,
            snapshot_id=snapshot_id,
            read_round=ls.read_round,
            last_fetched_epoch=req.last_fetched_epoch,
        )

    def _on_fetch_request(self, src: int, req: FetchRequest, now_ms: int) -> list[Effect]:
        ls = self._leader_state()
        if ls is None:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if req.leader_epoch < self._qs.epoch:
                error = ErrorCode.FENCED_LEADER_EPOCH
            return [Send(src, self._fetch_error(req, error))]
        if req.leader_epoch != ls.epoch:
            error = (
                ErrorCode.FENCED_LEADER_EPOCH
                if req.leader_epoch < ls.epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
            return [Send(src, self._fetch_error(req, error))]
        progress = ls.progress_for(src)
        progress.last_fetch_ms = now_ms  # contact, for check-quorum
        ls.unacked_begin.discard(src)
        invalid = self._validate_fetch(req)
        if invalid is not None:
            return [Send(src, invalid)]
        ls.record_fetch(src, req, self._end, now_ms)
        effects = self._maybe_advance_hw(now_ms)
        effects += self._maybe_complete_barriers()
        ls.parked = [p for p in ls.parked if p.src != src]  # superseded by this fetch
        wait_ms = min(req.max_wait_ms, self._config.fetch_max_wait_ms)
        # Answer at once when there is data, when the fetcher has not seen the current HW, or
        # when a read barrier waits for it to echo the current round.
        behind_round = bool(ls.barriers) and req.read_round < ls.read_round
        stale_hw = progress.hw_sent < self._hw
        if req.fetch_offset < self._end or stale_hw or behind_round or wait_ms <= 0:
            effects.append(Send(src, self._fetch_response(ls, src, req)))
        else:
            ls.parked.append(ParkedFetch(src, req, now_ms + wait_ms))  # long poll
        return effects

    def _on_fetch_snapshot_request(
        self, src: int, req: FetchSnapshotRequest, now_ms: int
    ) -> list[Effect]:
        ls = self._leader_state()
        epoch = self._qs.epoch

        def reply(error: ErrorCode, size: int = 0, data: bytes = b"") -> list[Effect]:
            leader = self._leader_hint()
            return [
                Send(
                    src,
                    FetchSnapshotResponse(
                        error, leader, epoch, req.snapshot_id, req.position, size, data
                    ),
                )
            ]

        if ls is None:
            return reply(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if req.leader_epoch != ls.epoch:
            return reply(
                ErrorCode.FENCED_LEADER_EPOCH
                if req.leader_epoch < ls.epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
        ls.progress_for(src).last_fetch_ms = now_ms  # FetchSnapshot counts for check-quorum
        if self._log.latest_snapshot() != req.snapshot_id:
            return reply(ErrorCode.SNAPSHOT_NOT_FOUND)
        size = self._log.snapshot_size(req.snapshot_id)
        if req.position < 0 or req.position > size:
            return reply(ErrorCode.POSITION_OUT_OF_RANGE)
        chunk = min(req.max_bytes, self._config.snapshot_chunk_bytes)
        return reply(
            ErrorCode.NONE, size, self._log.read_snapshot(req.snapshot_id, req.position, chunk)
        )

    def _tick_leader(self, now_ms: int) -> list[Effect]:
        ls = self._leader_state()
        assert ls is not None
        cfg = self._config
        if not ls.has_quorum_contact(now_ms, cfg.check_quorum_timeout_ms):
            # Check-quorum (KAFKA-15489): cut off from a majority, stop serving stale reads.
            self._qs.log.warning("quorum.check_quorum_failed", epoch=ls.epoch, now_ms=now_ms)
            return self._resign(now_ms, "check-quorum")
        effects: list[Effect] = []
        if ls.batch_deadline_ms is not None and now_ms >= ls.batch_deadline_ms:
            effects += self._flush_batch(now_ms)
        idle = cfg.max_idle_interval_ms
        if idle > 0 and now_ms >= ls.last_append_ms + idle and not ls.batch:
            noop = Entry(self._end, ls.epoch, codec.encode(NoOpRecord()), control=True)
            effects += self._leader_append([noop], now_ms)
        if any(now_ms >= p.deadline_ms for p in ls.parked):
            effects += self._complete_parked(now_ms, only_with_data=True)
        if ls.unacked_begin and now_ms >= ls.begin_resend_ms:
            begin = BeginQuorumEpochRequest(ls.epoch, self._node_id)
            effects += [Send(v, begin) for v in sorted(ls.unacked_begin)]
            ls.begin_resend_ms = now_ms + cfg.begin_quorum_resend_ms
        return effects


def _usable_hint(src: int, resp: FetchResponse | FetchSnapshotResponse) -> int | None:
    """The leader a fetch answer names, unless the answer contradicts itself: "not the leader,
    and the leader is me" from `src`. Following that hint would refetch from `src` at once, and
    again on every answer, with no backoff (the self-named-leader storm); without a usable hint
    the fetcher backs off instead (observer_bootstrap_backoff_ms, or its fetch retry)."""
    if resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == src:
        return None
    return resp.leader_id

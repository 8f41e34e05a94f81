"""The leader role of one epoch (after Kafka's LeaderState): what each replica holds, parked
long-poll fetches, the proposal batch under linger, BeginQuorumEpoch acks, read barriers and
check-quorum, and the leader's side of the protocol over the local log view: serving Fetch
(Kafka's validateOffsetAndEpoch: divergence, snapshots) and FetchSnapshot, appends, the high
watermark, no-ops. It changes no role: the caller resigns when `has_quorum_contact` fails, and
QuorumState calls `close()` when it swaps the role out.

Invariants:
- the high watermark only moves forward, and only to an offset held by a majority of voters
  (the leader counts its own LEO, made of flushed appends) that is > epoch_start_offset, i.e.
  once this epoch's LeaderChange record is committed (Raft thesis 3.6.2, "figure 8");
- observers never count towards the high watermark, check-quorum or read barriers; nor does
  the leader itself once a VotersRecord removing it is appended (KIP-853: it leads, without
  counting, until that record commits, then resigns);
- at most one voter change is in flight (`voter_change`, quorum.raft.membership);
- a read barrier completes only after a majority proved, by a fetch echoing a read round that
  began after the barrier was requested, that they still followed this leader;
- a fetcher learns a new high watermark at once, or (config.hw_linger_ms > 0, voters only) with
  the next append's records or at most hw_linger_ms later: the HW a follower holds may lag, never lead
  (it is min(leader HW, own LEO) in every answer), so delaying it is safe;
- with config.spare_voter_linger_ms > 0 an append is handed at once to as many parked voters as a
  commit needs besides us (in the order their fetches arrived); the others take it with the next
  append or at most that long later. What commits, and when a majority holds it, is unchanged:
  the HW still needs a majority's acknowledgements, whichever voters they come from. Such a
  long poll may wait below the log end: a prefix deletion answers it first (answer_parked_below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.effects import (
    Effect,
    FlushLog,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    Send,
    VoterChangeCompleted,
)
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.log_view import LogView
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
from quorum.raft.voters import VotersRecord


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica (for HW, check-quorum and DescribeQuorum)."""

    node_id: int
    end_offset: int = -1  # the replica's LEO as acknowledged by its fetch_offset; -1 unknown
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    read_round: int = 0  # newest read round this replica echoed
    hw_sent: int = -1  # the HW in our last answer to it: a stale one is answered without parking


@dataclass(slots=True)
class ParkedFetch:
    src: int
    request: FetchRequest
    deadline_ms: int


@dataclass(slots=True)
class ReadBarrier:
    request_id: int
    read_round: int  # completes once a majority echoed a round >= this one


@dataclass(slots=True)
class VoterChange:
    """The one voter change this leader is carrying out (KIP-853; quorum.raft.membership): an
    added voter first catches up to `catch_up_to` as an observer, then `record` is appended at
    `appended_offset`, and the change is answered once the high watermark passes it."""

    request_id: int
    kind: str  # "add" | "remove" | "update"
    node_id: int
    record: VotersRecord
    deadline_ms: int
    catch_up_to: int | None = None
    appended_offset: int | None = None


@dataclass(slots=True)
class LeaderState:
    """The leader role of one epoch (Kafka's LeaderState): what each replica holds, and the
    leader's side of the protocol over the local log view. Created by QuorumState.to_leader,
    held by state.LeaderRole, closed when QuorumState swaps the role out."""

    epoch: int
    node_id: int
    voters: tuple[int, ...]
    epoch_start_offset: int  # offset of this epoch's LeaderChange record
    now_ms: int
    config: RaftConfig
    view: LogView
    granting_voters: tuple[int, ...] = ()
    voter_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    unacked_begin: set[int] = field(default_factory=set)
    begin_resend_ms: int = 0
    parked: list[ParkedFetch] = field(default_factory=list)
    batch: list[Entry] = field(default_factory=list)
    batch_offsets: int = 0  # offsets the batch's entries span
    batch_deadline_ms: int | None = None
    last_append_ms: int = 0
    read_round: int = 0
    barriers: list[ReadBarrier] = field(default_factory=list)
    check_quorum_start_ms: int = 0  # fetches before this do not count (the epoch began here)
    voter_change: VoterChange | None = None
    # Derived, kept current by __post_init__ and set_voters (read on every fetch and deadline):
    majority: int = field(init=False, default=1)  # voters needed for the HW, reads, check-quorum
    check_quorum_timeout_ms: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        for v in self.voters:
            # Check-quorum gives every voter a full timeout from the start of the epoch.
            self.voter_progress[v] = ReplicaProgress(v, last_fetch_ms=self.now_ms)
        self.unacked_begin = {v for v in self.voters if v != self.node_id}
        self.last_append_ms = self.now_ms
        self.check_quorum_start_ms = self.now_ms
        self.majority = len(self.voters) // 2 + 1
        self.check_quorum_timeout_ms = self.config.check_quorum_timeout_ms

    # --------------------------------------------------------------------------- arithmetic

    @property
    def counts_self(self) -> bool:
        """False once a VotersRecord removing this leader is appended (KIP-853)."""
        return self.node_id in self.voters

    def set_voters(self, voters: tuple[int, ...], now_ms: int) -> None:
        """A voter change is in force: an added voter's progress moves over from the observers
        (it caught up as one), a removed one's becomes an observer's."""
        for v in voters:
            if v not in self.voter_progress:
                progress = self.observer_progress.pop(v, None)
                if progress is None:
                    progress = ReplicaProgress(v)
                    self.unacked_begin.add(v)
                # Check-quorum gives a new voter a full timeout from now, as at the epoch start.
                progress.last_fetch_ms = max(progress.last_fetch_ms or 0, now_ms)
                self.voter_progress[v] = progress
        for v in [v for v in self.voter_progress if v not in voters]:
            self.observer_progress[v] = self.voter_progress.pop(v)
            self.unacked_begin.discard(v)
        self.voters = voters
        self.majority = len(voters) // 2 + 1

    def progress_for(self, node_id: int) -> ReplicaProgress:
        if node_id in self.voter_progress:
            return self.voter_progress[node_id]
        return self.observer_progress.setdefault(node_id, ReplicaProgress(node_id))

    def record_fetch(self, src: int, request: FetchRequest, leader_end: int, now_ms: int,
                     p: ReplicaProgress | None = None) -> None:  # fmt: skip
        """A valid (non-diverging) fetch from `src`: it holds everything below fetch_offset."""
        if p is None:
            p = self.progress_for(src)
        # Never backwards: a delayed duplicate must not move a replica back within this epoch.
        offset = request.fetch_offset
        if offset > p.end_offset:
            p.end_offset = offset
        p.last_fetch_ms = now_ms
        if request.read_round > p.read_round:
            p.read_round = request.read_round
        if offset >= leader_end:
            p.last_caught_up_ms = now_ms
        self.unacked_begin.discard(src)

    def majority_end_offset(self, own_end: int) -> int:
        """The largest offset held by a majority of voters (Kafka's maybeUpdateHighWatermark)."""
        me = self.node_id
        progress = self.voter_progress
        ends = []
        for v in self.voters:  # a loop, not a generator: asked on every fetch
            if v == me:
                ends.append(own_end)
            else:
                end = progress[v].end_offset
                ends.append(end if end > 0 else 0)
        if not ends:
            return 0
        ends.sort(reverse=True)
        return ends[self.majority - 1]

    def has_quorum_contact(self, now_ms: int) -> bool:
        """Check-quorum (KAFKA-15489): a majority (counting us) fetched within the timeout."""
        timeout_ms = self.check_quorum_timeout_ms
        live = 1 if self.counts_self else 0
        for v, p in self.voter_progress.items():
            last = p.last_fetch_ms
            if v != self.node_id and last is not None and now_ms - last <= timeout_ms:
                live += 1
        return live >= self.majority

    def check_quorum_deadline_ms(self) -> int:
        """When has_quorum_contact may next turn false (three voters: `next_deadline_ms` has
        this inline, as one pass over the newest fetch)."""
        me = self.node_id
        needed = self.majority - (1 if me in self.voters else 0)  # others needed besides us
        fetch_times = [p.last_fetch_ms or 0 for v, p in self.voter_progress.items() if v != me]
        if needed <= 0 or len(fetch_times) < needed:
            return 1 << 62
        fetch_times.sort(reverse=True)
        return fetch_times[needed - 1] + self.check_quorum_timeout_ms + 1

    def confirmed_round(self) -> int:
        """The newest read round a majority (counting us, always current) has echoed."""
        rounds = sorted(
            (self.read_round if v == self.node_id else self.voter_progress[v].read_round)
            for v in self.voters
        )
        rounds.reverse()
        return rounds[self.majority - 1]

    def successors_by_end_offset(self) -> tuple[int, ...]:
        """Other voters, most up-to-date first (EndQuorumEpoch.preferred_successors)."""
        others = [p for v, p in self.voter_progress.items() if v != self.node_id]
        others.sort(key=lambda p: (-p.end_offset, p.node_id))
        return tuple(p.node_id for p in others)

    def next_deadline_ms(self) -> int:
        # Asked by the driver after every input: plain comparisons, no list per call, and the
        # check-quorum deadline of three voters (`check_quorum_deadline_ms`) inline: the newest
        # fetch of any other voter, in one pass without a list.
        me = self.node_id
        if self.majority == 2 and me in self.voters:
            newest = -1
            for v, progress in self.voter_progress.items():
                if v != me:
                    last = progress.last_fetch_ms or 0
                    if last > newest:
                        newest = last
            deadline = 1 << 62 if newest < 0 else newest + self.check_quorum_timeout_ms + 1
        else:
            deadline = self.check_quorum_deadline_ms()
        if self.unacked_begin and self.begin_resend_ms < deadline:
            deadline = self.begin_resend_ms
        for p in self.parked:
            if p.deadline_ms < deadline:
                deadline = p.deadline_ms
        batch_deadline = self.batch_deadline_ms
        if batch_deadline is not None and batch_deadline < deadline:
            deadline = batch_deadline
        change = self.voter_change
        if change is not None and change.deadline_ms < deadline:
            deadline = change.deadline_ms
        idle_interval_ms = self.config.max_idle_interval_ms
        if idle_interval_ms > 0 and not self.batch:  # a lingering batch is the next append
            deadline = min(deadline, self.last_append_ms + idle_interval_ms)
        return deadline

    # ---------------------------------------------------------------- the epoch's life

    def begin_epoch(self, now_ms: int) -> list[Effect]:
        """Right after the transition: the LeaderChange control record opens the epoch
        (KIP-595; committing it lets the HW move), and BeginQuorumEpoch tells the voters."""
        record = LeaderChangeRecord(self.node_id, self.epoch, self.voters, self.granting_voters)
        entry = Entry(self.view.end, self.epoch, codec.encode(record), control=True)
        effects = self.append([entry], now_ms)
        begin = BeginQuorumEpochRequest(self.epoch, self.node_id)
        effects += [Send(v, begin) for v in sorted(self.unacked_begin)]
        self.begin_resend_ms = now_ms + self.config.begin_quorum_resend_ms
        return effects

    def tick(self, now_ms: int) -> list[Effect]:
        """Timers of a leader that still has quorum contact (the caller resigns otherwise)."""
        cfg = self.config
        effects: list[Effect] = []
        if self.batch_deadline_ms is not None and now_ms >= self.batch_deadline_ms:
            effects += self.flush_batch(now_ms)
        idle = cfg.max_idle_interval_ms
        if idle > 0 and now_ms >= self.last_append_ms + idle and not self.batch:
            noop = Entry(self.view.end, self.epoch, codec.encode(NoOpRecord()), control=True)
            effects += self.append([noop], now_ms)
        if any(now_ms >= p.deadline_ms for p in self.parked):
            effects += self.complete_parked(now_ms, only_with_data=True)
        if self.unacked_begin and now_ms >= self.begin_resend_ms:
            begin = BeginQuorumEpochRequest(self.epoch, self.node_id)
            effects += [Send(v, begin) for v in sorted(self.unacked_begin)]
            self.begin_resend_ms = now_ms + cfg.begin_quorum_resend_ms
        return effects

    def close(self) -> list[Effect]:
        """Leaving the leader role: fail waiting barriers (the batch never reached the log), and
        answer parked long polls NOT_LEADER_OR_FOLLOWER so fetchers move on at once."""
        failed: list[Effect] = [
            ReadBarrierFailed(b.request_id, None, self.epoch) for b in self.barriers
        ]
        change = self.voter_change
        if change is not None:
            # Appended or not, this leader cannot tell whether its record will commit.
            why = "leadership lost; the voter change may or may not commit"
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            failed.append(VoterChangeCompleted(change.request_id, error, why))
            self.voter_change = None
        for p in self.parked:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            answer = FetchResponse(
                error,
                None,
                self.epoch,
                p.request.fetch_offset,
                last_fetched_epoch=p.request.last_fetched_epoch,
            )
            failed.append(Send(p.src, answer))
        self.barriers.clear()
        self.batch.clear()
        self.batch_offsets = 0
        self.parked.clear()
        return failed

    # ------------------------------------------------------------- appends and the HW

    def propose(self, records: Sequence[bytes], now_ms: int,
                counts: Sequence[int] | None = None) -> tuple[int, list[Effect]]:  # fmt: skip
        """Batch `records` (group commit under linger), record i spanning counts[i] offsets
        (one each by default); returns the first offset they get."""
        first = self.view.end + self.batch_offsets
        offset = first
        for i, data in enumerate(records):
            count = 1 if counts is None else counts[i]
            self.batch.append(Entry(offset, self.epoch, bytes(data), count=count))
            offset += count
        self.batch_offsets += offset - first
        effects: list[Effect] = []
        linger = self.config.append_linger_ms
        if linger == 0 or len(self.batch) >= self.config.max_batch_entries:
            effects = self.flush_batch(now_ms)
        elif self.batch_deadline_ms is None:
            self.batch_deadline_ms = now_ms + linger
        return first, effects

    def append(self, entries: list[Entry], now_ms: int) -> list[Effect]:
        # Append, hand the records to parked followers, THEN fsync (FlushLog): replication
        # overlaps our own fsync (Raft thesis 10.2.1; Kafka's leader also serves unflushed
        # data). Our own LEO counts for the HW only after the FlushLog, so any CommitAdvanced
        # comes after it in the effect order.
        effects: list[Effect] = [self.view.append_as_leader(entries, self.epoch)]
        self.last_append_ms = now_ms
        effects += self.complete_parked(now_ms, only_with_data=True)
        effects.append(FlushLog())
        effects += self.maybe_advance_hw(now_ms)
        return effects

    def flush_batch(self, now_ms: int) -> list[Effect]:
        batch, self.batch, self.batch_deadline_ms = self.batch, [], None
        self.batch_offsets = 0
        return self.append(batch, now_ms) if batch else []

    def maybe_advance_hw(self, now_ms: int) -> list[Effect]:
        candidate = self.majority_end_offset(self.view.end)
        # Figure 8 (Raft thesis 3.6.2): only once this epoch's own first entry is committed.
        if candidate <= self.epoch_start_offset or candidate <= self.view.hw:
            return []
        effects = self.view.set_hw(candidate)
        linger = self.config.hw_linger_ms
        if linger > 0:
            # A voter's new HW rides on the next append's answers, or goes out within the
            # linger. Observers (brokers) are answered at once: they serve metadata to clients,
            # which expect to read what a write to the controller just committed.
            due = now_ms + linger
            observers = [p for p in self.parked if p.src not in self.voter_progress]
            for p in self.parked:
                p.deadline_ms = min(p.deadline_ms, due)
            if observers:
                self.parked = [p for p in self.parked if p.src in self.voter_progress]
                effects += [Send(p.src, self._fetch_response(p.src, p.request)) for p in observers]
        else:
            effects += self.complete_parked(now_ms, only_with_data=False)
        if self.barriers:
            effects += self.maybe_complete_barriers()
        return effects

    def read_barrier(self, request_id: int, now_ms: int) -> list[Effect]:
        self.read_round += 1
        self.barriers.append(ReadBarrier(request_id, self.read_round))
        effects = self.maybe_complete_barriers()
        if self.barriers:
            # Answer parked long polls now so followers echo the new round at once.
            effects += self.complete_parked(now_ms, only_with_data=False)
        return effects

    def maybe_complete_barriers(self) -> list[Effect]:
        if not self.barriers or self.view.hw <= self.epoch_start_offset:
            return []  # not before this leader committed an entry of its own epoch
        confirmed = self.confirmed_round()
        done = [b for b in self.barriers if b.read_round <= confirmed]
        if not done:
            return []
        self.barriers = [b for b in self.barriers if b.read_round > confirmed]
        return [ReadBarrierCompleted(b.request_id, self.view.hw) for b in done]

    # ------------------------------------------------------------------ serving fetches

    def on_fetch(self, src: int, req: FetchRequest, now_ms: int) -> list[Effect]:
        if req.leader_epoch != self.epoch:
            error = _epoch_error(req.leader_epoch, self.epoch)
            return [Send(src, fetch_error(req, error, self.node_id, self.epoch))]
        progress = self.voter_progress.get(src)
        if progress is None:
            progress = self.progress_for(src)
        progress.last_fetch_ms = now_ms  # contact, for check-quorum
        view = self.view
        if not (req.last_fetched_epoch == self.epoch
                and view.log.start_offset <= req.fetch_offset <= view.end):
            # Not the steady fetch (in this epoch, on our log): `_validate_fetch` judges it.
            # The steady one is valid by its first rule for this epoch (known = our end).
            self.unacked_begin.discard(src)
            invalid = self._validate_fetch(req)
            if invalid is not None:
                return [Send(src, invalid)]
        self.record_fetch(src, req, view.end, now_ms, progress)
        effects = self.maybe_advance_hw(now_ms)
        if self.barriers:
            effects += self.maybe_complete_barriers()
        parked = self.parked
        if parked:
            for p in parked:
                if p.src == src:  # superseded by this fetch
                    self.parked = [p for p in parked if p.src != src]
                    break
        wait_ms = min(req.max_wait_ms, self.config.fetch_max_wait_ms)
        # Answer at once when there is data, when the fetcher has not seen the current HW, or
        # when a read barrier waits for it to echo the current round.
        behind_round = bool(self.barriers) and req.read_round < self.read_round
        stale_hw = progress.hw_sent < self.view.hw
        linger = self.config.hw_linger_ms
        if stale_hw and 0 < linger < wait_ms and src in self.voter_progress:
            wait_ms, stale_hw = linger, False  # the HW waits for the next append, or the linger
        if req.fetch_offset < self.view.end or stale_hw or behind_round or wait_ms <= 0:
            effects.append(Send(src, self._fetch_response(src, req, progress)))
        else:
            self.parked.append(ParkedFetch(src, req, now_ms + wait_ms))  # long poll
        return effects

    def complete_parked(self, now_ms: int, only_with_data: bool) -> list[Effect]:
        if not self.parked:
            return []
        keep: list[ParkedFetch] = []
        effects: list[Effect] = []
        end = self.view.end
        spare_linger = self.config.spare_voter_linger_ms if only_with_data else 0
        # Voters a commit needs besides us: only that many take new records at once (config).
        needed = self.majority - (1 if self.node_id in self.voters else 0)
        for p in self.parked:
            behind = p.request.fetch_offset < end
            if only_with_data and now_ms < p.deadline_ms:
                if not behind:
                    keep.append(p)
                    continue
                if spare_linger > 0 and needed <= 0 and p.src in self.voter_progress:
                    due = now_ms + spare_linger  # a spare voter: the next append, or the linger
                    if due < p.deadline_ms:
                        p.deadline_ms = due
                    keep.append(p)
                    continue
            if behind and spare_linger > 0 and p.src in self.voter_progress:
                needed -= 1  # a voter taking records now, whether its long poll ended or not
            effects.append(Send(p.src, self._fetch_response(p.src, p.request)))
        self.parked = keep
        return effects

    def answer_parked_below(self, offset: int) -> list[Effect]:
        """Answer now the parked fetches positioned below `offset` (spare voters' long polls),
        before the log prefix below it is deleted."""
        below = [p for p in self.parked if p.request.fetch_offset < offset]
        if not below:
            return []
        self.parked = [p for p in self.parked if p.request.fetch_offset >= offset]
        return [Send(p.src, self._fetch_response(p.src, p.request)) for p in below]

    def answer_parked(self, src: int, due_by_ms: int) -> list[Effect]:
        """Answer now the parked fetches of `src` whose long poll would end by `due_by_ms`."""
        due = [p for p in self.parked if p.src == src and p.deadline_ms <= due_by_ms]
        if not due:
            return []
        self.parked = [p for p in self.parked if p not in due]
        return [Send(p.src, self._fetch_response(p.src, p.request)) for p in due]

    def _fetch_response(self, src: int, req: FetchRequest,
                        progress: ReplicaProgress | None = None) -> FetchResponse:  # fmt: skip
        (progress or self.progress_for(src)).hw_sent = self.view.hw
        max_bytes = min(req.max_bytes, self.config.fetch_max_bytes)
        records = self.view.read(req.fetch_offset, max_bytes)
        return FetchResponse(
            ErrorCode.NONE,
            self.node_id,
            self.epoch,
            req.fetch_offset,
            self.view.hw,
            self.view.log.start_offset,
            tuple(records),
            read_round=self.read_round,
            last_fetched_epoch=req.last_fetched_epoch,
        )

    def _validate_fetch(self, req: FetchRequest) -> FetchResponse | None:
        """Kafka's validateOffsetAndEpoch: None if the fetch position is on our log, else the
        answer that sends the fetcher to a snapshot (KIP-630) or back to a diverging epoch."""
        snapshot = self.view.log.latest_snapshot()
        start = self.view.log.start_offset
        if req.fetch_offset < start and snapshot is not None:
            return self._answer(req, snapshot_id=snapshot)
        if req.fetch_offset == 0 and req.last_fetched_epoch == 0:
            return None
        if req.last_fetched_epoch == self.epoch:
            known = OffsetAndEpoch(self.view.end, self.epoch)  # the common case; this call's too
        else:
            known = self.view.log.end_offset_for_epoch(req.last_fetched_epoch)
        if known.offset < 0 and snapshot is not None:
            return self._answer(req, snapshot_id=snapshot)
        if known.epoch != req.last_fetched_epoch or known.offset < req.fetch_offset:
            diverging = known if known.offset >= 0 else OffsetAndEpoch(start, 0)
            return self._answer(req, diverging_epoch=diverging)
        return None

    def _answer(
        self,
        req: FetchRequest,
        snapshot_id: OffsetAndEpoch | None = None,
        diverging_epoch: OffsetAndEpoch | None = None,
    ) -> FetchResponse:
        return FetchResponse(
            ErrorCode.NONE,
            self.node_id,
            self.epoch,
            req.fetch_offset,
            self.view.hw,
            self.view.log.start_offset,
            diverging_epoch=diverging_epoch,
            snapshot_id=snapshot_id,
            read_round=self.read_round,
            last_fetched_epoch=req.last_fetched_epoch,
        )

    def on_fetch_snapshot(self, src: int, req: FetchSnapshotRequest, now_ms: int) -> list[Effect]:
        def reply(error: ErrorCode, size: int = 0, data: bytes = b"") -> list[Effect]:
            return [Send(src, snapshot_response(req, error, self.node_id, self.epoch, size, data))]

        if req.leader_epoch != self.epoch:
            return reply(_epoch_error(req.leader_epoch, self.epoch))
        self.progress_for(src).last_fetch_ms = now_ms  # FetchSnapshot counts for check-quorum
        log = self.view.log
        if log.latest_snapshot() != req.snapshot_id:
            return reply(ErrorCode.SNAPSHOT_NOT_FOUND)
        size = log.snapshot_size(req.snapshot_id)
        if req.position < 0 or req.position > size:
            return reply(ErrorCode.POSITION_OUT_OF_RANGE)
        chunk = min(req.max_bytes, self.config.snapshot_chunk_bytes)
        return reply(ErrorCode.NONE, size, log.read_snapshot(req.snapshot_id, req.position, chunk))


def _epoch_error(request_epoch: int, leader_epoch: int) -> ErrorCode:
    """KIP-320 fencing: the requester is behind us, or we are behind it."""
    if request_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def fetch_error(
    req: FetchRequest, error: ErrorCode, leader_id: int | None, epoch: int
) -> FetchResponse:
    """A Fetch answered with `error`, naming the leader we believe in and our epoch."""
    return FetchResponse(
        error, leader_id, epoch, req.fetch_offset, last_fetched_epoch=req.last_fetched_epoch
    )


def snapshot_response(
    req: FetchSnapshotRequest,
    error: ErrorCode,
    leader_id: int | None,
    epoch: int,
    size: int = 0,
    data: bytes = b"",
) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(error, leader_id, epoch, req.snapshot_id, req.position, size, data)

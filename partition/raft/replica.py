"""RaftReplica: one replica of a `replication.mode=raft` data partition, sans-IO. The partition's
replicas are the voters of one Raft group running quorum.raft's RaftCore (KIP-595 elections with
KIP-996 pre-vote and check-quorum, pull replication with diverging-epoch truncation) over the
partition's own log (partition.raft.log); this core adds what a Kafka partition needs on top:

- Produce (leader only; NOT_LEADER_OR_FOLLOWER with the leader hint elsewhere, KIP-951): the
  batches are checked like every mode's (parse_produce_batches, KIP-98 idempotence against the
  log's producer state), proposed as one Raft append (partition.raft.entries), and answered.
  ProducesReceived carries every produce request a driver got for the partition in one
  event-loop round: each is checked and answered as if alone, in order (an idempotent producer's
  pipelined batches against the call's earlier ones too, partition.raft.idempotence), and all the
  accepted batches become ONE Raft append and ONE fsync (group commit, no linger). Answers:
  acks=0 never, acks=1 right after the AppendToLog, acks=all once the Raft high watermark passes
  the batch's last offset (CommitAdvanced), REQUEST_TIMED_OUT after timeout_ms, and
  NOT_LEADER_OR_FOLLOWER when leadership is lost first (indeterminate: the batch may still
  commit under the next leader; an idempotent retry then gets the original offsets).
  min.insync.replicas does not apply (partition.raft.status).
- Consumer fetches (KIP-320 order, as Kafka's Partition.fetchRecords): a current_leader_epoch
  below ours FENCED_LEADER_EPOCH, above ours UNKNOWN_LEADER_EPOCH; then not the leader
  NOT_LEADER_OR_FOLLOWER; then [log start, LEO] or OFFSET_OUT_OF_RANGE; records only below the
  Raft HW (none, and no error, in (HW, LEO]); long polls parked until the HW moves or they expire.
- The leader's epoch marker is the LeaderChange control batch the Raft core writes first in every
  epoch: consumers skip control batches; committing it is what lets the HW pass an earlier
  epoch's tail (Raft thesis 3.6.2).
- No controller on the leadership path: elections are the voters' own. The driver tells the
  controller, the metadata cache and clients about leaders from LeaderChanged effects.

The contract, as for every core: `handle(input, now_ms)`, `tick(now_ms)`, `next_deadline_ms()`;
effects ordered (partition.raft.effects explains the order and how drivers run it). The core
reads its log only through RaftPartitionView, and only between calls' effects: every effect of a
call has been executed before the next call (so a consumer answer never reads ahead of an
append: a HW move wakes parked fetches, which are answered on the next tick).

Invariants: an acks=all answer is NONE only once the Raft HW passed the batch's last offset (it
is made in `_complete_produces` on a CommitAdvanced, or for a duplicate of a committed batch);
an acks=1 answer follows its append (InvariantViolation if a call accepted a batch without one);
the HW a consumer is served below never exceeds the log end (InvariantViolation). The Raft core
keeps its own (one leader and one vote per epoch, HW monotonic, no truncation below the HW).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

import structlog

from partition.log.producer_state import BatchMetadata, SequenceCheck
from partition.purgatory import Purgatory
from partition.raft.config import RaftPartitionConfig
from partition.raft.effects import Effect
from partition.raft.entries import proposal
from partition.raft.idempotence import CallProducers
from partition.raft.log import RaftPartitionView
from partition.raft.status import RaftPartitionStatus, describe
from partition.replica.effects import CompleteProduce, SendFetchResponse
from partition.replica.errors import InvariantViolation
from partition.replica.leader import parse_produce_batches
from partition.replica.messages import (
    ACKS_LEADER,
    ACKS_NONE,
    CONSUMER_REPLICA_ID,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from partition.replica.state import PendingProduce
from quorum.metadata.errors import Errors
from quorum.raft.core import Accepted, RaftCore
from quorum.raft.effects import AppendToLog, CommitAdvanced, ElectionState
from quorum.raft.effects import Effect as RaftEffect
from quorum.raft.messages import RaftMessage

__all__ = [
    "AnswerLongPolls",
    "PeerUnreachable",
    "ProducesReceived",
    "RaftMessageReceived",
    "RaftPartitionInput",
    "RaftReplica",
    "ResignRequested",
]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class RaftMessageReceived:
    """A Raft message of this partition's group from broker `src` (unbundled by RaftMux)."""

    src: int
    message: RaftMessage


@dataclass(frozen=True, slots=True)
class PeerUnreachable:
    """The driver could not connect to broker `peer` (refused): a voter whose leader it was
    starts a pre-vote at once instead of waiting for the fetch timeout."""

    peer: int


@dataclass(frozen=True, slots=True)
class AnswerLongPolls:
    """Answer now the long-polling Fetch of broker `src` if its wait ends by `due_by_ms`: the
    driver's phase merging of idle partitions (partition.raft.mux)."""

    src: int
    due_by_ms: int


@dataclass(frozen=True, slots=True)
class ProducesReceived:
    """Produce requests for this partition that arrived in one event-loop round: each is checked
    and answered as if alone, in order, and the accepted batches become ONE Raft append (one
    fsync for all of them: the group commit a driver gets without lingering)."""

    requests: tuple[ProduceRequest, ...]


@dataclass(slots=True)
class _ProducePlan:
    """What one produce call will do: the entries to propose and where each answer goes."""

    first_offset: int  # where the call's proposal starts (the log end: no stage is pending)
    records: list[bytes] = field(default_factory=list)  # one Kafka batch each
    counts: list[int] = field(default_factory=list)  # its offsets
    offsets: int = 0  # their sum
    now: list[Effect] = field(default_factory=list)  # needing nothing: errors, acks=1 duplicates
    after_append: list[CompleteProduce] = field(default_factory=list)  # acks=1
    committed: list[Effect] = field(default_factory=list)  # acks=all duplicates, committed
    waiting: list[tuple[PendingProduce, int]] = field(default_factory=list)  # acks=all, deadline

    def add(self, batches: list[bytes], counts: list[int]) -> tuple[int, int]:
        """Queue a produce request's batches (one entry each); their (base, last) offsets."""
        base = self.first_offset + self.offsets
        self.records += batches
        self.counts += counts
        self.offsets += sum(counts)
        return base, base + sum(counts) - 1


@dataclass(frozen=True, slots=True)
class ResignRequested:
    """Controlled shutdown: a leader hands over (EndQuorumEpoch to the most caught-up voter)."""


RaftPartitionInput = (
    RaftMessageReceived
    | ProduceRequest
    | ProducesReceived
    | FetchRequest
    | PeerUnreachable
    | AnswerLongPolls
    | ResignRequested
)


class RaftReplica:
    def __init__(self, node_id: int, topic_id: str, partition: int, voters: tuple[int, ...],
                 log: RaftPartitionView, *, seed: int, now_ms: int,
                 config: RaftPartitionConfig | None = None,
                 election_state: ElectionState | None = None, topic: str = "") -> None:  # fmt: skip
        self.node_id = node_id
        self.topic_id = topic_id
        self.partition = partition
        self.config = config or RaftPartitionConfig()
        self._log = log
        self._raft = RaftCore(self.config.raft, node_id, voters, log, election_state, seed, now_ms)
        self._now_ms = now_ms
        self._produces: Purgatory[PendingProduce] = Purgatory()  # acks=all, waiting for the HW
        self._fetches: Purgatory[FetchRequest] = Purgatory()  # consumer long polls
        self._leading_epoch: int | None = None  # the epoch we lead in, as of our last call
        self._logger = structlog.get_logger().bind(node=node_id, topic=topic or topic_id,
                                                   partition=partition)  # fmt: skip

    # ------------------------------------------------------------------------------- views

    @property
    def voters(self) -> tuple[int, ...]:
        return self._raft.voters

    @property
    def is_leader(self) -> bool:
        return self._raft.is_leader

    @property
    def leader_id(self) -> int:
        """The leader of the current epoch as this replica knows it; NO_LEADER (-1) if none."""
        leader = self._raft.leader_id
        return NO_LEADER if leader is None else leader

    @property
    def leader_epoch(self) -> int:
        """The Raft epoch: the partition's leader epoch (stamped on every batch)."""
        return self._raft.epoch

    @property
    def high_watermark(self) -> int:
        return self._raft.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self._log.end_offset

    @property
    def election_state(self) -> ElectionState:
        return self._raft.election_state

    def status(self) -> RaftPartitionStatus:
        return describe(self._raft.status(), self.topic_id, self.partition,
                        self._log.start_offset, self.config.raft.fetch_timeout_ms,
                        self._now_ms)  # fmt: skip

    # --------------------------------------------------------------------------- the API

    def handle(self, message: RaftPartitionInput, now_ms: int) -> list[Effect]:
        self._now_ms = max(self._now_ms, now_ms)
        match message:
            case RaftMessageReceived(src, raft_message):
                return self._after(self._raft.handle(src, raft_message, now_ms))
            case ProduceRequest():
                return self._on_produces((message,), now_ms)
            case ProducesReceived(requests):
                return self._on_produces(requests, now_ms)
            case FetchRequest():
                return self._on_consumer_fetch(message, now_ms)
            case PeerUnreachable(peer):
                return self._after(self._raft.peer_unreachable(peer, now_ms))
            case AnswerLongPolls(src, due_by_ms):
                return self._after(self._raft.answer_long_polls(src, due_by_ms, now_ms))
            case ResignRequested():
                return self._after(self._raft.resign(now_ms))
            case _:
                assert_never(message)

    def tick(self, now_ms: int) -> list[Effect]:
        self._now_ms = max(self._now_ms, now_ms)
        effects = self._after(self._raft.tick(now_ms))
        effects += self._expire_produces(now_ms)
        effects += self._answer_parked(now_ms)
        return effects

    def next_deadline_ms(self) -> int:
        deadlines = [self._raft.next_deadline_ms()]
        deadlines += [d for d in (self._produces.next_deadline_ms(self._now_ms),
                                  self._fetches.next_deadline_ms(self._now_ms))
                      if d is not None]  # fmt: skip
        return min(deadlines)

    # ---------------------------------------------------------------------------- produce

    def _on_produces(self, reqs: tuple[ProduceRequest, ...], now_ms: int) -> list[Effect]:
        """Every request checked and answered as if alone, in order; the accepted batches go to
        the Raft core as ONE proposal (one AppendToLog, one FlushLog: group commit)."""
        if not self._raft.is_leader:
            error = Errors.NOT_LEADER_OR_FOLLOWER
            return [e for req in reqs for e in self._produce_error(req, error)]
        plan = _ProducePlan(self._log.end_offset)
        producers = CallProducers(self._log.check_producer)
        for req in reqs:
            headers, error, message = parse_produce_batches(req, self.config.max_message_bytes)
            if error is Errors.NONE and any(h.is_control for h in headers):
                error, message = (Errors.INVALID_REQUEST,
                                  "INVALID_RECORD: clients may not write control batches")  # fmt: skip
            if error is not Errors.NONE:
                plan.now += self._produce_error(req, error, message)
                continue
            first = headers[0]
            if first.has_producer_id:
                check = producers.check(first.producer_id, first.producer_epoch,
                                        first.base_sequence, first.last_sequence)  # fmt: skip
                match check.outcome:
                    case SequenceCheck.DUPLICATE:
                        # KIP-98: the original offsets, nothing appended; acks=all still waits for
                        # them to commit (a retry after a failover may reach a leader holding them
                        # uncommitted, which commits them with its LeaderChange record).
                        dup = check.duplicate_of
                        assert dup is not None
                        self._plan_answer(plan, req, dup.first_offset, dup.last_offset, now_ms)
                        continue
                    case SequenceCheck.OUT_OF_ORDER:
                        plan.now += self._produce_error(req, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER)
                        continue
                    case SequenceCheck.FENCED:
                        plan.now += self._produce_error(req, Errors.INVALID_PRODUCER_EPOCH,
                                                        "PRODUCER_FENCED")  # fmt: skip
                        continue
                    case SequenceCheck.OK:
                        pass
                    case _:
                        assert_never(check.outcome)
            base, last = plan.add(*proposal(req.records, headers))
            if first.has_producer_id:
                producers.record(first.producer_id, first.producer_epoch,
                                 BatchMetadata(first.base_sequence, first.last_sequence, base,
                                               last))  # fmt: skip
            self._plan_answer(plan, req, base, last, now_ms)
        raft_effects: list[RaftEffect] = []
        if plan.records:
            result, raft_effects = self._raft.propose(plan.records, now_ms, plan.counts)
            if not isinstance(result, Accepted) or result.first_offset != plan.first_offset:
                raise InvariantViolation(f"proposal at {plan.first_offset} answered {result}")
        for pending, deadline_ms in plan.waiting:
            self._produces.park(pending, deadline_ms)
        return plan.now + self._after(raft_effects, plan.after_append) + plan.committed

    def _plan_answer(self, plan: _ProducePlan, req: ProduceRequest, base: int, last: int,
                     now_ms: int) -> None:  # fmt: skip
        """Where the answer to `req` (its batch at [base, last]) goes: acks=0 nowhere; acks=1
        after the call's append (at once for a duplicate appended before the call); acks=all
        once the HW passes `last` (after the call's effects if it already has)."""
        if req.acks == ACKS_NONE:
            return
        done = self._produce_done(req.request_id, base, last)
        if req.acks == ACKS_LEADER:
            (plan.after_append if base >= plan.first_offset else plan.now).append(done)
        elif self._raft.high_watermark > last:  # a duplicate of a committed batch
            plan.committed.append(done)
        else:
            plan.waiting.append((PendingProduce(req.request_id, base, last),
                                 now_ms + req.timeout_ms))  # fmt: skip

    def _produce_done(self, request_id: int, base: int, last: int,
                      error: Errors = Errors.NONE) -> CompleteProduce:  # fmt: skip
        return CompleteProduce(ProduceResponse(request_id, error, base, last,
                                               self._log.start_offset, self.leader_id,
                                               self.leader_epoch))  # fmt: skip

    def _produce_error(self, req: ProduceRequest, error: Errors, message: str = "") -> list[Effect]:
        if req.acks == ACKS_NONE:
            return []  # acks=0: the client waits for nothing
        return [CompleteProduce(ProduceResponse(req.request_id, error,
                                                log_start_offset=self._log.start_offset,
                                                leader_id=self.leader_id,
                                                leader_epoch=self.leader_epoch,
                                                message=message))]  # fmt: skip

    def _answer_produces(self, done: list[PendingProduce],
                         error: Errors = Errors.NONE) -> list[Effect]:  # fmt: skip
        return [self._produce_done(p.request_id, p.base_offset, p.last_offset, error)
                for p in done]  # fmt: skip

    def _complete_produces(self, high_watermark: int) -> list[Effect]:
        return self._answer_produces(
            self._produces.complete(lambda p: high_watermark >= p.required_offset))

    def _expire_produces(self, now_ms: int) -> list[Effect]:
        return self._answer_produces(self._produces.expire(now_ms), Errors.REQUEST_TIMED_OUT)

    # ---------------------------------------------------------------------- consumer fetch

    def _fetch_error(self, req: FetchRequest, error: Errors) -> list[Effect]:
        return [self._fetch_error_answer(req, error)]

    def _fetch_error_answer(self, req: FetchRequest, error: Errors) -> SendFetchResponse:
        resp = FetchResponse(req.topic_id, req.partition, error, req.fetch_offset, req.request_id,
                             self.high_watermark, self._log.start_offset, self._log.end_offset,
                             leader_id=self.leader_id, leader_epoch=self.leader_epoch)  # fmt: skip
        return SendFetchResponse(CONSUMER_REPLICA_ID, resp)

    def _fetch_answer(self, req: FetchRequest, records: bytes) -> SendFetchResponse:
        resp = FetchResponse(req.topic_id, req.partition, Errors.NONE, req.fetch_offset,
                             req.request_id, self.high_watermark, self._log.start_offset,
                             self._log.end_offset, records, None, self.leader_id,
                             self.leader_epoch)  # fmt: skip
        return SendFetchResponse(CONSUMER_REPLICA_ID, resp)

    def _on_consumer_fetch(self, req: FetchRequest, now_ms: int) -> list[Effect]:
        epoch = self.leader_epoch
        if 0 <= req.current_leader_epoch < epoch:
            return self._fetch_error(req, Errors.FENCED_LEADER_EPOCH)  # the client is behind
        if req.current_leader_epoch > epoch:
            return self._fetch_error(req, Errors.UNKNOWN_LEADER_EPOCH)  # we are behind
        if not self._raft.is_leader:
            return self._fetch_error(req, Errors.NOT_LEADER_OR_FOLLOWER)
        if req.replica_id != CONSUMER_REPLICA_ID:
            # Raft partitions replicate with the Raft group's own Fetch, never this one.
            return self._fetch_error(req, Errors.INVALID_REQUEST)
        if not self._log.start_offset <= req.fetch_offset <= self._log.end_offset:
            return self._fetch_error(req, Errors.OFFSET_OUT_OF_RANGE)
        records = self._read_committed(req)
        if not records and req.max_wait_ms > 0:
            self._fetches.park(req, now_ms + req.max_wait_ms)
            return []
        return [self._fetch_answer(req, records)]

    def _read_committed(self, req: FetchRequest) -> bytes:
        hw = self.high_watermark
        if hw > self._log.end_offset:
            raise InvariantViolation(f"HW {hw} above the log end {self._log.end_offset}")
        if req.fetch_offset >= hw:
            return b""
        return self._log.read_batches(req.fetch_offset, req.max_bytes, hw)

    def _answer_parked(self, now_ms: int) -> list[Effect]:
        """Long polls (Kafka's DelayedFetch): those with data once the HW moved, or expired."""

        def settle(req: FetchRequest, woken: bool, expired: bool) -> SendFetchResponse | None:
            if not self._log.start_offset <= req.fetch_offset <= self._log.end_offset:
                return self._fetch_error_answer(req, Errors.OFFSET_OUT_OF_RANGE)
            records = self._read_committed(req) if woken else b""
            return self._fetch_answer(req, records) if records or expired else None

        return list(self._fetches.sweep(now_ms, settle))

    # ------------------------------------------------------------------ after a Raft call

    def _after(self, raft_effects: list[RaftEffect],
               after_append: list[CompleteProduce] | None = None) -> list[Effect]:  # fmt: skip
        """The Raft effects in order, with client answers slotted in where they become true:
        `after_append` (acks=1) right after the AppendToLog, acks=all answers right after the
        CommitAdvanced that passes them; then what leaving leadership fails."""
        effects: list[Effect] = []
        for e in raft_effects:
            effects.append(e)
            if after_append and isinstance(e, AppendToLog):
                effects += after_append
                after_append = None
            elif isinstance(e, CommitAdvanced):
                effects += self._complete_produces(e.high_watermark)
                if self._fetches:
                    # Only the polls parked now: one parked later is read at this HW already.
                    self._fetches.wake()
        if after_append:
            raise InvariantViolation("acks=1 produce accepted without an AppendToLog")
        return effects + self._leadership_moves()

    def _leadership_moves(self) -> list[Effect]:
        epoch = self._raft.epoch if self._raft.is_leader else None
        if epoch == self._leading_epoch:
            return []
        effects: list[Effect] = []
        if self._leading_epoch is not None:
            self._logger.info("partition.raft_leadership_lost", leader_epoch=self._leading_epoch,
                              pending_produces=len(self._produces))  # fmt: skip
            lost = Errors.NOT_LEADER_OR_FOLLOWER
            effects = self._answer_produces(self._produces.fail_all(), lost)
            effects += [self._fetch_error_answer(req, lost) for req in self._fetches.fail_all()]
        if epoch is not None:
            self._logger.info("partition.raft_became_leader", leader_epoch=epoch,
                              log_end_offset=self._log.end_offset)  # fmt: skip
        self._leading_epoch = epoch
        return effects

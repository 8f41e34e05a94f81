"""The broker's raft partitions (replication.mode=raft): the asyncio driver of partition/raft's
RaftReplica for every raft partition this broker hosts. tests/raftpart/router.py is the
reference driver; this is the same discipline on the event loop (partition/raft/effects.py).

One event-loop *round* is what one loop iteration delivers: Raft envelopes from peers, produce
and fetch requests from clients, due timers. Per round:

1. Inputs reach a core as they arrive, unless it still has stages of an earlier call to run (or
   is running one): then they wait in its queue (rule 1: RaftCore reads its log end at the start
   of every call, and must never count an append that is not fsynced). Produce requests always
   wait for the end of the round, so that all of a partition's produce requests of the round are
   ONE call (ProducesReceived: one append, one fsync for all of them).
2. Each call's effects are cut by `flush_stages`; stage 0 runs at once, the rest after the fsync
   of the log and the write of the election state it asks for.
3. End of round (`loop.call_soon`, once): phase merging after a timer round (AnswerLongPolls,
   partition/raft/mux.py); then, until nothing is left: feed every free core what waits for it
   (queued inputs, then the round's produce requests), put the envelopes of what ran on the wire
   (rule 2: a Send depends only on flushes of earlier stages), fsync every log a stage left dirty,
   once each, in parallel threads when there are several (os.fsync releases the GIL; the loop
   waits, as it waits for every fsync in this runtime), write every election state the stages
   asked to persist in ONE atomic write (partition/raft/election_states.py: an election among
   a thousand partitions would otherwise be a thousand fsynced files per round), then run their
   next stages. Last, the cores' timers are re-armed on the TickGrid (one loop timer for all).
4. Every Raft message between two brokers in a round travels in ONE RaftEnvelope per broker pair
   and direction (RaftMux), split only above ENVELOPE_MAX_BYTES of records.

One input into a core, the running of its stages, the passes of 3. (`run_round`), the replica's
effect environment and the recovery flush of a log after a restart are harness/drive/
raft_stages.py, shared with the simulator's driver (harness/sim/actors/raft_host.py); what
differs in the round above (envelopes shipped after every pass, fsyncs in threads, one grouped
election-state write) is this module's.

Leadership (harness/runtime/raft_leadership.py): elections are the replicas' own; that module
tells the controller about them and answers Metadata from the Raft state when it is newer than
the image. A refused connection to a peer is PeerUnreachable for every partition it votes in.

Invariants:
- A core is never re-entered: an input that arrives while its effects run (a client callback
  asking again) waits in its queue.
- No input reaches a core with stages left (rule 1), and a stage runs only after the fsync of
  the stage before it (`needs_flush`).
- Any exception while driving a core is a bug or a broken invariant: the process stops
  (NodeContext.crash), as for every core in this runtime.
- Log retention is not applied to raft partitions (their log start would have to be a KIP-630
  snapshot boundary, docs/replication.md "Status").
"""

from __future__ import annotations

import os
import zlib
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from harness.drive.raft_stages import (
    HostedReplica,
    call_core,
    has_stages,
    recovery_flush,
    run_round,
    run_stages,
)
from harness.net.transport import FrameError
from harness.runtime.context import NodeContext
from partition.log.log import PartitionLog
from partition.raft import (
    AnswerLongPolls,
    PartitionKey,
    PeerUnreachable,
    ProducesReceived,
    RaftEnvelope,
    RaftMessageReceived,
    RaftMux,
    RaftPartitionConfig,
    RaftPartitionInput,
    RaftPartitionLog,
    RaftReplica,
    ResignRequested,
    Stage,
    TickGrid,
    data_partition_raft_config,
    in_sync_voters,
    unbundle,
)
from partition.raft.election_states import ElectionStates
from partition.replica import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.effects import ElectionState, LeaderChanged
from quorum.raft.messages import FetchRequest as RaftFetch
from quorum.raft.messages import FetchResponse as RaftFetchResponse

log = structlog.get_logger()

# Timers of all cores are rounded up to this grid (TickGrid: well under the follower's resend
# slack of 50 ms, so a parked answer delayed by the rounding never looks lost).
TICK_QUANTUM_MS = 10
# An envelope is split above this many bytes of records (the transport's frames are bounded).
ENVELOPE_MAX_BYTES = 8 << 20
# Parallel fsyncs when a round left several logs dirty.
FSYNC_THREADS = 8
class ClientAnswers(Protocol):
    """Where answers to clients go (the replica manager resolves them by request id)."""

    def complete_produce(self, response: ProduceResponse) -> None: ...

    def answer_consumer_fetch(self, response: FetchResponse) -> None: ...


class LeadershipListener(Protocol):
    def leadership_changed(self, replica: HostedRaft, effect: LeaderChanged) -> None: ...


def raft_config_of(node: NodeContext) -> RaftConfig:
    """Data-partition Raft timing from the broker's controller.quorum.* settings (the names
    Kafka gives its one Raft group's timing), with the data-partition defaults."""
    c = node.config
    return data_partition_raft_config(
        election_timeout_ms=c.election_timeout_ms,
        election_backoff_max_ms=c.election_backoff_max_ms,
        fetch_timeout_ms=c.fetch_timeout_ms,
        request_timeout_ms=c.request_timeout_ms,
        retry_backoff_ms=c.retry_backoff_ms,
        fetch_max_bytes=min(1 << 20, ENVELOPE_MAX_BYTES),  # Kafka's replica.fetch.max.bytes
        flush_on_append=bool(c.fsync),
    )


@dataclass(eq=False)
class HostedRaft(HostedReplica):
    """One raft partition replica on this broker: its core, its log, what waits for it, and
    the effect environments (harness.drive.effects.EffectEnv, partition.raft.PartitionEffectEnv;
    what both drivers share is harness.drive.raft_stages.HostedReplica)."""

    host: RaftPartitions
    topic: str
    topic_id: str
    partition: int
    plog: PartitionLog
    store: RaftPartitionLog
    core: RaftReplica
    stages: list[Stage] = field(default_factory=list)
    needs_flush: bool = False
    persist: ElectionState | None = None  # made durable with the round's other votes
    busy: bool = False
    queued: deque[RaftPartitionInput | None] = field(default_factory=deque)
    produces: list[ProduceRequest] = field(default_factory=list)
    # Peers whose Fetch this leader holds unanswered (a long poll): marked when a Fetch is fed,
    # cleared by any Fetch answer sent to that peer. Phase merging asks only these.
    parked: set[int] = field(default_factory=set)
    config_overrides: dict[str, str] = field(default_factory=dict)  # the topic's, last applied

    @property
    def key(self) -> PartitionKey:
        return (self.topic_id, self.partition)

    @property
    def has_work_left(self) -> bool:
        return has_stages(self) or self.busy

    # -- harness.drive.effects.EffectEnv
    def send(self, to: int, message: Any) -> None:
        if isinstance(message, RaftFetchResponse):
            self.parked.discard(to)
        self.host.mux.add(to, self.key, message)

    def persist_election_state(self, state: ElectionState) -> None:
        # Stages carry PersistElectionState as Stage.persist (grouped per round); an effect
        # list run without flush_stages still persists durably here, at once.
        self.host.election_states.put(self.key, state)
        self.host.election_states.write()

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.host.listener.leadership_changed(self, effect)

    # -- partition.raft.PartitionEffectEnv
    def complete_produce(self, response: ProduceResponse) -> None:
        self.host.answers.complete_produce(response)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.host.answers.answer_consumer_fetch(response)


class RaftPartitions:
    """Every raft partition replica of one broker process, on the running loop."""

    def __init__(self, node: NodeContext, answers: ClientAnswers, listener: LeadershipListener,
                 election_states: ElectionStates) -> None:  # fmt: skip
        self.node = node
        self.loop = node.loop
        self.answers = answers
        self.listener = listener
        self.raft_config = raft_config_of(node)
        self.mux = RaftMux(node.node_id)
        self.grid: TickGrid[PartitionKey] = TickGrid(TICK_QUANTUM_MS)
        self.election_states = election_states
        election_states.load()
        self.replicas: dict[PartitionKey, HostedRaft] = {}
        self.by_name: dict[tuple[str, int], HostedRaft] = {}
        self._touched: dict[PartitionKey, HostedRaft] = {}
        self._round_scheduled = False
        self._timer_round = False
        self._timer: Any = None
        self._timer_at: int | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        # Counters for /metrics and the benchmarks.
        self.rounds = 0
        self.fsync_rounds = 0
        self.log_fsyncs = 0
        self.core_calls = 0
        self.produce_calls = 0
        self.produce_requests = 0

    # --- hosting ------------------------------------------------------------------------------

    def create(self, topic: str, topic_id: str, partition: int, voters: tuple[int, ...],
               plog: PartitionLog, configs: dict[str, str]) -> HostedRaft:  # fmt: skip
        recovery_flush(plog)
        store = RaftPartitionLog(plog)
        seed = self.node.config.seed
        seed = (seed * 1_000_003 + zlib.crc32(topic_id.encode()) * 1009 + partition
                if seed >= 0 else int.from_bytes(os.urandom(8), "big"))  # fmt: skip
        config = RaftPartitionConfig.from_topic_configs(configs, self.raft_config)
        key = (topic_id, partition)
        election_state = self.election_states.get(key) or store.election_state()
        core = RaftReplica(self.node.node_id, topic_id, partition, voters, store, seed=seed,
                           now_ms=self.node.now_ms(), config=config,
                           election_state=election_state, topic=topic)  # fmt: skip
        r = HostedRaft(self, topic, topic_id, partition, plog, store, core)
        self.replicas[r.key] = r
        self.by_name[(topic, partition)] = r
        self.grid.set(r.key, core.next_deadline_ms(), self.node.now_ms())
        self._arm()
        log.info("raft_partition.created", topic=topic, partition=partition, voters=list(voters),
                 log_end_offset=plog.log_end_offset, leader_epoch=core.leader_epoch)  # fmt: skip
        return r

    def set_configs(self, r: HostedRaft, configs: dict[str, str]) -> None:
        """Dynamic topic config (max.message.bytes); the Raft timing is the broker's."""
        r.core.config = RaftPartitionConfig.from_topic_configs(configs, self.raft_config)

    def remove(self, key: PartitionKey, deleted: bool) -> HostedRaft | None:
        """Stop hosting (the caller closes or deletes the log; a deleted topic's election state
        goes with the next write). What waits is dropped: produce requests are answered
        NOT_LEADER_OR_FOLLOWER by the replica manager's lookup next time."""
        r = self.replicas.pop(key, None)
        if deleted:
            self.election_states.forget(key)
        if r is None:
            return None
        self.by_name.pop((r.topic, r.partition), None)
        self._touched.pop(key, None)
        self.grid.set(key, None, self.node.now_ms())
        if r.needs_flush:
            r.store.flush()
        log.info("raft_partition.removed", topic=r.topic, partition=r.partition)
        return r

    # --- inputs ---------------------------------------------------------------------------------

    def produce(self, r: HostedRaft, request: ProduceRequest) -> None:
        """Held to the end of the round: one call with every produce request of the round."""
        self.produce_requests += 1
        r.produces.append(request)
        self._touch(r)

    def fetch(self, r: HostedRaft, request: FetchRequest) -> None:
        self._input(r, request)

    def on_envelope(self, src: int, envelope: RaftEnvelope) -> None:
        """A peer's round of Raft messages. A malformed one closes the connection (FrameError)."""
        try:
            items = unbundle(envelope, self.node.node_id)
        except codec.DecodeError as exc:
            raise FrameError(str(exc)) from exc
        if envelope.src != src:
            raise FrameError(f"envelope of broker {envelope.src} on broker {src}'s connection")
        for key, sender, message in items:
            r = self.replicas.get(key)
            if r is not None:  # not hosted (deleted, moved): the sender retries on its timers
                self._input(r, RaftMessageReceived(sender, message))

    def peer_unreachable(self, peer: int) -> None:
        """A connection to `peer` was refused: every partition it votes in hears it."""
        for r in self.replicas.values():
            if peer in r.core.voters:
                self._input(r, PeerUnreachable(peer))

    def resign_all(self) -> int:
        """Controlled shutdown: every partition led here hands over (EndQuorumEpoch)."""
        leading = [r for r in self.replicas.values() if r.core.is_leader]
        for r in leading:
            self._input(r, ResignRequested())
        return len(leading)

    def _input(self, r: HostedRaft, message: RaftPartitionInput | None) -> None:
        if r.has_work_left or r.queued:
            r.queued.append(message)  # rule 1 (and never re-enter a core)
            self._touch(r)
            return
        self._guarded(self._call, r, message)

    def _on_timer(self) -> None:
        self._timer = None
        now_ms = max(self.node.now_ms(), self._timer_at or 0)
        self._timer_at = None
        due = self.grid.pop_due(now_ms)
        for key in due:
            r = self.replicas.get(key)
            if r is not None:
                self._input(r, None)
        if due:
            self._timer_round = True
        self._arm()

    # --- running cores ----------------------------------------------------------------------------

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # a bug or a broken invariant: stop, as node.py does
            self.node.crash(exc)

    def _call(self, r: HostedRaft, message: RaftPartitionInput | None) -> None:
        """One input (None: a tick); stage 0 of its effects runs now."""
        now_ms = self.node.now_ms()
        self.core_calls += 1
        if isinstance(message, RaftMessageReceived) and isinstance(message.message, RaftFetch):
            r.parked.add(message.src)  # until an answer to it leaves (HostedRaft.send)
        call_core(r, message, now_ms)  # raises if the core has stages left (rule 1)
        self._advance(r)
        self._touch(r)

    def _advance(self, r: HostedRaft) -> None:
        # A stage's election state waits in `persist` for the round's ONE grouped write
        # (_make_durable), so no writer is given to run_stages.
        r.busy = True
        try:
            run_stages(r)
        finally:
            r.busy = False

    def _feed(self, r: HostedRaft) -> None:
        """What waits for a free core: queued inputs in order, then the round's produces."""
        while not r.has_work_left and r.key in self.replicas:
            if r.queued:
                self._call(r, r.queued.popleft())
            elif r.produces:
                requests, r.produces = tuple(r.produces), []
                self.produce_calls += 1
                self._call(r, ProducesReceived(requests))
            else:
                return

    def _touch(self, r: HostedRaft) -> None:
        self._touched[r.key] = r
        if not self._round_scheduled and not self._closed:
            self._round_scheduled = True
            self.loop.call_soon(self._end_round)

    def _end_round(self) -> None:
        self._round_scheduled = False
        self._guarded(self._run_round)

    def _run_round(self) -> None:
        self.rounds += 1
        if self._timer_round:
            self._timer_round = False
            self._merge_phases()
        run_round(self._touched, self._feed, self._make_durable, self._advance, self._ship)
        self._ship()
        now_ms = self.node.now_ms()
        touched, self._touched = self._touched, {}
        for key, r in touched.items():
            if key in self.replicas:
                self.grid.set(key, r.core.next_deadline_ms(), now_ms)
        self._arm()

    def _merge_phases(self) -> None:
        """After a timer round whose envelope to a follower answers a long poll: answer that follower's other parked
        fetches due within the poll wait now, so idle partitions share one phase per broker pair
        (partition/raft/mux.py)."""
        peers = self.mux.fetch_answers_to()
        if not peers:
            return
        due_by = self.node.now_ms() + self.raft_config.fetch_max_wait_ms
        for peer in peers:
            for r in [r for r in self.replicas.values() if peer in r.parked]:
                self._input(r, AnswerLongPolls(peer, due_by))

    def _make_durable(self, dirty: list[HostedRaft]) -> bool:
        """Every log a stage left unflushed fsynced once (in parallel), then every election
        state of the round in ONE write (partition/raft/election_states.py); done on return."""
        logs = [r for r in dirty if r.needs_flush]
        if logs:
            self.fsync_rounds += 1
            self.log_fsyncs += len(logs)
            if len(logs) == 1:
                logs[0].store.flush()
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(FSYNC_THREADS, thread_name_prefix="raft-fsync")
                for _ in self._pool.map(lambda r: r.store.flush(), logs):
                    pass  # re-raises the first error here, on the loop
            for r in logs:
                r.needs_flush = False
        votes = [r for r in dirty if r.persist is not None]
        if votes:
            for r in votes:
                assert r.persist is not None
                self.election_states.put(r.key, r.persist)
                r.persist = None
            self.election_states.write()
        return True

    def _ship(self) -> None:
        for envelope in self.mux.drain():
            for part in split_envelope(envelope):
                self.node.send(part.dst, part)

    def _arm(self) -> None:
        if self._closed:
            return
        at = self.grid.next_tick_ms()
        if at == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = None if at is None else self.node.clock.call_at(at, self._on_timer)

    # --- views ----------------------------------------------------------------------------------

    def leader_of(self, topic_id: str, partition: int) -> tuple[int, int] | None:
        """(leader, epoch) as this broker's replica knows them; None if not hosted or unknown."""
        r = self.replicas.get((topic_id, partition))
        if r is None or r.core.leader_id < 0:
            return None
        return r.core.leader_id, r.core.leader_epoch

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for r in self.replicas.values():
            if r.needs_flush:
                r.store.flush()
        if any(r.persist is not None for r in self.replicas.values()):
            for r in self.replicas.values():
                if r.persist is not None:
                    self.election_states.put(r.key, r.persist)
            self.election_states.write()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def status_row(r: HostedRaft, now_ms: int) -> dict[str, Any]:
    """API.md /partitions for a raft partition: the describe view of partition.raft.status,
    with Kafka's row fields where they mean the same (the ISR: the in-sync voters)."""
    s = r.core.status()
    return {
        "topic": r.topic, "partition": r.partition, "replication_mode": "raft", "role": s.role,
        "leader": None if s.leader_id < 0 else s.leader_id, "leader_epoch": s.leader_epoch,
        "voted_id": s.voted_id, "log_start_offset": s.log_start_offset,
        "log_end_offset": s.log_end_offset, "high_watermark": s.high_watermark,
        # Only the leader knows who fetches from it; a follower shows none (unknown here).
        "isr": in_sync_voters(s, now_ms, r.core.config.raft.fetch_timeout_ms)
        if r.core.is_leader else [],
        "voters": [{"node_id": v.node_id, "role": v.role, "log_end_offset": v.log_end_offset,
                    "lag": v.lag,
                    "last_fetch_ago_ms": None if v.last_fetch_ms is None
                    else max(0, now_ms - v.last_fetch_ms)} for v in s.voters],
        "acks_all_needs": s.acks_all_needs, "note": s.note,
    }  # fmt: skip


def split_envelope(envelope: RaftEnvelope) -> Iterable[RaftEnvelope]:
    """`envelope` as it is, or in parts of at most ENVELOPE_MAX_BYTES of records each."""
    total = 0
    start = 0
    items = envelope.items
    for i, item in enumerate(items):
        size = 64
        if isinstance(item.message, RaftFetchResponse):
            size += sum(len(e.data) for e in item.message.records)
        if total + size > ENVELOPE_MAX_BYTES and i > start:
            yield RaftEnvelope(envelope.src, envelope.dst, items[start:i])
            start, total = i, 0
        total += size
    if start == 0:
        yield envelope
    else:
        yield RaftEnvelope(envelope.src, envelope.dst, items[start:])

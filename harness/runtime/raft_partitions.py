"""The broker's raft partitions (replication.mode=raft) on the asyncio runtime: the ports of the
one raft-partition host (harness/drive/raft_host.py, which owns the round: inputs, stages,
grouped fsyncs, phase merging, timers) on the event loop, and nothing else of the round.

- `LoopClock`: the node's clock; the host's one timer on it (a harness/loop Timer on the
  NodeClock), its TickGrid rounded to TICK_QUANTUM_MS; a round is what one event-loop iteration
  delivers (Raft envelopes from peers, produce and fetch requests from clients, due timers): its
  end runs on the loop's next pass, once (a Soon). Both crash the node on an exception.
- `FileDurability`: every log a pass of the round left dirty fsynced once, in parallel threads
  when there are several (os.fsync releases the GIL; the loop waits, as it waits for every fsync
  in this runtime: done on return), then every election state the pass asked to persist in ONE
  atomic write (partition/raft/election_states.py: an election among a thousand partitions
  would otherwise be a thousand fsynced files per round).
- `WireOutbox`: the envelopes of a pass leave as soon as the pass ran (rule 2: a Send depends
  only on flushes of earlier stages; the next pass's fsync takes real time), split above
  ENVELOPE_MAX_BYTES of records (the transport's frames are bounded); answers to clients go to
  the replica manager.
- `LeadershipObserver`: leader changes go to harness/runtime/raft_leadership.py, which tells the
  controller about them and answers Metadata from the Raft state when it is newer than the image.

`raft_partitions` builds the host; `host_partition` hosts one replica with its seed (the node's
kraftlab.raft.seed, or random) and the topic's config; a malformed envelope closes the
connection (`receive_envelope`, FrameError). Any exception while driving a core is a bug or a
broken invariant: the process stops (NodeContext.crash), as for every core in this runtime.
Log retention is not applied to raft partitions (their log start would have to be a KIP-630
snapshot boundary, docs/replication.md "Status").
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import structlog

from harness.drive.raft_host import HostedRaft, RaftObserver, RaftPartitionHost
from harness.drive.raft_stages import recovery_flush
from harness.loop import Soon, Timer
from harness.net.transport import FrameError
from harness.runtime.context import NodeContext
from partition.log.log import PartitionLog
from partition.raft import (
    PartitionKey,
    RaftEnvelope,
    RaftLogStore,
    RaftPartitionConfig,
    data_partition_raft_config,
    in_sync_voters,
)
from partition.raft.election_states import ElectionStates
from partition.replica import FetchResponse, ProduceResponse
from quorum import codec
from quorum.raft.config import RaftConfig
from quorum.raft.effects import ElectionState, LeaderChanged
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


class LoopClock:
    """The clock port: the node's clock, one loop timer, the round's end after the loop turn."""

    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.host: RaftPartitionHost | None = None
        self._timer = Timer(node.clock, self._fire, on_error=node.crash)
        self._round_end = Soon(node.loop, self._end_round, on_error=node.crash)

    def now_ms(self) -> int:
        return self.node.now_ms()

    def set_timer(self, at_ms: int | None) -> None:
        self._timer.set(at_ms)

    def _fire(self) -> None:
        assert self.host is not None
        self.host.on_timer(int(self._timer.fired_deadline_ms or 0))

    def end_round_soon(self) -> None:
        self._round_end.schedule()

    def _end_round(self) -> None:
        assert self.host is not None
        self.host.end_round()


class FileDurability:
    """The durability port: fsyncs in threads, election states in ONE grouped file write."""

    groups_election_states = True

    def __init__(self, election_states: ElectionStates) -> None:
        self.election_states = election_states
        election_states.load()
        self._pool: ThreadPoolExecutor | None = None

    def recovery_flush(self, plog: PartitionLog) -> None:
        recovery_flush(plog)

    def election_state(self, key: PartitionKey, store: RaftLogStore) -> ElectionState | None:
        return self.election_states.get(key) or store.election_state()

    def write_election_state(self, r: HostedRaft, state: ElectionState) -> None:
        self.election_states.put(r.key, state)
        self.election_states.write()

    def make_durable(self, logs: list[HostedRaft], states: list[HostedRaft]) -> bool:
        if len(logs) == 1:
            logs[0].store.flush()
        elif logs:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(FSYNC_THREADS, thread_name_prefix="raft-fsync")
            for _ in self._pool.map(lambda r: r.store.flush(), logs):
                pass  # re-raises the first error here, on the loop
        if states:
            for r in states:
                assert r.persist is not None
                self.election_states.put(r.key, r.persist)
            self.election_states.write()
        return True

    def forget(self, key: PartitionKey) -> None:
        self.election_states.forget(key)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class WireOutbox:
    """The outbox port: envelopes on the transport after every pass, answers to clients."""

    ships_per_pass = True

    def __init__(self, node: NodeContext, answers: ClientAnswers) -> None:
        self.node = node
        self.answers = answers

    def ship(self, envelope: RaftEnvelope) -> None:
        for part in split_envelope(envelope):
            self.node.send(part.dst, part)

    def complete_produce(self, response: ProduceResponse) -> None:
        self.answers.complete_produce(response)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.answers.answer_consumer_fetch(response)


class LeadershipObserver(RaftObserver):
    def __init__(self, listener: LeadershipListener) -> None:
        self.listener = listener

    def on_leader_changed(self, r: HostedRaft, effect: LeaderChanged) -> None:
        self.listener.leadership_changed(r, effect)


def raft_partitions(node: NodeContext, answers: ClientAnswers, listener: LeadershipListener,
                    election_states: ElectionStates) -> RaftPartitionHost:  # fmt: skip
    """The host of this broker's raft partitions, on the running loop."""
    clock = LoopClock(node)
    host = RaftPartitionHost(node.node_id, clock, FileDurability(election_states),
                             WireOutbox(node, answers), LeadershipObserver(listener),
                             tick_quantum_ms=TICK_QUANTUM_MS, crash=node.crash)  # fmt: skip
    clock.host = host
    return host


def partition_config(node: NodeContext, configs: dict[str, str]) -> RaftPartitionConfig:
    """A raft partition's config: the topic's (max.message.bytes), the broker's Raft timing."""
    return RaftPartitionConfig.from_topic_configs(configs, raft_config_of(node))


def host_partition(host: RaftPartitionHost, node: NodeContext, topic: str, topic_id: str,
                   partition: int, voters: tuple[int, ...], plog: PartitionLog,
                   configs: dict[str, str]) -> HostedRaft:  # fmt: skip
    """Host a replica: its core's seed from kraftlab.raft.seed (random if negative)."""
    seed = node.config.seed
    seed = (seed * 1_000_003 + zlib.crc32(topic_id.encode()) * 1009 + partition
            if seed >= 0 else int.from_bytes(os.urandom(8), "big"))  # fmt: skip
    r = host.add((topic_id, partition), voters, plog, seed=seed,
                 config=partition_config(node, configs), topic=topic)  # fmt: skip
    log.info("raft_partition.created", topic=topic, partition=partition, voters=list(voters),
             log_end_offset=plog.log_end_offset, leader_epoch=r.core.leader_epoch)  # fmt: skip
    return r


def receive_envelope(host: RaftPartitionHost, src: int, envelope: RaftEnvelope) -> None:
    """A peer's round of Raft messages. A malformed one closes the connection (FrameError)."""
    if envelope.src != src:
        raise FrameError(f"envelope of broker {envelope.src} on broker {src}'s connection")
    try:
        host.on_envelope(envelope)
    except codec.DecodeError as exc:
        raise FrameError(str(exc)) from exc


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

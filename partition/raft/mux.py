"""The Raft traffic of every raft partition between two brokers as one message per broker pair per
event-loop round (Redpanda's heartbeat_manager and CockroachDB's coalesced heartbeats batch per
node pair; Kafka's replica fetcher sends one multi-partition Fetch per broker pair).

`RaftMux` (one per broker, sans-IO): each partition's Raft core emits Send(to, message); the
driver's per-partition env calls `add(to, key, message)`. At the end of the round, `drain()`
returns one `RaftEnvelope` per destination broker holding every queued item for it, in the order
queued. The receiving driver calls `unbundle` and hands each item to its partition's core as
RaftMessageReceived(src, message); items for a partition the broker does not host are dropped
(deleted or moved: the sender retries on its own timers). A connection refused by a broker is
reported to every partition with items in the envelope (`RaftEnvelope.partition_keys`,
PeerUnreachable); a connection that closes, to every partition that has that broker as a voter.

Idle partitions and phase merging. With pull replication (KIP-595) an idle follower's Fetch is
parked by the leader up to fetch_max_wait_ms (long poll), answered empty when the wait ends, and
the follower fetches again at once. Bundling per round alone helps little: each partition's
cycle keeps the phase its last write gave it, so a broker pair still exchanges about one message
per partition per period (tests/raftpart/test_mux.py measures it). The driver therefore merges
phases: after a *timer* round (ticks, not messages) whose envelope to broker F carries a Fetch
answer (a long poll that expired), it asks every partition that holds a Fetch of F unanswered
(the driver's `parked`, harness/drive/raft_host.py) to answer it now if that would end within
fetch_max_wait_ms anyway
(AnswerLongPolls(F, now + fetch_max_wait_ms), RaftCore.answer_long_polls): a long poll may be
answered at any time before its max wait. Those answers leave in the same envelope, F's
partitions fetch again in the same round, so in one envelope, which the leader parks with one
common deadline. After one period every idle partition between L and F is in one phase: two
envelopes per broker pair and direction per long-poll period (one for the groups L leads, one
for those F leads), however many partitions; rounds driven by messages (data) never trigger it,
so a busy partition does not drag idle ones along. What remains per idle partition and period
is one core call on each side and one item of ~40 bytes.

`TickGrid`: the driver's timers for many cores. A deadline in the future is rounded UP to a
multiple of quantum_ms (never earlier: every Raft timer is a lower bound, and firing late only
delays liveness), so cores due within one quantum tick in the same round. Keep quantum_ms well
under the follower's resend slack (RaftConfig.fetch_retry_ms - fetch_max_wait_ms, 50 ms by
default) minus a round trip, or a parked answer delayed by the rounding looks lost and the
follower sends its fetch again (harmless, but traffic).

Not here yet: KIP-227 fetch sessions (an idle partition's unchanged Fetch sent as its key alone,
the leader's broker expanding it from the session's previous request) would shrink the bytes,
not the core calls; fewer core calls need a longer idle poll (fetch_max_wait_ms, bounded by
fetch_timeout_ms and check-quorum) or quiescing idle groups (CockroachDB), which Raft's
check-quorum and fetch timeouts would have to learn about.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from quorum import codec
from quorum.raft.messages import FetchResponse, RaftMessage

__all__ = ["PartitionKey", "RaftEnvelope", "RaftItem", "RaftMux", "TickGrid", "unbundle"]

PartitionKey = tuple[str, int]  # (topic id, partition)


@codec.register("raftpart.RaftItem")
@dataclass(frozen=True, slots=True)
class RaftItem:
    topic_id: str
    partition: int
    message: Any  # one of quorum.raft.messages' requests or responses (checked by unbundle)


@codec.register("raftpart.RaftEnvelope")
@dataclass(frozen=True, slots=True)
class RaftEnvelope:
    """Every Raft message of one round from broker `src` to broker `dst`, all partitions."""

    src: int
    dst: int
    items: tuple[RaftItem, ...]

    def partition_keys(self) -> tuple[PartitionKey, ...]:
        """The partitions with items in here, in first-seen order."""
        return tuple(dict.fromkeys((i.topic_id, i.partition) for i in self.items))


class RaftMux:
    """One broker's outgoing Raft messages, queued per destination until `drain`."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._outbox: dict[int, list[RaftItem]] = {}
        self.envelopes_sent = 0
        self.items_sent = 0

    def add(self, dst: int, key: PartitionKey, message: RaftMessage) -> None:
        if dst == self.node_id:
            raise ValueError(f"broker {dst} sending a Raft message to itself ({key})")
        self._outbox.setdefault(dst, []).append(RaftItem(key[0], key[1], message))

    def fetch_answers_to(self) -> list[int]:
        """Brokers with a Fetch answer queued this round (phase merging, module docstring)."""
        return [dst for dst, items in self._outbox.items()
                if any(isinstance(i.message, FetchResponse) for i in items)]  # fmt: skip

    @property
    def pending_items(self) -> int:
        return sum(len(items) for items in self._outbox.values())

    def drain(self) -> list[RaftEnvelope]:
        """One envelope per destination with everything queued, in destination first-add order."""
        envelopes = [RaftEnvelope(self.node_id, dst, tuple(items))
                     for dst, items in self._outbox.items()]  # fmt: skip
        self._outbox.clear()
        self.envelopes_sent += len(envelopes)
        self.items_sent += sum(len(e.items) for e in envelopes)
        return envelopes


def unbundle(envelope: RaftEnvelope, node_id: int) -> list[tuple[PartitionKey, int, RaftMessage]]:
    """(partition, source broker, message) per item, in order. A misdelivered envelope or an
    item that is no Raft message is a codec.DecodeError (a bad frame at the edge)."""
    if envelope.dst != node_id:
        raise codec.DecodeError(f"envelope for broker {envelope.dst} delivered to {node_id}")
    out: list[tuple[PartitionKey, int, RaftMessage]] = []
    for item in envelope.items:
        if not isinstance(item.message, RaftMessage):
            raise codec.DecodeError(f"not a Raft message: {type(item.message).__name__}")
        out.append(((item.topic_id, item.partition), envelope.src, item.message))
    return out


K = TypeVar("K", bound=Hashable)


class TickGrid(Generic[K]):
    """Deadlines of many cores, future ones rounded up to a multiple of `quantum_ms`."""

    def __init__(self, quantum_ms: int) -> None:
        if quantum_ms < 1:
            raise ValueError(f"quantum_ms must be >= 1, got {quantum_ms}")
        self.quantum_ms = quantum_ms
        self._heap: list[tuple[int, int, K]] = []
        self._current: dict[K, tuple[int, int]] = {}  # key -> its live (tick, seq) in the heap
        self._seq = 0

    def aligned(self, deadline_ms: int, now_ms: int) -> int:
        """When a core due at `deadline_ms` is ticked: now if already due, else rounded up."""
        if deadline_ms <= now_ms:
            return now_ms
        q = self.quantum_ms
        return -(-deadline_ms // q) * q

    def set(self, key: K, deadline_ms: int | None, now_ms: int) -> None:
        """(Re)arm `key`'s timer; None disarms it."""
        if deadline_ms is None:
            self._current.pop(key, None)
            return
        self._seq += 1
        tick = self.aligned(deadline_ms, now_ms)
        self._current[key] = (tick, self._seq)
        heapq.heappush(self._heap, (tick, self._seq, key))

    def next_tick_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[K]:
        """Keys whose tick is <= now_ms, earliest first; they are disarmed (set them again after
        ticking their cores)."""
        due: list[K] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            del self._current[key]
            due.append(key)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._current.get(heap[0][2]) != (heap[0][0], heap[0][1]):
            heapq.heappop(heap)

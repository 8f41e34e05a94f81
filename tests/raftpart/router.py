"""A deterministic router for raft-partition tests (not the simulator, harness/sim): explicit
virtual time; brokers hosting a replica of each of `partitions` raft partitions; every Raft
message bundled per broker pair per round by RaftMux and round-tripped through quorum.codec;
timers on a TickGrid; each call's effects cut by flush_stages and run with one grouped fsync
round per broker per event (log fsyncs, then election states; the driver design of
partition/raft/effects.py), the Raft effects by harness.drive.effects.execute_effects, the
drivers' executor. The invariant checker (checker.py) sees
every commit, leader change and acknowledgement as it happens.

Crashes: `kill` (the process dies; the page cache survives, so unflushed bytes stay) and
`power_loss` (SimStorage.crash: what was not fsynced is gone, with a seeded rng a random prefix
of it survives). `restart` rebuilds the logs from storage and a fresh core from the persisted
quorum-state. Planted bugs for the checker's own tests: `drop_flush_log` (a driver that skips
the leader's FlushLog) and RaftConfig(flush_on_append=False) (followers acknowledge unflushed).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.drive.effects import execute_effects
from partition.log import LogConfig, PartitionLog, Record, SimStorage, encode_batch
from partition.raft import (
    AnswerLongPolls,
    Effect,
    PartitionKey,
    PeerUnreachable,
    ProducesReceived,
    RaftEnvelope,
    RaftMessageReceived,
    RaftMux,
    RaftPartitionConfig,
    RaftPartitionLog,
    RaftReplica,
    ResignRequested,
    Stage,
    TickGrid,
    execute_partition_effects,
    flush_stages,
    unbundle,
)
from partition.raft.effects import RaftEffect
from partition.replica import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from quorum import codec
from quorum.raft.effects import ElectionState, FlushLog, LeaderChanged
from quorum.raft.log import OffsetAndEpoch
from tests.raftpart.checker import Checker

TOPIC = "events"
TOPIC_ID = "raft-topic-id-0"
LOG_DIR = "/data"
T0_MS = 1_000_000
FAR = 1 << 62


def wire(message: Any) -> Any:
    return codec.decode(codec.encode(message))


def batch(*values: str, producer: tuple[int, int, int] | None = None) -> bytes:
    """One RecordBatch v2; `producer` = (producer id, producer epoch, base sequence)."""
    pid, pepoch, seq = producer if producer is not None else (-1, -1, -1)
    return encode_batch([Record(v.encode()) for v in values], producer_id=pid,
                        producer_epoch=pepoch, base_sequence=seq)  # fmt: skip


@dataclass(eq=False)
class Replica:
    """One partition's replica on one broker; harness.drive.effects' EffectEnv and partition.raft's
    PartitionEffectEnv for it."""

    router: Router
    broker: Broker
    key: PartitionKey
    plog: PartitionLog
    store: RaftPartitionLog
    core: RaftReplica
    stages: list[Stage] = field(default_factory=list)
    needs_flush: bool = False
    persist: ElectionState | None = None  # to make durable before the next stage
    checked_up_to: int = 0  # the checker compared this replica's commits up to here
    hw_seen: int = -1  # its HW at the end of the last round (a new replica after a restart)

    # -- harness.drive.effects.EffectEnv
    @property
    def log(self) -> RaftPartitionLog:
        return self.store

    def send(self, to: int, message: Any) -> None:
        self.broker.mux.add(to, self.key, message)

    def persist_election_state(self, state: ElectionState) -> None:
        self.store.persist_election_state(state)

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.store.update_high_watermark(high_watermark)
        self.router.checker.on_commit(self, high_watermark)

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.router.checker.on_leader_changed(self, effect)

    def on_read_barrier(self, effect: Any) -> None:
        raise AssertionError(f"raft partitions take no read barriers: {effect}")

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        raise AssertionError(f"raft partitions install no snapshots: {snapshot}")

    # -- partition.raft.PartitionEffectEnv
    def run_raft_effects(self, effects: list[RaftEffect]) -> None:
        execute_effects(effects, self)

    def complete_produce(self, response: ProduceResponse) -> None:
        self.router.on_produce_answer(self, wire(response))

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.router.consumer_responses.append(wire(response))


@dataclass(eq=False)
class Broker:
    node_id: int
    storage: SimStorage
    mux: RaftMux
    grid: TickGrid[PartitionKey]
    replicas: dict[PartitionKey, Replica] = field(default_factory=dict)
    touched: dict[PartitionKey, Replica] = field(default_factory=dict)  # called this round
    up: bool = True
    incarnation: int = 0


class Router:
    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3), partitions: int = 1,
                 config: RaftPartitionConfig | None = None, seed: int = 0, latency_ms: int = 1,
                 quantum_ms: int = 1, drop_flush_log: bool = False, merge_phases: bool = True,
                 check: bool = True) -> None:  # fmt: skip
        self.config = config or RaftPartitionConfig()
        self.voters = brokers
        self.keys: list[PartitionKey] = [(TOPIC_ID, p) for p in range(partitions)]
        self.seed = seed
        self.latency_ms = latency_ms
        self.quantum_ms = quantum_ms
        self.drop_flush_log = drop_flush_log
        self.merge_phases = merge_phases
        self.now_ms = T0_MS
        self.queue: list[tuple[int, int, RaftEnvelope]] = []
        self._seq = 0
        self.cut: set[tuple[int, int]] = set()
        self.refuse_down = True  # a message to a stopped broker: its sender hears "refused"
        self.fault_rng: random.Random | None = None
        self.drop_rate = 0.0
        self.jitter_ms = 0
        self.grouped_fsyncs = 0  # fsync rounds (one per broker per event with something to flush)
        self.log_fsyncs = 0  # fsyncs of partition logs between stages
        self.responses: dict[int, ProduceResponse] = {}
        self.requests: dict[int, tuple[PartitionKey, ProduceRequest]] = {}
        self.consumer_responses: list[FetchResponse] = []
        self.last_effects: dict[tuple[int, PartitionKey], list[Effect]] = {}  # last call's
        self.keep_effect_log = True
        self.effect_log: list[tuple[int, PartitionKey, list[Effect]]] = []
        self.next_request_id = 1
        self.checker = Checker(self, enabled=check)
        self.brokers: dict[int, Broker] = {}
        for b in brokers:
            broker = Broker(b, SimStorage(), RaftMux(b), TickGrid(quantum_ms))
            self.brokers[b] = broker
            self._open_replicas(broker)

    # ---------------------------------------------------------------------------- brokers

    def _open_replicas(self, broker: Broker) -> None:
        broker.mux = RaftMux(broker.node_id)
        broker.grid = TickGrid(self.quantum_ms)
        broker.replicas = {}
        for key in self.keys:
            plog = PartitionLog.open(broker.storage, LOG_DIR, TOPIC, key[1], LogConfig(),
                                     topic_id=TOPIC_ID)  # fmt: skip
            store = RaftPartitionLog(plog)
            seed = self.seed * 10_000 + broker.node_id * 100 + broker.incarnation * 10 + key[1]
            core = RaftReplica(broker.node_id, key[0], key[1], self.voters, store, seed=seed,
                               now_ms=self.now_ms, config=self.config,
                               election_state=store.election_state(), topic=TOPIC)  # fmt: skip
            replica = Replica(self, broker, key, plog, store, core)
            broker.replicas[key] = replica
            broker.grid.set(key, core.next_deadline_ms(), self.now_ms)

    def kill(self, node_id: int, connections_closed: bool = True) -> None:
        """The broker process dies (kill -9): its page cache, unflushed bytes included, stays.
        Its peers' connections to it close, and their drivers report it unreachable to every
        partition (PeerUnreachable), unless `connections_closed` is False (a silent death: they
        learn it only when a later send is refused, or by their timers)."""
        self.brokers[node_id].up = False
        if connections_closed:
            for broker in self.brokers.values():
                if broker.up:
                    for replica in broker.replicas.values():
                        self._call(replica, PeerUnreachable(node_id))
                    self._end_round(broker)

    def power_loss(self, node_id: int, rng: random.Random | None = None) -> None:
        """The machine loses power: everything not fsynced is gone (a random prefix of it
        survives with a seeded rng)."""
        broker = self.brokers[node_id]
        broker.up = False
        broker.storage.crash(rng)

    def restart(self, node_id: int) -> None:
        broker = self.brokers[node_id]
        assert not broker.up, f"broker {node_id} is running"
        broker.incarnation += 1
        broker.up = True
        self._open_replicas(broker)
        self.checker.on_restart(broker)

    # ---------------------------------------------------------------------------- network

    def set_faults(self, rng: random.Random, drop: float, jitter_ms: int) -> None:
        self.fault_rng, self.drop_rate, self.jitter_ms = rng, drop, jitter_ms

    def isolate(self, node_id: int) -> None:
        for other in self.brokers:
            if other != node_id:
                self.cut |= {(node_id, other), (other, node_id)}

    def heal(self) -> None:
        self.cut.clear()

    def _ship(self, envelope: RaftEnvelope) -> None:
        rng = self.fault_rng
        if rng is not None and rng.random() < self.drop_rate:
            return
        delay = self.latency_ms + (rng.randint(0, self.jitter_ms) if rng is not None else 0)
        self._seq += 1
        heapq.heappush(self.queue, (self.now_ms + delay, self._seq, wire(envelope)))

    def _deliver(self, envelope: RaftEnvelope) -> None:
        target = self.brokers[envelope.dst]
        sender = self.brokers[envelope.src]
        if (envelope.src, envelope.dst) in self.cut:
            return
        if not target.up:
            if self.refuse_down and sender.up:
                for key in envelope.partition_keys():
                    self._call(sender.replicas[key], PeerUnreachable(envelope.dst))
                self._end_round(sender)
            return
        for key, src, message in unbundle(envelope, target.node_id):
            replica = target.replicas.get(key)
            if replica is not None:
                self._call(replica, RaftMessageReceived(src, message))
        self._end_round(target)

    # ---------------------------------------------------------------------- running cores

    def _call(self, replica: Replica, message: Any | None) -> list[Effect]:
        """One input (None: a tick) to a replica's core; its effects' first stage runs now, the
        rest after its broker's grouped fsync at the end of the round."""
        self._finish(replica)  # rule 1: no input while stages of the previous call are left
        core = replica.core
        effects = core.tick(self.now_ms) if message is None else core.handle(message, self.now_ms)
        self.checker.on_effects(replica, effects)
        self.last_effects[(replica.broker.node_id, replica.key)] = effects
        if self.keep_effect_log:
            self.effect_log.append((replica.broker.node_id, replica.key, effects))
        if self.drop_flush_log:
            effects = [e for e in effects if not isinstance(e, FlushLog)]  # the planted bug
        replica.stages = flush_stages(effects)
        self._advance(replica)
        replica.broker.touched[replica.key] = replica
        return effects

    def _advance(self, replica: Replica) -> None:
        while replica.stages and not replica.needs_flush and replica.persist is None:
            stage = replica.stages.pop(0)
            execute_partition_effects(stage.effects, replica)
            replica.needs_flush = stage.flush_after
            replica.persist = stage.persist

    def _make_durable(self, replica: Replica) -> None:
        """What the last stage asked for before the next one: the log's fsync, then the
        election state."""
        if replica.needs_flush:
            replica.store.flush()
            replica.needs_flush = False
            self.log_fsyncs += 1
        if replica.persist is not None:
            replica.store.persist_election_state(replica.persist)
            replica.persist = None

    def _finish(self, replica: Replica) -> None:
        while replica.needs_flush or replica.persist is not None or replica.stages:
            self._make_durable(replica)
            self._advance(replica)

    def _end_round(self, broker: Broker, timer_round: bool = False) -> None:
        """Phase merging after a timer round (partition/raft/mux.py), then grouped fsyncs:
        every log with a flush pending, once, then the next stages; then the envelopes."""
        if timer_round and self.merge_phases:
            due_by = self.now_ms + self.config.raft.fetch_max_wait_ms
            for peer in broker.mux.fetch_answers_to():
                for replica in broker.replicas.values():
                    if replica.core.is_leader and peer in replica.core.voters:
                        self._call(replica, AnswerLongPolls(peer, due_by))
        while True:
            pending = [r for r in broker.touched.values()
                       if r.needs_flush or r.persist is not None]  # fmt: skip
            if not pending:
                break
            if any(r.needs_flush for r in pending):
                self.grouped_fsyncs += 1
            for r in pending:
                self._make_durable(r)
            for r in pending:
                self._advance(r)
        for envelope in broker.mux.drain():
            self._ship(envelope)
        touched, broker.touched = list(broker.touched.values()), {}
        for r in touched:
            broker.grid.set(r.key, r.core.next_deadline_ms(), self.now_ms)
        self.checker.after_round(touched)

    # ------------------------------------------------------------------------------- time

    def _next_event_ms(self) -> int:
        ticks = [
            t for b in self.brokers.values() if b.up and (t := b.grid.next_tick_ms()) is not None
        ]
        return min([*ticks, self.queue[0][0] if self.queue else FAR])

    def step(self) -> bool:
        at = self._next_event_ms()
        if at >= FAR:
            return False
        self.now_ms = max(self.now_ms, at)
        if self.queue and self.queue[0][0] <= at:
            _, _, envelope = heapq.heappop(self.queue)
            self._deliver(envelope)
            return True
        for broker in self.brokers.values():
            if not broker.up:
                continue
            due = broker.grid.pop_due(self.now_ms)
            for key in due:
                self._call(broker.replicas[key], None)
            if due:
                self._end_round(broker, timer_round=True)
        return True

    def advance(self, ms: int, max_events: int = 500_000) -> None:
        end = self.now_ms + ms
        for _ in range(max_events):
            if self._next_event_ms() > end:
                self.now_ms = end
                return
            self.step()
        raise AssertionError(f"no quiescence after {max_events} events at {self.now_ms} ms")

    def run_until(self, done: Callable[[], bool], within_ms: int, what: str) -> None:
        deadline = self.now_ms + within_ms
        while not done():
            if self.now_ms >= deadline:
                raise AssertionError(f"{what}: not within {within_ms} ms")
            self.advance(min(5, deadline - self.now_ms))

    # ----------------------------------------------------------------------------- queries

    def replica(self, node_id: int, partition: int = 0) -> Replica:
        return self.brokers[node_id].replicas[self.keys[partition]]

    def leaders(self, partition: int = 0) -> list[Replica]:
        key = self.keys[partition]
        return [b.replicas[key] for b in self.brokers.values()
                if b.up and b.replicas[key].core.is_leader]  # fmt: skip

    def leader(self, partition: int = 0) -> Replica:
        """The up leader with the highest epoch (a stale one may not know it was deposed)."""
        leaders = self.leaders(partition)
        assert leaders, f"no leader of partition {partition}"
        return max(leaders, key=lambda r: r.core.leader_epoch)

    def wait_for_leader(self, partition: int = 0, within_ms: int = 10_000) -> Replica:
        def one() -> bool:
            ls = self.leaders(partition)
            return len(ls) == 1 and ls[0].core.high_watermark > 0

        self.run_until(one, within_ms, f"a leader of partition {partition} with a committed HW")
        return self.leaders(partition)[0]

    # ----------------------------------------------------------------------------- clients

    def produce(self, *values: str, partition: int = 0, acks: int = -1, to: int | None = None,
                producer: tuple[int, int, int] | None = None, timeout_ms: int = 30_000,
                records: bytes | None = None) -> int:  # fmt: skip
        """Send a produce request to broker `to` (default: the partition's leader)."""
        request_id = self.next_request_id
        self.next_request_id += 1
        key = self.keys[partition]
        data = records if records is not None else batch(*values, producer=producer)
        req = wire(ProduceRequest(key[0], key[1], request_id, data, acks, timeout_ms))
        self.requests[request_id] = (key, req)
        node = to if to is not None else self.leader(partition).broker.node_id
        broker = self.brokers[node]
        if broker.up:
            self._call(broker.replicas[key], req)
            self._end_round(broker)
        return request_id

    def produce_many(self, writes: list[tuple[int, str]], to: int, acks: int = 1) -> list[int]:
        """(partition, value) writes to broker `to` handled in ONE round (one event-loop turn of
        a broker that got many produce requests at once): their fsyncs are grouped."""
        broker = self.brokers[to]
        ids = []
        for partition, value in writes:
            key = self.keys[partition]
            request_id = self.next_request_id
            self.next_request_id += 1
            req = wire(ProduceRequest(key[0], key[1], request_id, batch(value), acks, 30_000))
            self.requests[request_id] = (key, req)
            self._call(broker.replicas[key], req)
            ids.append(request_id)
        self._end_round(broker)
        return ids

    def produce_together(self, writes: list[tuple[bytes, int]], partition: int = 0,
                         to: int | None = None, timeout_ms: int = 30_000) -> list[int]:  # fmt: skip
        """(records, acks) produce requests handed to one core in ONE call (ProducesReceived:
        what a driver does with the produce requests of one event-loop round); request ids."""
        key = self.keys[partition]
        node = to if to is not None else self.leader(partition).broker.node_id
        requests = []
        for records, acks in writes:
            request_id = self.next_request_id
            self.next_request_id += 1
            req = wire(ProduceRequest(key[0], key[1], request_id, records, acks, timeout_ms))
            self.requests[request_id] = (key, req)
            requests.append(req)
        broker = self.brokers[node]
        self._call(broker.replicas[key], ProducesReceived(tuple(requests)))
        self._end_round(broker)
        return [req.request_id for req in requests]

    def on_produce_answer(self, replica: Replica, response: ProduceResponse) -> None:
        self.responses[response.request_id] = response
        key, request = self.requests[response.request_id]
        self.checker.on_ack(replica, request, response)

    def commit(self, *values: str, partition: int = 0, within_ms: int = 5_000,
               producer: tuple[int, int, int] | None = None) -> ProduceResponse:  # fmt: skip
        """acks=all to the leader, and wait for the answer."""
        request_id = self.produce(*values, partition=partition, producer=producer)
        self.run_until(lambda: request_id in self.responses, within_ms, f"answer to {values}")
        return self.responses[request_id]

    def consume(self, offset: int, partition: int = 0, to: int | None = None,
                current_leader_epoch: int = -1, max_wait_ms: int = 0,
                max_bytes: int = 1 << 20) -> FetchResponse | None:  # fmt: skip
        key = self.keys[partition]
        node = to if to is not None else self.leader(partition).broker.node_id
        before = len(self.consumer_responses)
        req = wire(FetchRequest(key[0], key[1], -1, offset, current_leader_epoch=current_leader_epoch,
                                max_bytes=max_bytes, max_wait_ms=max_wait_ms, request_id=offset))  # fmt: skip
        broker = self.brokers[node]
        self._call(broker.replicas[key], req)
        self._end_round(broker)
        return self.consumer_responses[-1] if len(self.consumer_responses) > before else None

    def resign(self, node_id: int, partition: int = 0) -> None:
        broker = self.brokers[node_id]
        self._call(broker.replicas[self.keys[partition]], ResignRequested())
        self._end_round(broker)

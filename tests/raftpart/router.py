"""A deterministic router for raft-partition tests (not the whole-cluster simulator, harness/sim):
explicit virtual time; brokers hosting a replica of each of `partitions` raft partitions; every
Raft message bundled per broker pair per round by RaftMux and round-tripped through quorum.codec.
Each broker is the one raft-partition host (harness/drive/raft_host.py) on the simulator's ports
(harness/sim/actors/raft_host.py SimRaftPorts: virtual clock, simulated disk with fsyncs that
take no simulated time, one envelope per peer per round); a round is one event of the router (an
envelope delivered, a broker's due timers, a client request). The invariant checker (checker.py)
sees every core call's effects, commit, leader change and acknowledgement as it happens.

Crashes: `kill` (the process dies; the page cache survives, so unflushed bytes stay, and the
restarted replica's recovery flush makes them durable before it counts them) and `power_loss`
(SimStorage.crash: what was not fsynced is gone, with a seeded rng a random prefix of it
survives). `restart` rebuilds the logs from storage and a fresh core from the persisted
quorum-state. Planted bugs for the checker's own tests: `drop_flush_log` (a core whose FlushLog
the driver never sees, so the leader counts its own unflushed appends) and
RaftConfig(flush_on_append=False) (followers acknowledge unflushed).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.drive.raft_host import HostedRaft, RaftObserver, RaftPartitionHost
from harness.sim.actors.raft_host import SimRaftPorts
from partition.log import LogConfig, PartitionLog, Record, SimStorage, encode_batch
from partition.raft import (
    Effect,
    PartitionKey,
    PeerUnreachable,
    RaftEnvelope,
    RaftPartitionConfig,
    RaftPartitionInput,
    RaftReplica,
    ResignRequested,
)
from partition.replica import FetchRequest, FetchResponse, ProduceRequest, ProduceResponse
from quorum import codec
from quorum.raft.effects import FlushLog, LeaderChanged
from tests.raftpart.checker import Checker

TOPIC = "events"
TOPIC_ID = "raft-topic-id-0"
LOG_DIR = "/data"
T0_MS = 1_000_000
FAR = 1 << 62

Replica = HostedRaft  # one partition's replica on one broker


def wire(message: Any) -> Any:
    return codec.decode(codec.encode(message))


def batch(*values: str, producer: tuple[int, int, int] | None = None) -> bytes:
    """One RecordBatch v2; `producer` = (producer id, producer epoch, base sequence)."""
    pid, pepoch, seq = producer if producer is not None else (-1, -1, -1)
    return encode_batch([Record(v.encode()) for v in values], producer_id=pid,
                        producer_epoch=pepoch, base_sequence=seq)  # fmt: skip


class DropFlushLogReplica(RaftReplica):
    """PLANTED BUG: the driver never sees the leader's FlushLog (partition/raft/effects.py rule
    1): nothing cuts the stage after the leader's append, so its fetch answers and its commit
    count an append no fsync made durable."""

    def handle(self, message: RaftPartitionInput, now_ms: int) -> list[Effect]:
        return [e for e in super().handle(message, now_ms) if not isinstance(e, FlushLog)]

    def tick(self, now_ms: int) -> list[Effect]:
        return [e for e in super().tick(now_ms) if not isinstance(e, FlushLog)]


class _BrokerEnv:
    """What the simulator's ports need from a broker: the router's network and clients."""

    def __init__(self, router: Router, node_id: int) -> None:
        self.router = router
        self.node_id = node_id

    def send(self, to: int, message: Any) -> None:
        self.router._ship(message)

    def complete_produce(self, response: ProduceResponse) -> None:
        self.router.on_produce_answer(wire(response))

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        self.router.consumer_responses.append(wire(response))


class _Watch(RaftObserver):
    """The checker and the effect logs, observing a broker's host."""

    def __init__(self, router: Router) -> None:
        self.router = router

    def on_effects(self, r: HostedRaft, effects: list[Effect]) -> None:
        router = self.router
        router.checker.on_effects(r, effects)
        router.last_effects[(r.node_id, r.key)] = effects
        if router.keep_effect_log:
            router.effect_log.append((r.node_id, r.key, effects))

    def on_commit(self, r: HostedRaft, high_watermark: int) -> None:
        self.router.checker.on_commit(r, high_watermark)

    def on_leader_changed(self, r: HostedRaft, effect: LeaderChanged) -> None:
        self.router.checker.on_leader_changed(r, effect)

    def after_round(self, replicas: list[HostedRaft]) -> None:
        self.router.checker.after_round(replicas)


@dataclass(eq=False)
class Broker:
    node_id: int
    storage: SimStorage
    host: RaftPartitionHost
    ports: SimRaftPorts
    up: bool = True
    incarnation: int = 0

    @property
    def replicas(self) -> dict[PartitionKey, HostedRaft]:
        return self.host.replicas


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
        self._retired = (0, 0)  # fsync counters of the hosts of processes that ended
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
            self.brokers[b] = self._start(b, SimStorage(), 0)

    # ---------------------------------------------------------------------------- brokers

    def _start(self, node_id: int, storage: SimStorage, incarnation: int) -> Broker:
        """A broker process: its host on the simulator's ports, a replica of every partition."""
        ports = SimRaftPorts(_BrokerEnv(self, node_id), None)
        host = ports.bind(RaftPartitionHost(node_id, ports, ports, ports, _Watch(self),
                                            tick_quantum_ms=self.quantum_ms,
                                            merge_phases=self.merge_phases))  # fmt: skip
        ports.at(self.now_ms)
        core_class = DropFlushLogReplica if self.drop_flush_log else RaftReplica
        for key in self.keys:
            plog = PartitionLog.open(storage, LOG_DIR, TOPIC, key[1], LogConfig(),
                                     topic_id=TOPIC_ID)  # fmt: skip
            seed = self.seed * 10_000 + node_id * 100 + incarnation * 10 + key[1]
            host.add(key, self.voters, plog, seed=seed, config=self.config, topic=TOPIC,
                     core_class=core_class)  # fmt: skip
        return Broker(node_id, storage, host, ports, incarnation=incarnation)

    def host(self, broker: Broker) -> RaftPartitionHost:
        """`broker`'s host, its clock at the router's time."""
        return broker.ports.at(self.now_ms)

    @property
    def grouped_fsyncs(self) -> int:
        """Grouped fsync rounds (a round's make_durable with a log to fsync), every broker."""
        return self._retired[0] + sum(b.host.fsync_rounds for b in self.brokers.values())

    @property
    def log_fsyncs(self) -> int:
        """fsyncs of partition logs between stages, every broker."""
        return self._retired[1] + sum(b.host.log_fsyncs for b in self.brokers.values())

    def kill(self, node_id: int, connections_closed: bool = True) -> None:
        """The broker process dies (kill -9): its page cache, unflushed bytes included, stays.
        Its peers' connections to it close, and their drivers report it unreachable to every
        partition (PeerUnreachable), unless `connections_closed` is False (a silent death: they
        learn it only when a later send is refused, or by their timers)."""
        self.brokers[node_id].up = False
        if connections_closed:
            for broker in self.brokers.values():
                if broker.up:
                    host = self.host(broker)
                    host.peer_unreachable(node_id)
                    host.end_round()

    def power_loss(self, node_id: int, rng: random.Random | None = None) -> None:
        """The machine loses power: everything not fsynced is gone (a random prefix of it
        survives with a seeded rng)."""
        broker = self.brokers[node_id]
        broker.up = False
        broker.storage.crash(rng)

    def restart(self, node_id: int) -> None:
        old = self.brokers[node_id]
        assert not old.up, f"broker {node_id} is running"
        self._retired = (self._retired[0] + old.host.fsync_rounds,
                         self._retired[1] + old.host.log_fsyncs)  # fmt: skip
        broker = self.brokers[node_id] = self._start(node_id, old.storage, old.incarnation + 1)
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
                host = self.host(sender)
                for key in envelope.partition_keys():
                    host.input(host.replicas[key], PeerUnreachable(envelope.dst))
                host.end_round()
            return
        host = self.host(target)
        host.on_envelope(envelope)
        host.end_round()

    # ------------------------------------------------------------------------------- time

    def _next_event_ms(self) -> int:
        ticks = [t for b in self.brokers.values() if b.up and (t := b.ports.timer_at) is not None]
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
            at_ms = broker.ports.timer_at
            if broker.up and at_ms is not None and at_ms <= self.now_ms:
                host = self.host(broker)
                host.on_timer(at_ms)
                host.end_round()
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
        node = to if to is not None else self.leader(partition).node_id
        broker = self.brokers[node]
        if broker.up:
            host = self.host(broker)
            host.produce(host.replicas[key], req)
            host.end_round()
        return request_id

    def produce_many(self, writes: list[tuple[int, str]], to: int, acks: int = 1) -> list[int]:
        """(partition, value) writes to broker `to` handled in ONE round (one event-loop turn of
        a broker that got many produce requests at once): their fsyncs are grouped."""
        host = self.host(self.brokers[to])
        ids = []
        for partition, value in writes:
            key = self.keys[partition]
            request_id = self.next_request_id
            self.next_request_id += 1
            req = wire(ProduceRequest(key[0], key[1], request_id, batch(value), acks, 30_000))
            self.requests[request_id] = (key, req)
            host.produce(host.replicas[key], req)
            ids.append(request_id)
        host.end_round()
        return ids

    def produce_together(self, writes: list[tuple[bytes, int]], partition: int = 0,
                         to: int | None = None, timeout_ms: int = 30_000) -> list[int]:  # fmt: skip
        """(records, acks) produce requests handed to one core in ONE call (ProducesReceived:
        what a driver does with the produce requests of one event-loop round); request ids."""
        key = self.keys[partition]
        node = to if to is not None else self.leader(partition).node_id
        requests = []
        for records, acks in writes:
            request_id = self.next_request_id
            self.next_request_id += 1
            req = wire(ProduceRequest(key[0], key[1], request_id, records, acks, timeout_ms))
            self.requests[request_id] = (key, req)
            requests.append(req)
        host = self.host(self.brokers[node])
        for req in requests:
            host.produce(host.replicas[key], req)
        host.end_round()
        return [req.request_id for req in requests]

    def on_produce_answer(self, response: ProduceResponse) -> None:
        self.responses[response.request_id] = response
        key, request = self.requests[response.request_id]
        self.checker.on_ack(key, request, response)

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
        node = to if to is not None else self.leader(partition).node_id
        before = len(self.consumer_responses)
        req = wire(FetchRequest(key[0], key[1], -1, offset, current_leader_epoch=current_leader_epoch,
                                max_bytes=max_bytes, max_wait_ms=max_wait_ms, request_id=offset))  # fmt: skip
        host = self.host(self.brokers[node])
        host.input(host.replicas[key], req)
        host.end_round()
        return self.consumer_responses[-1] if len(self.consumer_responses) > before else None

    def resign(self, node_id: int, partition: int = 0) -> None:
        host = self.host(self.brokers[node_id])
        host.input(host.replicas[self.keys[partition]], ResignRequested())
        host.end_round()

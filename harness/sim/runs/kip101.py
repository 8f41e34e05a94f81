"""KIP-101's scenarios 1 and 2 (KAFKA-1211) as scripted runs of the
data-plane simulation: the same Cluster (harness.sim.runs.cluster: the abstract controller,
brokers with ReplicaCores on SimStorage, seeded network) driven by a script instead of a nemesis. Each returns a ScenarioOutcome
with the replicas' final logs, so a test can assert loss or divergence exactly.

KRaft itself blocks both exact sequences (a restarted broker re-registers and leaves every ISR,
KIP-841), so the restarting replica here is rebuilt from its disk while its broker keeps its
registration, as a ZooKeeper-era broker restart was (Broker.restart_replica).

1. Truncation to the HW loses an acknowledged write (KAFKA-1211): RF 2, acks=all, minISR 1.
   A (leader) and B hold [m0, m1], the HW of A is 2 but the answer to B carrying HW 2 is lost
   (cut), so the HW of B is 1. B restarts: pre-KIP-101 it truncates to its HW (loses m1). A dies
   before B refetches; B is elected; A returns and follows B. m1 was acknowledged and is gone.
2. Silent divergence: A and B hold [m0, m1] (the HW of A is 2). Both lose power; the unflushed
   m1 of B is lost, A had flushed it. B restarts first, is elected, and writes m2 at offset 1.
   A returns with HW 2 >= the LEO of B: pre-KIP-101 it does not truncate; offset 1 is m1 on A
   and m2 on B.
With `leader.epoch.enable=true` the follower truncates by leader epoch instead (KIP-101/279):
B keeps m1 in (1); A learns where epoch 0 ends on B and truncates to 1 in (2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.sim.actors.clients import CLIENT_BASE
from harness.sim.actors.process import SimProcess
from harness.sim.checks.replicas import decode_values
from harness.sim.runs.cluster import Cluster
from harness.sim.runs.scenario_run import ScenarioConfig, build_cluster, topic_request
from partition.log import Record, encode_batch
from partition.replica import ACKS_ALL, ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

SCRIPT_CLIENT = CLIENT_BASE + 99
# Called with the cluster once it is built, before anything runs (a recorder attaches there:
# harness/sim/runs/recording.py); it must only observe.
Observer = Callable[[Cluster], None]


@dataclass
class ScenarioOutcome:
    acked: list[str]
    logs: dict[int, list[tuple[int, str]]]  # broker -> [(offset, value)]
    leader: int
    violations: dict[str, int]

    def lost(self) -> list[str]:
        """Acknowledged values absent from the final leader's log."""
        held = {v for _, v in self.logs.get(self.leader, [])}
        return [v for v in self.acked if v not in held]

    def diverged(self) -> bool:
        """Two replicas hold different values at one offset."""
        seen: dict[int, str] = {}
        for entries in self.logs.values():
            for offset, value in entries:
                if seen.setdefault(offset, value) != value:
                    return True
        return False


class ScriptClient(SimProcess):
    """The script's producer: an actor that sends what it is told and keeps every answer."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.node_id = SCRIPT_CLIENT
        self.responses: dict[int, ProduceResponse] = {}
        self.init_process()
        self.process_started()  # a script's client is never faulted (it is not a node)
        cluster.world.add(self, "client")

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        if isinstance(message, ProduceResponse):
            self.responses[message.request_id] = message

    def tick(self, now_ms: int) -> None:
        pass

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        pass

    def next_deadline_ms(self) -> int | None:
        return None

    def produce(self, to: int, value: str, acks: int = ACKS_ALL) -> int:
        rid = self.cluster.next_request_id()
        self.outbox.append((to, ProduceRequest(
            self.cluster.topic_id, 0, rid, encode_batch([Record(value.encode())]), acks, 2000)))
        self.cluster.world.after(self)
        return rid


def _setup(leader_epoch_enable: bool,
           observer: Observer | None = None) -> tuple[Cluster, ScriptClient]:
    config = ScenarioConfig(seed=1, replication_factor=2, min_insync_replicas=1,
                            leader_epoch_enable=leader_epoch_enable)
    cluster = build_cluster(config)
    if observer is not None:
        observer(cluster)
    for b in sorted(cluster.brokers):
        cluster.world.queue.call_at(0, cluster.world.restart, b)
    cluster.run_until(300)
    cluster.create_topic(topic_request(config))
    cluster.run_until(1000)
    assert cluster.topic_id and cluster.leader_id() > 0, "topic not created"
    return cluster, ScriptClient(cluster)


def _m0_committed(leader_epoch_enable: bool,
                  observer: Observer | None) -> tuple[Cluster, ScriptClient, int, int]:  # fmt: skip
    """Where both stories start: leader A, follower B, and m0 acknowledged with B's HW at 1."""
    cluster, client = _setup(leader_epoch_enable, observer)
    a = cluster.leader_id()
    b = next(x for x in cluster.brokers if x != a)
    bb = cluster.brokers[b]
    r0 = client.produce(a, "0")
    _run_until(cluster, lambda: _ok(client, r0) and bb.core is not None
               and bb.core.high_watermark == 1)  # fmt: skip
    return cluster, client, a, b


def _run_until(cluster: Cluster, predicate: Any, limit_ms: int = 5000) -> None:
    end = cluster.world.now_ms + limit_ms
    while not predicate() and cluster.world.now_ms < end:
        cluster.run_until(cluster.world.now_ms + 1)
    if not predicate():
        raise AssertionError("scenario step did not happen in time")


def _outcome(cluster: Cluster, acked: list[str]) -> ScenarioOutcome:
    logs: dict[int, list[tuple[int, str]]] = {}
    for b, broker in cluster.brokers.items():
        log = broker.log
        assert log is not None
        data = log.read(log.log_start_offset, 1 << 20) if log.log_end_offset else b""
        logs[b] = [(o, str(v)) for o, v in decode_values(data)]
    counters = cluster.replicas.counters
    violations = dict(counters.violations)
    if counters.divergence_after_loss:  # leader epochs off: counted, not an invariant
        violations["divergence-below-hw-after-loss"] = counters.divergence_after_loss
    return ScenarioOutcome(acked, logs, cluster.leader_id(), violations)


def _ok(client: ScriptClient, rid: int) -> bool:
    r = client.responses.get(rid)
    return r is not None and r.error is Errors.NONE


def truncation_to_hw_loss(leader_epoch_enable: bool,
                          observer: Observer | None = None) -> ScenarioOutcome:
    cluster, client, a, b = _m0_committed(leader_epoch_enable, observer)
    world = cluster.world
    ba, bb = cluster.brokers[a], cluster.brokers[b]

    def cut_when_committed(actor: Any) -> None:
        if actor is ba and ba.core is not None and ba.core.high_watermark >= 2:
            world.network.cut_between(a, [b])  # B never hears HW 2

    world.after_hooks.append(cut_when_committed)
    r1 = client.produce(a, "1")
    _run_until(cluster, lambda: _ok(client, r1))
    world.after_hooks.remove(cut_when_committed)
    cluster.run_until(world.now_ms + 50)
    assert bb.core is not None and bb.core.high_watermark == 1 and bb.core.log_end_offset == 2
    bb.hw_checkpoint = 1
    bb.restart_replica()  # B follows A again: pre-KIP-101 it truncates to HW 1
    _run_until(cluster, lambda: bb.core is not None and bb.core.partition is not None)
    cluster.run_until(world.now_ms + 20)
    world.kill(a)  # A dies before B refetches m1
    _run_until(cluster, lambda: cluster.leader_id() == b)
    world.network.heal()
    ba.hw_checkpoint = 2
    world.restart(a)
    cluster.run_until(world.now_ms + 2000)
    return _outcome(cluster, ["0", "1"])


def silent_divergence(leader_epoch_enable: bool,
                      observer: Observer | None = None) -> ScenarioOutcome:
    cluster, client, a, b = _m0_committed(leader_epoch_enable, observer)
    world = cluster.world
    ba, bb = cluster.brokers[a], cluster.brokers[b]
    for broker in (ba, bb):
        assert broker.log is not None
        broker.log.flush()  # m0 durable everywhere
    r1 = client.produce(a, "1")
    _run_until(cluster, lambda: _ok(client, r1) and bb.core is not None
               and bb.core.high_watermark == 2)
    assert ba.log is not None
    ba.log.flush()  # A made m1 durable, B did not
    ba.hw_checkpoint, bb.hw_checkpoint = 2, 1
    ba.crash(None)  # power loss: A loses nothing unflushed (it flushed m1)
    bb.restart_replica(lose_unflushed=True)  # B back first: elected once A is fenced
    _run_until(cluster, lambda: cluster.leader_id() == b and bb.core is not None
               and bb.core.is_leader)
    r2 = client.produce(b, "2")
    _run_until(cluster, lambda: _ok(client, r2))
    world.restart(a)  # A returns with HW 2 >= B's LEO
    cluster.run_until(world.now_ms + 2000)
    return _outcome(cluster, ["0", "2"])

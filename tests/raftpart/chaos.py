"""A seeded chaos run of raft partitions on the router: one seed draws everything (the fault
schedule, message drops and jitter, power-loss survivors, the cores' own timers), then a
liveness phase where faults stop and every partition must converge within a budget (the VOPR /
FoundationDB shape). The router's checker judges every event; `run` raises its Violation.

Faults: partitions of one broker, cut links, message loss and reordering, kill -9 (with or
without the peers noticing the closed connections), power loss of unflushed data (a random
surviving prefix), restarts, controlled shutdowns. Clients: per partition an idempotent acks=all
producer that retries the same sequence until answered NONE (KIP-98), plus acks=0/1 writes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from partition.raft import RaftPartitionConfig
from quorum.metadata.errors import Errors
from tests.raftpart.router import Replica, Router

PRODUCER_ID_BASE = 1000


@dataclass
class Producer:
    """An idempotent acks=all producer: a new sequence only once the previous batch was acked."""

    producer_id: int
    sequence: int = 0
    in_flight: int | None = None  # request id
    values: tuple[str, ...] = ()
    acked: list[str] = field(default_factory=list)


def _produce(r: Router, rng: random.Random, p: int, producers: list[Producer], n: int) -> int:
    leaders = r.leaders(p)
    up = [b for b, broker in r.brokers.items() if broker.up]
    if not up:
        return n
    to = (
        max(leaders, key=lambda x: x.core.leader_epoch).node_id
        if leaders
        else rng.choice(up)
    )
    if rng.random() < 0.25:  # a plain acks=0/1 write, no idempotence
        r.produce(f"w{n}", partition=p, acks=rng.choice([0, 1]), to=to, timeout_ms=2000)
        return n + 1
    prod = producers[p]
    if prod.in_flight is not None:
        answer = r.responses.get(prod.in_flight)
        if answer is None:
            return n  # still waiting
        prod.in_flight = None
        if answer.error is Errors.NONE:
            prod.acked += prod.values
            prod.sequence += len(prod.values)
            prod.values = ()
    if not prod.values:
        prod.values = tuple(f"p{p}-s{prod.sequence + i}" for i in range(rng.randint(1, 3)))
    prod.in_flight = r.produce(*prod.values, partition=p, to=to, timeout_ms=rng.choice([500, 3000]),
                               producer=(prod.producer_id, 0, prod.sequence))  # fmt: skip
    return n


def _fault(r: Router, rng: random.Random) -> None:
    nodes = list(r.brokers)
    down = [b for b in nodes if not r.brokers[b].up]
    kind = rng.choice(["isolate", "cut", "heal", "kill", "power", "power", "restart", "restart",
                       "resign"])  # fmt: skip
    leaders = [x.node_id for p in range(len(r.keys)) for x in r.leaders(p)]
    node = rng.choice(leaders) if leaders and rng.random() < 0.5 else rng.choice(nodes)
    broker = r.brokers[node]
    if kind == "isolate":
        r.isolate(node)
    elif kind == "cut":
        other = rng.choice([b for b in nodes if b != node])
        r.cut |= {(node, other), (other, node)}
    elif kind == "heal":
        r.heal()
    elif kind in ("kill", "power") and broker.up and len(down) < len(nodes) // 2:
        if kind == "kill":
            r.kill(node, connections_closed=rng.random() < 0.5)
        else:
            survivors = random.Random(rng.getrandbits(32)) if rng.random() < 0.5 else None
            r.power_loss(node, survivors)  # None: every unflushed byte is lost
    elif kind == "restart" and down:
        r.restart(rng.choice(down))
    elif kind == "resign" and broker.up:
        r.resign(node, partition=rng.randrange(len(r.keys)))


def run(seed: int, steps: int = 150, partitions: int = 2, config: RaftPartitionConfig | None = None,
        drop_flush_log: bool = False, check: bool = True) -> Router:  # fmt: skip
    rng = random.Random(seed)
    r = Router(partitions=partitions, config=config, seed=seed, drop_flush_log=drop_flush_log,
               check=check)  # fmt: skip
    r.keep_effect_log = False
    r.set_faults(random.Random(rng.getrandbits(32)), drop=rng.choice([0.0, 0.02, 0.1]),
                 jitter_ms=rng.choice([0, 5, 30]))  # fmt: skip
    producers = [Producer(PRODUCER_ID_BASE + p) for p in range(partitions)]
    n = 0
    for _ in range(steps):
        if rng.random() < 0.6:
            n = _produce(r, rng, rng.randrange(partitions), producers, n)
        else:
            _fault(r, rng)
        r.advance(rng.choice([1, 5, 20, 100, 400, 1500]))
    _converge(r, producers)
    return r


def _converge(r: Router, producers: list[Producer]) -> None:
    """Liveness: no more faults; every partition elects a leader, commits, and every replica
    ends with the leader's log; every acknowledged write is there."""
    r.heal()
    r.set_faults(random.Random(0), drop=0.0, jitter_ms=0)
    for node, broker in r.brokers.items():
        if not broker.up:
            r.restart(node)
    for p, prod in enumerate(producers):
        deadline = r.now_ms + 20_000
        while True:  # a client retries until a leader commits its write (a leader may still move)
            assert r.now_ms < deadline, f"partition {p}: no commit within 20 s of the heal"
            r.wait_for_leader(partition=p, within_ms=deadline - r.now_ms)
            if r.commit(f"final-{p}", partition=p, within_ms=5_000).error is Errors.NONE:
                break
        replicas = [broker.replicas[r.keys[p]] for broker in r.brokers.values()]

        def caught_up(p: int = p, replicas: list[Replica] = replicas) -> bool:
            hw = r.leader(p).core.high_watermark
            return all(x.core.high_watermark == x.store.end_offset == hw for x in replicas)

        r.run_until(caught_up, 10_000, f"partition {p}: every replica at the leader's HW")
        leader = r.leader(p)
        r.checker.check_acked_present(leader)
        expected = leader.store.read(0, 1 << 30)
        for replica in replicas:
            assert replica.store.read(0, 1 << 30) == expected, (p, replica.node_id)
        committed = r.checker.committed_producer_batches(r.keys[p], prod.producer_id)
        assert len(committed) == len(set(committed)), f"a producer batch written twice: {committed}"

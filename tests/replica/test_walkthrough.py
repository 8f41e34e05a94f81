"""The classic 4-replica LEO/HW walk-through, with exact numbers: the
leader appends 2 messages (LEO 2, HW 0); followers fetch; the HW moves to the ISR minimum; a slow
follower holds it back until it is dropped after replica.lag.time.max.ms; it rejoins when its
LEO reaches the HW."""

from __future__ import annotations

from quorum.metadata.errors import Errors
from tests.replica.router import T0_MS, Cluster


def test_four_replica_walkthrough() -> None:
    c = Cluster(replicas=(1, 2, 3, 4))
    leader = c.nodes[1].core
    m0 = c.produce("m0")
    c.fetch(4)  # the slow follower gets m0 and nothing more for a long while
    assert c.nodes[4].core.log_end_offset == 1
    m1 = c.produce("m1", timeout_ms=60_000)
    assert (leader.log_end_offset, leader.high_watermark) == (2, 0)
    assert m0 not in c.responses and m1 not in c.responses  # acks=all waits for the HW

    for f in (2, 3):
        c.fetch(f)  # fetch @0: both messages; the leader still thinks they are at 0
    assert [c.nodes[f].core.log_end_offset for f in (2, 3)] == [2, 2]
    assert leader.high_watermark == 0
    c.fetch(4, deliver_response=False)  # fetch @1 reaches the leader; its answer is lost
    for f in (2, 3):
        c.fetch(f)  # fetch @2: now the leader knows they hold both
    status = {f.replica_id: f.log_end_offset for f in leader.status().followers}
    assert status == {2: 2, 3: 2, 4: 1}
    assert leader.high_watermark == 1  # min LEO over the ISR {1,2,3,4}
    assert c.responses[m0].error is Errors.NONE and c.responses[m0].base_offset == 0
    assert m1 not in c.responses
    # Followers learn the HW one fetch later (the response carries the HW read before the fetch).
    assert c.nodes[2].core.high_watermark == 0
    c.fetch(2)
    assert c.nodes[2].core.high_watermark == 1

    # The slow follower holds the HW back for replica.lag.time.max.ms (30 s), checked every 15 s.
    c.advance(15_000)
    c.advance(15_000)  # T0 + 30 s: lagging exactly 30 s is still in sync
    assert leader.isr == (1, 2, 3, 4) and leader.high_watermark == 1
    c.advance(15_000)  # T0 + 45 s: out of sync, proposed out, the controller commits it
    assert c.now_ms == T0_MS + 45_000
    assert leader.isr == (1, 2, 3) and c.partition.isr == (1, 2, 3)
    assert leader.high_watermark == 2
    assert c.responses[m1].error is Errors.NONE and c.responses[m1].last_offset == 1

    # It catches up: at LEO 1 < HW 2 it stays out; at LEO 2 == HW it is proposed back in.
    c.fetch(4)  # @1: gets m1
    assert leader.isr == (1, 2, 3)
    c.fetch(4)  # @2: LEO 2 reaches the HW
    assert leader.isr == (1, 2, 3, 4) and c.partition.isr == (1, 2, 3, 4)
    assert c.partition.partition_epoch == 2 and c.partition.leader_epoch == 0
    assert [c.nodes[r].values() for r in (1, 2, 3, 4)] == [["m0", "m1"]] * 4

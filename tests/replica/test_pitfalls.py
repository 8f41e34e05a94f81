"""Reference section 2 pitfalls that live in the replica core, hand-driven: the zombie leader
(item 4), unclean election loss (item 5), an ISR of one with min.insync.replicas 1 vs 2
(item 6)."""

from __future__ import annotations

import dataclasses

from partition.replica import ReplicaConfig
from quorum.metadata.errors import Errors
from quorum.metadata.records import LeaderRecoveryState
from tests.replica.router import Cluster


def test_zombie_leader_loses_acks_1_and_times_out_acks_all() -> None:
    c = Cluster(replicas=(1, 2, 3))
    base = c.produce("base")
    for f in (2, 3):
        c.fetch(f)
        c.fetch(f)
    assert c.responses[base].error is Errors.NONE
    # 1 is cut off from the controllers: 2 and 3 learn of epoch 1, 1 does not.
    c.elect(2, isr=(2, 3), publish=False)
    c.publish((2, 3))
    zombie_acks_1 = c.produce("z1", acks=1, to=1)
    zombie_acks_all = c.produce("zall", acks=-1, to=1, timeout_ms=30_000)
    assert c.responses[zombie_acks_1].error is Errors.NONE  # acknowledged by the zombie
    c.advance(30_000)  # nobody fetches from 1 any more; its AlterPartition would be fenced
    assert c.responses[zombie_acks_all].error is Errors.REQUEST_TIMED_OUT
    fresh = c.produce("fresh", acks=-1)  # the real leader takes writes in epoch 1
    c.fetch(3)
    c.fetch(3)
    assert c.responses[fresh].error is Errors.NONE
    c.publish((1,))  # 1 rejoins, learns epoch 1, follows 2, truncates on the diverging epoch
    c.fetch_until_idle(1)
    values = c.nodes[1].values()
    assert values == c.nodes[2].values() == ["base", "fresh"]
    written = {zombie_acks_1: "z1", zombie_acks_all: "zall", base: "base", fresh: "fresh"}
    acked = {v for rid, v in written.items() if c.responses[rid].error is Errors.NONE}
    assert acked - set(values) == {"z1"}  # acked-but-lost: the acks=1 write only


def test_unclean_election_loses_old_hw_minus_new_leo() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1,))
    for v in ("a", "b", "c", "d"):
        c.produce(v, acks=-1)
    assert c.nodes[1].core.high_watermark == 4  # ISR {1}: committed on one copy
    c.nodes[2].log.append_as_follower(c.nodes[1].log.read(0, 1))  # 2 lagged at LEO 1
    c.nodes[1].log.flush()
    c.crash(1)
    c.partition = dataclasses.replace(
        c.partition, leader_recovery_state=LeaderRecoveryState.RECOVERING
    )
    c.elect(2, isr=(2,))  # unclean: 2 was not in the ISR
    assert c.partition.leader_recovery_state == LeaderRecoveryState.RECOVERED  # reported at once
    c.restart(1, high_watermark=4)
    c.fetch_until_idle(1)
    old_hw, new_leo = 4, 1
    assert c.nodes[1].values() == c.nodes[2].values() == ["a"]  # loss = old HW - LEO_2 = 3
    assert old_hw - new_leo == 3


def test_isr_of_one_min_insync_1_keeps_acking_min_insync_2_refuses() -> None:
    for min_isr, expected in ((1, Errors.NONE), (2, Errors.NOT_ENOUGH_REPLICAS)):
        cfg = ReplicaConfig(replica_fetch_wait_max_ms=0, min_insync_replicas=min_isr)
        c = Cluster(replicas=(1, 2, 3), config=cfg)
        c.advance(45_000)  # partitioned followers drop out after replica.lag.time.max.ms
        assert c.partition.isr == (1,)
        r = c.produce("x", acks=-1)
        assert c.responses[r].error is expected, min_isr
        assert c.nodes[1].log.log_end_offset == (1 if min_isr == 1 else 0)  # one copy, or none

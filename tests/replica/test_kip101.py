"""KIP-101's scenarios 1 and 2 (KAFKA-1211), driven by hand over two
replica cores with simulated disks: reproduced with leader.epoch.enable=false (truncation to the
local HW), prevented with the default (truncation by leader epoch, KIP-101/320)."""

from __future__ import annotations

import pytest

from partition.replica import ReplicaConfig
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster

A, B = 1, 2


def _cluster(leader_epoch_enable: bool) -> Cluster:
    return Cluster(replicas=(A, B), config=ReplicaConfig(replica_fetch_wait_max_ms=0,
                                                         leader_epoch_enable=leader_epoch_enable))  # fmt: skip


def _replicate_m0_m1(c: Cluster, flush_b_after_m0: bool = False) -> int:
    """A leads epoch 0; m0 and m1 are acked with acks=all; B holds both but its HW is still 1:
    it would learn HW 2 from the answer to its fetch @2, which never arrives."""
    m0 = c.produce("m0")
    c.fetch(B)  # @0: m0
    c.fetch(B)  # @1: A's HW -> 1, m0 acked
    assert c.responses[m0].error is Errors.NONE
    if flush_b_after_m0:
        c.nodes[B].log.flush()
    m1 = c.produce("m1")
    c.fetch(B)  # @1: m1, with HW 1
    c.fetch(B, deliver_response=False)  # @2: A's HW -> 2, m1 acked; B never hears it
    assert c.responses[m1].error is Errors.NONE and c.responses[m1].base_offset == 1
    assert (c.nodes[A].core.high_watermark, c.nodes[B].core.high_watermark) == (2, 1)
    assert c.nodes[B].core.log_end_offset == 2
    return m1


@pytest.mark.parametrize("leader_epoch_enable", [False, True])
def test_scenario_1_acked_write_lost_after_two_restarts(leader_epoch_enable: bool) -> None:
    c = _cluster(leader_epoch_enable)
    _replicate_m0_m1(c)
    c.clean_restart(B)  # B restarts (m1 is on its disk) and follows A again
    assert c.nodes[B].core.log_end_offset == (2 if leader_epoch_enable else 1)
    c.nodes[A].log.flush()
    c.crash(A)  # A dies before B fetches again
    c.elect(B, isr=(B,))  # B was in the ISR: a clean election, epoch 1
    assert c.nodes[B].core.is_leader and c.nodes[B].core.leader_epoch == 1
    c.restart(A, high_watermark=2)  # A comes back as a follower of B
    c.fetch_until_idle(A)
    if not leader_epoch_enable:
        # KAFKA-1211: m1 was acknowledged with acks=all and is now gone from every replica.
        assert c.nodes[A].values() == c.nodes[B].values() == ["m0"]
        return
    # KIP-101: B never truncated to its HW, so the acknowledged m1 survives on both.
    assert c.nodes[A].values() == c.nodes[B].values() == ["m0", "m1"]
    assert c.partition.isr == (A, B)
    m2 = c.produce("m2")  # the first batch of epoch 1 lets the HW past epoch 0's tail
    c.fetch_until_idle(A)
    assert c.responses[m2].error is Errors.NONE
    consumed = c.consume(0)
    assert consumed is not None and consumed.high_watermark == 3
    assert c.nodes[A].entries() == c.nodes[B].entries()
    assert [e[1] for e in c.nodes[B].entries()] == [0, 0, 1]


@pytest.mark.parametrize("leader_epoch_enable", [False, True])
def test_scenario_2_replicas_diverge_after_double_crash(leader_epoch_enable: bool) -> None:
    c = _cluster(leader_epoch_enable)
    _replicate_m0_m1(c, flush_b_after_m0=True)
    c.nodes[A].log.flush()  # m1 is on disk on A, not yet on B
    c.crash(A)
    c.crash(B)  # a power failure takes both
    c.restart(B, high_watermark=1)
    assert c.nodes[B].values() == ["m0"]
    c.elect(B, isr=(B,))  # B comes back first and is elected in epoch 1
    m2 = c.produce("m2", acks=1)
    assert c.responses[m2].base_offset == 1
    c.restart(A, high_watermark=2)  # A's HW (2) >= B's LEO (2): the old rule truncates nothing
    c.fetch_until_idle(A)
    a, b = c.nodes[A], c.nodes[B]
    if not leader_epoch_enable:
        # Silent divergence: offset 1 is m1 on A and m2 on B, and both count it as committed.
        assert a.values() == ["m0", "m1"] and b.values() == ["m0", "m2"]
        assert a.core.high_watermark == b.core.high_watermark == 2
        assert a.entries()[1] != b.entries()[1]
        return
    # KIP-101: A learns epoch 0 ends at offset 1 on the leader, truncates to 1 and refetches.
    assert a.values() == b.values() == ["m0", "m2"]
    assert a.entries() == b.entries()
    assert a.core.high_watermark == b.core.high_watermark == 2

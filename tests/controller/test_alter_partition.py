"""AlterPartition (KIP-497/704/841/903): validation in Kafka's order, and the epochs it bumps."""

from __future__ import annotations

from quorum.controller import AlterPartitionRequest, BrokerState
from quorum.controller.alter_partition import alter_partition_outcome
from quorum.metadata import Errors, LeaderRecoveryState, Partition, PartitionChange, encode_record
from tests.controller.driver import Driver


def cluster() -> Driver:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3)  # replicas (101, 102, 103), leader 101
    return d


def test_shrink_bumps_partition_epoch_only() -> None:
    d = cluster()
    r = d.alter("t", 0, (101, 102))
    assert r.error is Errors.NONE
    assert (r.leader, r.isr, r.leader_epoch, r.partition_epoch) == (101, (101, 102), 0, 1)
    p = d.part("t")
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((101, 102), 0, 1)
    assert d.written[-1] == PartitionChange(
        p.topic_id, 0, isr=(101, 102), expected_partition_epoch=0
    )


def test_expand_back() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    r = d.alter("t", 0, (101, 102, 103))
    assert (r.error, r.isr, r.partition_epoch, r.leader_epoch) == (
        Errors.NONE,
        (101, 102, 103),
        2,
        0,
    )


def test_no_change_writes_nothing() -> None:
    d = cluster()
    before = len(d.written)
    r = d.alter("t", 0, (101, 102, 103))
    assert r.error is Errors.NONE and len(d.written) == before and r.partition_epoch == 0


def test_stale_sender_broker_epoch() -> None:
    d = cluster()
    p = d.part("t")
    r = d.send(AlterPartitionRequest(101, 12345, p.topic_id, 0, 0, (BrokerState(101),), 0))
    assert r is not None and r.error is Errors.STALE_BROKER_EPOCH


def test_unknown_topic_or_partition() -> None:
    d = cluster()
    r = d.send(AlterPartitionRequest(101, d.epoch(101), "nope", 0, 0, (BrokerState(101),), 0))
    assert r is not None and r.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    p = d.part("t")
    r = d.send(AlterPartitionRequest(101, d.epoch(101), p.topic_id, 9, 0, (BrokerState(101),), 0))
    assert r is not None and r.error is Errors.UNKNOWN_TOPIC_OR_PARTITION and r.error.retriable


def test_newer_epochs_than_the_controller_mean_not_controller() -> None:
    d = cluster()
    assert d.alter("t", 0, (101,), leader_epoch=1).error is Errors.NOT_CONTROLLER
    assert d.alter("t", 0, (101,), partition_epoch=1).error is Errors.NOT_CONTROLLER


def test_fenced_leader_epoch_for_a_deposed_leader() -> None:
    d = cluster()
    d.heartbeat(101, want_fence=True)  # 102 leads in epoch 1
    d.heartbeat(101)  # unfenced again, but no longer leader
    r = d.alter("t", 0, (101, 102), sender=101, leader_epoch=0)
    assert r.error is Errors.FENCED_LEADER_EPOCH and r.error.retriable
    assert d.part("t").leader == 102


def test_sender_not_leader_is_invalid_request() -> None:
    d = cluster()
    assert d.alter("t", 0, (102,), sender=102).error is Errors.INVALID_REQUEST


def test_stale_partition_epoch_is_invalid_update_version() -> None:
    d = cluster()
    d.alter("t", 0, (101, 102))  # partition epoch 1
    r = d.alter("t", 0, (101,), partition_epoch=0)
    assert r.error is Errors.INVALID_UPDATE_VERSION
    assert d.part("t").isr == (101, 102)


def test_malformed_isr_is_invalid_request() -> None:
    d = cluster()
    assert d.alter("t", 0, (102, 103)).error is Errors.INVALID_REQUEST  # leader not in the ISR
    assert d.alter("t", 0, (101, 104)).error is Errors.INVALID_REQUEST  # not a replica
    assert d.alter("t", 0, (101, 101)).error is Errors.INVALID_REQUEST  # duplicate
    assert d.alter("t", 0, ()).error is Errors.INVALID_REQUEST  # empty: the ISR never is
    assert d.part("t").isr == (101, 102, 103)


def test_recovering_rules_of_kip_704() -> None:
    d = cluster()
    # RECOVERED -> RECOVERING is not allowed.
    r = d.alter("t", 0, (101,), recovery=LeaderRecoveryState.RECOVERING)
    assert r.error is Errors.INVALID_REQUEST
    assert d.alter("t", 0, (101,), recovery=7).error is Errors.INVALID_REQUEST


def test_ineligible_replicas_kip_841() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    d.heartbeat(102, want_fence=True)
    assert d.alter("t", 0, (101, 102)).error is Errors.INELIGIBLE_REPLICA  # fenced
    d.heartbeat(103, want_shut_down=True)
    assert d.alter("t", 0, (101, 103)).error is Errors.INELIGIBLE_REPLICA  # shutting down
    assert d.part("t").isr == (101,)


def test_unregistered_member_is_ineligible() -> None:
    d = cluster()
    d.alter("t", 0, (101,))
    # A partition naming a replica (104) that no broker registered, as a committed record.
    part = d.part("t")
    d.image.apply(
        d.image.applied_offset + 1,
        1,
        encode_record(Partition(part.topic_id, 1, (101, 104), (101,), 101)),
    )
    request = AlterPartitionRequest(
        101, d.epoch(101), part.topic_id, 1, 0, (BrokerState(101), BrokerState(104)), 0
    )
    r = d.send(request)
    assert r is not None and r.error is Errors.INELIGIBLE_REPLICA


def test_stale_member_broker_epoch_kip_903() -> None:
    """KIP-903's example: B catches up, the leader asks to add B, B restarts with an empty disk
    and re-registers, then the stale request arrives: INELIGIBLE_REPLICA, B stays out."""
    d = cluster()
    d.alter("t", 0, (101,))
    old_epoch = d.epoch(102)
    d.heartbeat(102, want_fence=True)
    d.now_ms = 20_000
    d.heartbeat(101)
    d.heartbeat(103)
    d.tick()
    assert d.register(102, new_incarnation=True).error is Errors.NONE
    d.heartbeat(102)  # unfenced with a new epoch
    r = d.alter("t", 0, (101, 102), member_epochs={102: old_epoch})
    assert r.error is Errors.INELIGIBLE_REPLICA
    assert d.part("t").isr == (101,)
    assert d.alter("t", 0, (101, 102)).error is Errors.NONE  # with the current epoch: fine


def test_new_leader_elected_outcome() -> None:
    # Kafka answers NEW_LEADER_ELECTED when the change it built names another leader (after a
    # reassignment, which kraftlab does not do): the rule itself.
    change = PartitionChange("tid", 0, leader=102, isr=(102,))
    assert alter_partition_outcome(change, sender=101) is Errors.NEW_LEADER_ELECTED
    assert alter_partition_outcome(PartitionChange("tid", 0, isr=(101,)), 101) is Errors.NONE
    assert alter_partition_outcome(None, 101) is Errors.NONE

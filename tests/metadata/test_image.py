"""MetadataImage: kv semantics decided at apply time, broker/topic/partition records, snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.metadata import (
    BrokerRegistrationChange,
    Config,
    DecodeError,
    Endpoint,
    Errors,
    FenceBroker,
    ImageError,
    KvCas,
    KvDelete,
    KvPut,
    LeaderChange,
    LeaderRecoveryState,
    MetadataImage,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    Record,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    encode_record,
)
from quorum.raft.log import Entry

EP = (Endpoint("rpc", "127.0.0.1", 9101),)


def applied(*records: Record, start: int = 0, epoch: int = 1) -> MetadataImage:
    image = MetadataImage()
    for i, r in enumerate(records):
        image.apply(start + i, epoch, encode_record(r))
    return image


# --- key/value ---------------------------------------------------------------------------------


def test_put_version_is_the_offset_that_wrote_it() -> None:
    image = MetadataImage()
    result = image.apply(7, 2, encode_record(KvPut("x", "1")))
    assert (result.error, result.version) == (Errors.NONE, 7)
    assert image.get("x") == ("1", 7)
    assert image.applied_offset == 7 and image.applied_epoch == 2
    image.apply(9, 2, encode_record(KvPut("x", "2")))
    assert image.get("x") == ("2", 9)


def test_get_of_a_missing_key_is_none() -> None:
    assert MetadataImage().get("nope") is None


def test_cas_succeeds_only_on_the_expected_value() -> None:
    image = applied(KvPut("x", "1"))
    failed = image.apply(1, 1, encode_record(KvCas("x", "0", "2")))
    assert failed.error is Errors.CAS_FAILED and failed.version == 0
    assert image.get("x") == ("1", 0)
    ok = image.apply(2, 1, encode_record(KvCas("x", "1", "2")))
    assert (ok.error, ok.version) == (Errors.NONE, 2)
    assert image.get("x") == ("2", 2)


def test_cas_with_expected_none_creates_only_an_absent_key() -> None:
    image = MetadataImage()
    assert image.apply(0, 1, encode_record(KvCas("x", None, "a"))).error is Errors.NONE
    assert image.apply(1, 1, encode_record(KvCas("x", None, "b"))).error is Errors.CAS_FAILED
    assert image.get("x") == ("a", 0)


def test_cas_on_a_missing_key_fails() -> None:
    image = MetadataImage()
    result = image.apply(0, 1, encode_record(KvCas("x", "a", "b")))
    assert (result.error, result.version) == (Errors.CAS_FAILED, None)
    assert image.get("x") is None


def test_delete_of_missing_key_is_key_not_found_and_delete_removes() -> None:
    image = applied(KvPut("x", "1"))
    assert image.apply(1, 1, encode_record(KvDelete("y"))).error is Errors.KEY_NOT_FOUND
    assert image.apply(2, 1, encode_record(KvDelete("x"))).error is Errors.NONE
    assert image.get("x") is None
    assert image.applied_offset == 2


def test_bytes_and_str_values_are_distinct() -> None:
    image = applied(KvPut("x", b"1"))
    assert image.apply(1, 1, encode_record(KvCas("x", "1", "2"))).error is Errors.CAS_FAILED
    assert image.get("x") == (b"1", 0)


def test_offsets_must_increase() -> None:
    image = applied(KvPut("x", "1"), start=5)
    with pytest.raises(ImageError):
        image.apply(5, 1, encode_record(KvPut("x", "2")))
    with pytest.raises(ImageError):
        image.apply(6, 0, encode_record(KvPut("x", "2")))  # epoch went backwards
    assert image.get("x") == ("1", 5)


def test_garbage_raises_decode_error_and_changes_nothing() -> None:
    image = applied(KvPut("x", "1"))
    before = image.snapshot()
    with pytest.raises(DecodeError):
        image.apply(1, 1, b"\x00garbage")
    assert image.snapshot() == before and image.applied_offset == 0
    image.apply(1, 1, encode_record(NoOp()))  # the offset was not consumed
    assert image.applied_offset == 1


def test_apply_entry_skips_control_entries_but_consumes_their_offset() -> None:
    image = MetadataImage()
    assert image.apply_entry(Entry(0, 3, b"raft-owned bytes", control=True)) is None
    result = image.apply_entry(Entry(1, 3, encode_record(KvPut("k", "v"))))
    assert result is not None and result.version == 1
    assert image.applied_offset == 1 and image.applied_epoch == 3


def test_a_raft_leader_change_control_entry_names_the_controller() -> None:
    from quorum import codec
    from quorum.raft.messages import LeaderChangeRecord

    image = MetadataImage()
    data = codec.encode(LeaderChangeRecord(leader_id=2, leader_epoch=7, voters=(1, 2, 3)))
    assert image.apply_entry(Entry(0, 7, data, control=True)) is None
    assert (image.controller_id, image.controller_epoch, image.applied_offset) == (2, 7, 0)


def test_same_log_gives_same_outcomes_on_every_replica() -> None:
    log = [KvPut("a", "1"), KvCas("a", "1", "2"), KvCas("a", "1", "3"), KvDelete("a")]
    outcomes = []
    for _ in range(2):
        image = MetadataImage()
        outcomes.append([image.apply(i, 1, encode_record(r)).error for i, r in enumerate(log)])
    assert (
        outcomes[0]
        == outcomes[1]
        == [
            Errors.NONE,
            Errors.NONE,
            Errors.CAS_FAILED,
            Errors.NONE,
        ]
    )


# --- brokers -----------------------------------------------------------------------------------


def test_broker_epoch_is_the_registration_offset_and_new_registration_replaces() -> None:
    image = MetadataImage()
    image.apply(4, 1, encode_record(RegisterBroker(101, "inc-a", EP, "r1")))
    b = image.broker(101)
    assert b is not None and (b.broker_epoch, b.fenced, b.rack) == (4, True, "r1")
    image.apply(5, 1, encode_record(UnfenceBroker(101, 4)))
    assert not image.broker(101).fenced  # type: ignore[union-attr]
    image.apply(9, 1, encode_record(RegisterBroker(101, "inc-b", EP)))
    b = image.broker(101)
    assert b is not None and (b.broker_epoch, b.incarnation_id, b.fenced) == (9, "inc-b", True)


def test_broker_change_with_stale_epoch_is_ignored() -> None:
    image = applied(RegisterBroker(101, "a", EP), UnfenceBroker(101, 0))
    result = image.apply(2, 1, encode_record(FenceBroker(101, 99)))
    assert result.error is Errors.STALE_BROKER_EPOCH
    assert image.is_broker_usable(101)
    assert image.apply(3, 1, encode_record(FenceBroker(7, 0))).error is (
        Errors.BROKER_ID_NOT_REGISTERED
    )


def test_controlled_shutdown_makes_a_broker_unusable() -> None:
    image = applied(
        RegisterBroker(101, "a", EP),
        UnfenceBroker(101, 0),
        BrokerRegistrationChange(101, 0, in_controlled_shutdown=True),
    )
    b = image.broker(101)
    assert b is not None and not b.fenced and b.in_controlled_shutdown
    assert not image.is_broker_usable(101)


# --- topics and partitions ---------------------------------------------------------------------


def topic_image() -> MetadataImage:
    return applied(
        Topic("t", "tid", (("min.insync.replicas", "2"),)),
        Partition("tid", 0, (1, 2, 3), (1, 2, 3), 1),
        Partition("tid", 1, (2, 3, 1), (2, 3, 1), 2),
    )


def test_topic_partitions_and_effective_configs() -> None:
    image = topic_image()
    assert image.topic("t") == Topic("t", "tid", (("min.insync.replicas", "2"),))
    assert [p.partition for p in image.partitions("tid")] == [0, 1]
    configs = image.topic_configs("t")
    assert configs["min.insync.replicas"] == "2"
    assert configs["unclean.leader.election.enable"] == "false"
    assert [p.partition for _, p in image.partitions_led_by(2)] == [1]


def test_partition_change_bumps_partition_epoch_always_and_leader_epoch_on_leader_change() -> None:
    image = topic_image()
    image.apply(3, 1, encode_record(PartitionChange("tid", 0, isr=(1, 2))))
    p = image.partition("tid", 0)
    assert p is not None and (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == (
        (1, 2),
        1,
        0,
        1,
    )
    image.apply(
        4,
        1,
        encode_record(
            PartitionChange(
                "tid", 0, leader=2, isr=(2,), leader_recovery_state=LeaderRecoveryState.RECOVERING
            )
        ),
    )
    p = image.partition("tid", 0)
    assert p is not None and (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (2,), 1, 2)
    assert p.leader_recovery_state == LeaderRecoveryState.RECOVERING


def test_conditional_partition_change_applies_only_to_the_state_it_was_built_on() -> None:
    image = topic_image()
    stale = PartitionChange("tid", 0, isr=(1, 2), expected_partition_epoch=0)
    assert image.apply(3, 1, encode_record(stale)).error is Errors.NONE
    again = image.apply(4, 1, encode_record(stale))  # now partition_epoch is 1
    assert again.error is Errors.INVALID_UPDATE_VERSION
    p = image.partition("tid", 0)
    assert p is not None and (p.isr, p.partition_epoch) == ((1, 2), 1)


def test_an_explicit_leader_epoch_replaces_the_bump_and_never_goes_back() -> None:
    image = topic_image()
    raft = PartitionChange("tid", 0, leader=2, leader_epoch=7)  # a Raft group's epoch
    assert image.apply(3, 1, encode_record(raft)).error is Errors.NONE
    p = image.partition("tid", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch) == (2, 7, 1)
    dropped = PartitionChange("tid", 0, leader=-1, leader_epoch=7)  # leader gone, same epoch
    assert image.apply(4, 1, encode_record(dropped)).error is Errors.NONE
    p = image.partition("tid", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch) == (-1, 7, 2)
    older = PartitionChange("tid", 0, leader=1, leader_epoch=6)
    assert image.apply(5, 1, encode_record(older)).error is Errors.FENCED_LEADER_EPOCH
    p = image.partition("tid", 0)
    assert p is not None and (p.leader, p.leader_epoch, p.partition_epoch) == (-1, 7, 2)


def test_records_for_unknown_topics_are_ignored_with_an_error() -> None:
    image = topic_image()
    before = image.snapshot()
    assert image.apply(3, 1, encode_record(PartitionChange("nope", 0, leader=1))).error is (
        Errors.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert image.apply(4, 1, encode_record(Partition("nope", 0, (1,), (1,), 1))).error is (
        Errors.UNKNOWN_TOPIC_ID
    )
    assert (
        image.apply(5, 1, encode_record(Topic("t", "other"))).error is Errors.TOPIC_ALREADY_EXISTS
    )
    assert image.apply(6, 1, encode_record(RemoveTopic("nope"))).error is Errors.UNKNOWN_TOPIC_ID
    restored = MetadataImage.restore(before)
    assert image.topics() == restored.topics()
    assert image.partitions("tid") == restored.partitions("tid")


def test_remove_topic_and_config_records() -> None:
    image = topic_image()
    image.apply(3, 1, encode_record(Config("topic", "t", "retention.ms", "1000")))
    assert image.topic_configs("t")["retention.ms"] == "1000"
    image.apply(4, 1, encode_record(Config("topic", "t", "retention.ms", None)))
    assert "retention.ms" not in image.topic_config_overrides("t")
    image.apply(5, 1, encode_record(RemoveTopic("tid")))
    assert image.topic("t") is None and image.partitions("tid") == []
    image.apply(6, 1, encode_record(Topic("t", "tid2")))  # the name can be reused
    assert image.topic_config_overrides("t") == {}


def test_producer_id_blocks_only_move_forward_and_leader_change_is_recorded() -> None:
    image = applied(ProducerIds(101, 0, 1000), LeaderChange(2, 5, (1, 2, 3)))
    assert image.next_producer_id == 1000
    assert (image.controller_id, image.controller_epoch) == (2, 5)
    assert image.apply(2, 5, encode_record(ProducerIds(101, 0, 1000))).error is (
        Errors.INVALID_REQUEST
    )


# --- snapshots ---------------------------------------------------------------------------------

keys = st.sampled_from(["a", "b", "c"])
vals = st.sampled_from(["1", "2", b"3"])
bids = st.sampled_from([101, 102, 103])
topic_ids = st.sampled_from(["t0", "t1"])
replica_sets = st.permutations([101, 102, 103]).map(tuple)

any_record = st.one_of(
    st.builds(KvPut, keys, vals),
    st.builds(KvDelete, keys),
    st.builds(KvCas, keys, st.none() | vals, vals),
    st.builds(RegisterBroker, bids, st.sampled_from(["i1", "i2"]), st.just(EP), st.none() | keys),
    st.builds(FenceBroker, bids, st.integers(0, 20)),
    st.builds(UnfenceBroker, bids, st.integers(0, 20)),
    st.builds(BrokerRegistrationChange, bids, st.integers(0, 20), st.none() | st.booleans()),
    st.builds(Topic, st.sampled_from(["x", "y"]), topic_ids),
    st.builds(Partition, topic_ids, st.integers(0, 2), replica_sets, replica_sets, bids),
    st.builds(PartitionChange, topic_ids, st.integers(0, 2), st.none() | bids),
    st.builds(RemoveTopic, topic_ids),
    st.builds(Config, st.just("topic"), st.sampled_from(["x", "y"]), keys, st.none() | keys),
    st.builds(ProducerIds, bids, st.integers(0, 5), st.integers(0, 5000)),
    st.just(NoOp()),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(any_record, max_size=30), st.lists(any_record, max_size=10))
def test_snapshot_restore_round_trips_and_continues_identically(
    prefix: list[Record], suffix: list[Record]
) -> None:
    image = applied(*prefix)
    data = image.snapshot()
    restored = MetadataImage.restore(data)
    assert restored == image
    assert restored.snapshot() == data
    assert restored.applied_offset == image.applied_offset
    for i, r in enumerate(suffix, start=len(prefix)):
        a = image.apply(i, 1, encode_record(r))
        b = restored.apply(i, 1, encode_record(r))
        assert (a.error, a.version) == (b.error, b.version)
    assert restored == image
    copy = image.copy()
    assert copy == image
    copy.apply(len(prefix) + len(suffix), 1, encode_record(KvPut("a", "changed")))
    assert image.get("a") != ("changed", len(prefix) + len(suffix))


@pytest.mark.parametrize("data", [b"", b"\x01\x02", encode_record(KvPut("a", "b"))])
def test_restore_of_garbage_raises_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        MetadataImage.restore(data)

"""Loading: a new leader of an offsets partition rebuilds its groups and offsets from the
records alone, and carries on where the old coordinator's committed state was."""

from __future__ import annotations

import struct

from coordinator import (
    CoordinatorRecord,
    GroupCoordinatorConfig,
    GroupState,
    JoinGroupProtocol,
    MemberIdentity,
)
from coordinator.group import ClassicGroup
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    group_metadata_record,
    offset_commit_record,
)
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState


def picture(group: ClassicGroup | None) -> object:
    """What a group's committed state is: everything a record carries."""
    if group is None:
        return None
    return (group.state, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id, sorted((m.member_id, m.group_instance_id, m.client_id,
                                     m.session_timeout_ms, m.rebalance_timeout_ms, m.assignment,
                                     m.protocols) for m in group.members.values()))  # fmt: skip


def test_a_new_leader_loads_what_the_old_one_committed() -> None:
    b = Broker()
    ids, generation = stable_group(b, "stable", 3)
    stable_group(b, "static", 2, instances=("alpha", "beta"))
    b.commit("stable", {("t", 0): 10, ("t", 1): 20}, generation=generation, member_id=ids[1])
    b.commit("stable", {("t", 0): 11}, generation=generation, member_id=ids[2])
    b.commit("manual", {("u", 3): 7})
    empty_ids, _ = stable_group(b, "emptied", 1)
    b.commit("emptied", {("t", 0): 1}, generation=1, member_id=empty_ids[0])
    b.leave("emptied", MemberIdentity(empty_ids[0]))

    r = b.reloaded()
    for group_id in ("stable", "static", "manual", "emptied"):
        assert picture(r.group(group_id)) == picture(b.group(group_id)), group_id
        assert r.fetch(group_id) == b.fetch(group_id), group_id
    assert r.fetch("stable") == {("t", 0): 11, ("t", 1): 20}
    assert r.state("emptied") is S.EMPTY and r.group("emptied").generation_id == 2  # type: ignore[union-attr]
    assert r.group("manual").protocol_type is None  # type: ignore[union-attr]


def test_loaded_members_carry_on_at_their_generation() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    r = b.reloaded()
    assert r.heartbeat("g", ids[1], generation) is Errors.NONE
    _, response = r.sync("g", ids[1], generation)
    assert (response.error, response.assignment) == (Errors.NONE, f"a-{ids[1]}".encode())
    _, response = r.commit("g", {("t", 0): 5}, generation=generation, member_id=ids[0])
    assert response.topics[0].partitions[0].error is Errors.NONE
    # A follower rejoining unchanged gets the generation back: loaded members kept only the
    # chosen protocol, and that is what it sends.
    _, rejoin = r.join("g", ids[1])
    assert (rejoin.error, rejoin.generation_id) == (Errors.NONE, generation)


def test_loaded_members_that_never_come_back_expire_a_session_after_the_load() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    r = b.reloaded(after_ms=60_000)  # the old coordinator died; a minute later a new one loads
    load_ms = r.now_ms
    r.advance(9_000)
    assert r.heartbeat("g", ids[0], generation) is Errors.NONE
    r.advance_to(load_ms + 9_999)
    assert r.state("g") is S.STABLE
    r.advance_to(load_ms + 10_000)  # ids[1]: a full session from the load, then out
    assert list(r.group("g").members) == [ids[0]]  # type: ignore[union-attr]
    assert r.state("g") is S.PREPARING_REBALANCE


def test_soft_state_is_lost_and_the_last_record_wins() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    b.leave("g", MemberIdentity(ids[1]))  # PreparingRebalance, not written yet
    r = b.reloaded()
    # The log's last word is generation 1 with both members: that is the loaded group.
    assert r.state("g") is S.STABLE and set(r.group("g").members) == set(ids)  # type: ignore[union-attr]
    assert r.group("g").generation_id == generation  # type: ignore[union-attr]


def test_pending_appends_at_the_failover_are_lost_or_kept_as_the_log_says() -> None:
    b = Broker(auto_commit=False)
    b.commit("g", {("t", 0): 1})
    b.complete()
    b.commit("g", {("t", 0): 2})  # never committed: lost with the old leader
    assert b.reloaded().fetch("g") == {("t", 0): 1}
    # Had the record reached the new leader's log, it would be there.
    b.logs[b.coord.partition_for("g")] += b.pending[0].records
    assert b.reloaded().fetch("g") == {("t", 0): 2}


def test_records_of_unknown_types_are_skipped() -> None:
    consumer_group_key = struct.pack(">hh", 3, 1) + b"g"  # ConsumerGroupMetadataKey (KIP-848)
    unknown = CoordinatorRecord(consumer_group_key, b"\x00\x00anything")
    value = OffsetCommitValue(9, "", 0)
    records = [unknown, offset_commit_record(OffsetCommitKey("g", "t", 0), value)]
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=1)
    r = Broker(config, logs={0: records})
    assert r.fetch("g") == {("t", 0): 9}


def test_a_log_written_by_kafka_loads() -> None:
    """Records in the oldest layouts Kafka wrote (OffsetCommitKey v0, OffsetCommitValue v1,
    GroupMetadataValue v0), then a group metadata record in the layout written here."""

    def s16(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    old_key = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 0)
    old_value = struct.pack(">hq", 1, 33) + s16("meta") + struct.pack(">qq", 100, 200)
    old_group = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 4) + s16("range")
                 + s16("m-1") + struct.pack(">i", 1) + s16("m-1") + s16("cid") + s16("/h")
                 + struct.pack(">i", 10_000) + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1)
                 + b"a")  # fmt: skip
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=1)
    group_key = group_metadata_record(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 0, None, None, 0, ())
    ).key
    r = Broker(
        config,
        logs={0: [CoordinatorRecord(old_key, old_value), CoordinatorRecord(group_key, old_group)]},
    )
    assert r.fetch("g") == {("t", 0): 33}
    group = r.group("g")
    assert group is not None and (group.state, group.generation_id, group.leader_id) == (
        S.STABLE,
        4,
        "m-1",
    )
    member = group.members["m-1"]
    # v0 has no rebalance timeout: the session timeout stands in (GroupMetadataManager.replay).
    assert (member.rebalance_timeout_ms, member.assignment, member.protocols) == (
        10_000,
        b"a",
        (JoinGroupProtocol("range", b"s"),),
    )


def test_a_compacted_log_loads_the_same_state() -> None:
    b = Broker()
    ids, generation = stable_group(b, "g", 2)
    for offset in range(5):
        b.commit("g", {("t", offset % 2): offset}, generation=generation, member_id=ids[0])
    b.commit("manual", {("t", 0): 1})
    b.leave("g", MemberIdentity(ids[0]), MemberIdentity(ids[1]))  # Empty, written
    compacted: dict[int, list[CoordinatorRecord]] = {}
    for partition, records in b.logs.items():
        last: dict[bytes, CoordinatorRecord] = {}
        for record in records:  # log compaction: the last record per key survives, in order
            last.pop(record.key, None)
            last[record.key] = record
        compacted[partition] = list(last.values())
    assert sum(map(len, compacted.values())) < sum(map(len, b.logs.values()))
    full = b.reloaded()
    again = Broker(b.config, logs=compacted, epoch=full.epoch, now_ms=full.now_ms)
    for group_id in ("g", "manual"):
        assert picture(again.group(group_id)) == picture(full.group(group_id))
        assert again.fetch(group_id) == full.fetch(group_id)
    assert full.fetch("g") == {("t", 0): 4, ("t", 1): 3}


def test_a_loaded_group_over_the_size_limit_rebalances() -> None:
    members = tuple(
        MemberMetadata(f"m{i}", None, "c", "/h", 30_000, 10_000, b"s", b"a") for i in range(3)
    )
    record = group_metadata_record(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 2, "range", "m0", 0, members)
    )
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=1, group_max_size=2)
    r = Broker(config, logs={0: [record]})
    assert r.state("g") is S.PREPARING_REBALANCE

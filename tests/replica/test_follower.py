"""Follower rules: what a fetch carries, HW = min(own LEO, leader HW), epoch fencing, truncation
by diverging epoch including the iterated case of back-to-back elections (KIP-279), never to its
own HW when leader epochs are on, stale responses, lost fetches, and the wire types' codec."""

from __future__ import annotations

import dataclasses

import pytest

from partition.log.batch import read_header
from partition.replica import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    MetadataUpdated,
    ProduceRequest,
    ProduceResponse,
    ReplicaConfig,
    ReplicaPosition,
    SendFetch,
    TruncateTo,
)
from quorum import codec
from quorum.metadata.errors import Errors
from tests.replica.router import TOPIC_ID, Cluster, batch


def test_fetch_carries_offset_epochs_and_broker_epoch() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    req = c.nodes[2].outbox[0]
    assert (req.fetch_offset, req.last_fetched_epoch, req.current_leader_epoch, req.replica_id,
            req.broker_epoch) == (1, 0, 0, 2, 102)  # fmt: skip
    assert req.max_wait_ms == 0 and req.max_bytes == 1 << 20


def test_follower_hw_is_min_of_own_leo_and_leader_hw() -> None:
    c = Cluster(replicas=(1, 2))
    follower = c.nodes[2].core
    c.produce("a", acks=1)
    req = c.nodes[2].outbox.pop()
    resp = FetchResponse(TOPIC_ID, 0, Errors.NONE, 0, req.request_id, high_watermark=7, log_start_offset=0,
                         log_end_offset=7, records=c.nodes[1].log.read(0, 1 << 20), leader_epoch=0)  # fmt: skip
    c.step(2, resp)
    assert (follower.log_end_offset, follower.high_watermark) == (1, 1)
    assert c.nodes[2].log.high_watermark == 1


def test_fenced_and_unknown_leader_epoch_back_off() -> None:
    c = Cluster(replicas=(1, 2))
    c.elect(1, publish=False)
    c.publish((1,))  # the leader is in epoch 1, the follower still thinks 0
    assert c.fetch(2).error is Errors.FENCED_LEADER_EPOCH  # type: ignore[union-attr]
    assert not c.nodes[2].outbox
    assert c.nodes[2].core.next_deadline_ms() == c.now_ms + 1_000  # replica.fetch.backoff.ms
    c.publish((2,))
    assert c.nodes[2].outbox[0].current_leader_epoch == 1
    c.elect(1, publish=False)
    c.publish((2,))  # now the follower is ahead: epoch 2 vs the leader's 1
    assert c.fetch(2).error is Errors.UNKNOWN_LEADER_EPOCH  # type: ignore[union-attr]


def _fill(c: Cluster, node: int, epochs: list[int]) -> None:
    """One single-record batch per offset, with the given leader epochs, written directly."""
    for i, epoch in enumerate(epochs):
        c.nodes[node].log.append_as_leader(batch(f"{i}-e{epoch}"), epoch)


def _elect_with_logs(leader_epochs: list[int], follower_epochs: list[int], epoch: int) -> Cluster:
    c = Cluster(replicas=(1, 2))
    _fill(c, 1, leader_epochs)
    _fill(c, 2, follower_epochs)
    c.partition = dataclasses.replace(c.partition, leader_epoch=epoch - 1)
    c.elect(1, isr=(1,))
    return c


def test_diverging_epoch_truncates_to_min_of_both_end_offsets() -> None:
    c = _elect_with_logs([0, 0, 0, 3, 3], [0, 0, 1, 1, 2, 2], epoch=4)
    c.fetch(
        2
    )  # @6, last epoch 2 -> leader: epoch 0 ends at 3 -> truncate to min(3, own end of 0 = 2)
    truncations = [e.offset for e in c.effects[2] if isinstance(e, TruncateTo)]
    assert truncations == [2]
    c.fetch_until_idle(2)
    assert c.nodes[2].entries() == c.nodes[1].entries()


def test_back_to_back_elections_truncate_iteratively() -> None:
    # The follower holds epochs 1 and 3 that the leader never saw (KIP-279).
    c = _elect_with_logs([0, 0, 2, 2, 2], [0, 1, 1, 3, 3], epoch=4)
    c.fetch(2)  # @5 last 3 -> (2, 5): we lack epoch 2 -> our end of epoch 1 (3), and ask again
    c.fetch(2)  # @3 last 1 -> (0, 2): truncate to min(2, our end of epoch 0 = 1)
    assert [e.offset for e in c.effects[2] if isinstance(e, TruncateTo)] == [3, 1]
    c.fetch_until_idle(2)
    assert c.nodes[2].entries() == c.nodes[1].entries()
    assert [e[1] for e in c.nodes[2].entries()] == [0, 0, 2, 2, 2]


def test_no_common_epoch_truncates_to_log_start() -> None:
    c = _elect_with_logs([1, 1], [0, 0, 0], epoch=2)
    c.fetch(2)
    assert [e.offset for e in c.effects[2] if isinstance(e, TruncateTo)] == [0]
    c.fetch_until_idle(2)
    assert c.nodes[2].entries() == c.nodes[1].entries()


def test_truncation_goes_to_a_batch_boundary() -> None:
    c = Cluster(replicas=(1, 2))
    c.nodes[1].log.append_as_leader(batch("a", "b", "c"), 0)
    c.nodes[2].log.append_as_leader(batch("a", "b", "c"), 0)
    c.nodes[2].log.append_as_leader(batch("x"), 1)
    c.nodes[1].log.append_as_leader(batch("d", "e"), 2)
    c.partition = dataclasses.replace(c.partition, leader_epoch=2)
    c.elect(1, isr=(1,))
    c.fetch_until_idle(2)
    assert c.nodes[2].values() == ["a", "b", "c", "d", "e"]


def test_becoming_follower_never_truncates_to_own_hw() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.produce("b", acks=1)
    c.fetch(2)  # holds both, HW 0
    c.elect(1)
    assert not any(isinstance(e, TruncateTo) for e in c.effects[2])
    assert c.nodes[2].core.log_end_offset == 2


def test_legacy_mode_truncates_to_own_hw_on_becoming_follower() -> None:
    c = Cluster(
        replicas=(1, 2),
        config=ReplicaConfig(replica_fetch_wait_max_ms=0, leader_epoch_enable=False),
    )
    c.produce("a", acks=1)
    c.produce("b", acks=1)
    c.fetch(2)
    assert c.nodes[2].outbox[0].last_fetched_epoch == -1  # no epoch in a legacy fetch
    c.elect(1)
    assert [e.offset for e in c.effects[2] if isinstance(e, TruncateTo)] == [0]


def test_stale_response_dropped_and_lost_fetch_resent() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    old = c.nodes[2].outbox[0]
    c.fetch(2)
    late = FetchResponse(TOPIC_ID, 0, Errors.NONE, old.fetch_offset, old.request_id, 0, 0, 1,
                         c.nodes[1].log.read(0, 100), None, 1, 0)  # fmt: skip
    assert c.step(2, late) == []  # a duplicate of an answered fetch: dropped, nothing appended
    assert c.nodes[2].log.log_end_offset == 1
    pending = c.nodes[2].outbox.pop()  # lost on the network
    assert c.nodes[2].core.next_deadline_ms() == c.now_ms + 30_000
    c.advance(29_999)
    assert not c.nodes[2].outbox
    c.advance(1)
    resent = c.nodes[2].outbox[0]
    assert (
        resent.fetch_offset == pending.fetch_offset and resent.request_id == pending.request_id + 1
    )


def test_follower_ahead_of_leader_truncates_to_leader_leo_on_out_of_range() -> None:
    c = Cluster(
        replicas=(1, 2),
        config=ReplicaConfig(replica_fetch_wait_max_ms=0, leader_epoch_enable=False),
    )
    _fill(c, 2, [0, 0, 0])
    _fill(c, 1, [0])
    c.nodes[2].log.update_high_watermark(
        3
    )  # legacy: no truncation below this HW on becoming follower
    c.elect(1, isr=(1,))
    resp = c.fetch(2)
    assert (
        resp is not None and resp.error is Errors.OFFSET_OUT_OF_RANGE and resp.log_end_offset == 1
    )
    assert c.nodes[2].core.log_end_offset == 1 and c.nodes[2].core.high_watermark == 1


def test_leader_log_start_beyond_follower_truncates_fully() -> None:
    c = Cluster(replicas=(1, 2))
    for v in "abc":
        c.produce(v, acks=1)
    c.nodes[1].log.roll()
    c.produce("d", acks=1)
    c.nodes[1].log.update_high_watermark(4)
    c.nodes[1].log.delete_prefix(3)
    c.elect(1, isr=(1,))
    c.fetch_until_idle(2)
    assert c.nodes[2].log.log_start_offset == 3 and c.nodes[2].values() == ["d"]


@pytest.mark.parametrize(
    "message",
    [
        FetchRequest(TOPIC_ID, 0, 2, 5, 1, 2, 102, 100, 500, 9),
        FetchResponse(TOPIC_ID, 0, Errors.NONE, 5, 9, 3, 0, 7, b"xy", EpochEndOffset(1, 4), 1, 2),
        FetchResponse(TOPIC_ID, 0, Errors.FENCED_LEADER_EPOCH, 5),
        ProduceRequest(TOPIC_ID, 0, 3, b"abc", -1, 100),
        ProduceResponse(3, Errors.NOT_ENOUGH_REPLICAS, message="x"),
        ReplicaPosition(2, 3, 10),
    ],
)
def test_wire_types_round_trip(message: object) -> None:
    assert codec.decode(codec.encode(message)) == message


def test_metadata_input_round_trips() -> None:
    c = Cluster(replicas=(1, 2))
    m = c.metadata()
    assert codec.decode(codec.encode(m), MetadataUpdated) == m
    assert isinstance(c.nodes[2].outbox[0], FetchRequest)
    assert read_header(batch("a")).record_count == 1
    assert any(isinstance(e, SendFetch) for e in c.effects[2])

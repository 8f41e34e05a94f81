"""Log start offsets across replicas and max.message.bytes: a follower's log start follows the
leader's (Kafka's fetcher: max of its own and the leader's, never above its own HW) so segments the
leader's retention deleted go on the followers too; consumers below the new log start get
OFFSET_OUT_OF_RANGE; a follower behind the leader's log start restarts its log there; a produced
batch over max.message.bytes is MESSAGE_TOO_LARGE and nothing is written."""

from __future__ import annotations

from partition.log.config import LogConfig
from partition.replica import IncrementLogStartOffset, ReplicaConfig
from partition.replica import follower as follower_rules
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster, batch

SMALL_SEGMENTS = LogConfig(segment_bytes=80, retention_bytes=0)  # one batch per segment


def _cluster_with_segments(batches: int) -> Cluster:
    c = Cluster(replicas=(1, 2, 3))
    for node in c.nodes.values():
        node.log.config = SMALL_SEGMENTS  # as the broker applies a topic config to an open log
    for i in range(batches):
        c.produce(f"v{i}", acks=1)
    for follower in (2, 3, 2):  # the second round carries the HW to follower 2
        c.fetch_until_idle(follower)
    return c


def test_followers_follow_the_leaders_log_start_and_delete_their_old_segments() -> None:
    c = _cluster_with_segments(6)
    leader, f2 = c.nodes[1].log, c.nodes[2].log
    assert leader.high_watermark == 6 and f2.high_watermark == 6
    assert len(f2.segments) == 6
    assert leader.apply_retention(now_ms=0) == 5  # retention.bytes=0: all but the active one
    assert leader.log_start_offset == 5
    c.produce("v6", acks=1)
    c.fetch(2)
    follower_effects = c.effects[2]
    assert IncrementLogStartOffset(5) in follower_effects
    assert f2.log_start_offset == 5 and [s.base_offset for s in f2.segments][0] == 5
    assert c.nodes[2].core.status().log_start_offset == 5
    c.fetch_until_idle(2)
    assert f2.log_end_offset == 7
    assert [r.value for r in f2.read_records(5, 1 << 20) + f2.read_records(6, 1 << 20)] == [b"v5", b"v6"]
    consumer = c.consume(3)
    assert consumer is not None and consumer.error is Errors.OFFSET_OUT_OF_RANGE
    assert consumer.log_start_offset == 5


def test_a_follower_never_moves_its_log_start_above_its_own_high_watermark() -> None:
    c = _cluster_with_segments(4)
    c.nodes[1].log.apply_retention(now_ms=0)
    assert c.nodes[1].log.log_start_offset == 3
    f3 = c.nodes[3]
    f3.log.update_high_watermark(1)  # as if it had not learnt the HW yet
    f3.core._local.hw = 1
    assert follower_rules.follow_log_start(f3.core._local, 3) == [IncrementLogStartOffset(1)]


def test_a_follower_behind_the_leaders_log_start_restarts_its_log_there() -> None:
    c = Cluster(replicas=(1, 2, 3), isr=(1, 2))
    for node in c.nodes.values():
        node.log.config = SMALL_SEGMENTS
    c.nodes[3].up = False
    for i in range(5):
        c.produce(f"v{i}", acks=1)
    c.fetch_until_idle(2)
    c.nodes[1].log.apply_retention(now_ms=0)
    assert c.nodes[1].log.log_start_offset == 4
    c.nodes[3].up = True
    c.fetch_until_idle(3)
    f3 = c.nodes[3].log
    assert (f3.log_start_offset, f3.log_end_offset) == (4, 5)
    assert c.nodes[3].values() == ["v4"]


def test_a_batch_over_max_message_bytes_is_message_too_large_and_not_written() -> None:
    big = batch("x" * 200)
    c = Cluster(replicas=(1, 2), config=ReplicaConfig(replica_fetch_wait_max_ms=0,
                                                       max_message_bytes=len(big) - 1))  # fmt: skip
    rid = c.produce("x" * 200, acks=1)
    assert c.responses[rid].error is Errors.MESSAGE_TOO_LARGE
    assert c.nodes[1].log.log_end_offset == 0
    c.produce("x" * 200, acks=0)
    assert c.nodes[1].log.log_end_offset == 0
    ok = c.produce("small", acks=1)
    assert c.responses[ok].error is Errors.NONE and c.nodes[1].log.log_end_offset == 1

"""Consumer reads at a follower (KIP-392, partition/replica/follower_reads.py): a Fetch that carries
client metadata (Kafka v11+) is served by a follower below its own high watermark, long polls
there until that HW moves, checks the leader epoch it names, and without the flag a follower
answers NOT_LEADER_OR_FOLLOWER as before. Apache Kafka answers the same (the differential
test's "fetch from a follower" step)."""

from __future__ import annotations

from partition.log.batch import decode_records, iter_headers
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster


def values(records: bytes) -> list[bytes]:
    return [r.value or b"" for h in iter_headers(records) for r in decode_records(records, h)]


def test_a_follower_serves_below_its_own_high_watermark_which_lags_the_leaders() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", "b", acks=1)
    c.fetch(2)  # the follower has both records
    c.fetch(2)  # its fetch at offset 2 moves the leader's HW to 2; the answer carries the old HW
    assert c.nodes[1].core.status().high_watermark == 2
    assert c.nodes[2].core.status().high_watermark == 0  # learnt on the next fetch
    early = c.consume(0, node=2, follower_read=True)
    assert early is not None and early.error is Errors.NONE and early.records == b""
    assert early.high_watermark == 0
    c.fetch(2)  # now the follower knows HW 2
    read = c.consume(0, node=2, follower_read=True)
    assert read is not None and read.error is Errors.NONE and read.high_watermark == 2
    assert values(read.records) == [b"a", b"b"]
    assert c.consume(3, node=2, follower_read=True).error is Errors.OFFSET_OUT_OF_RANGE  # type: ignore[union-attr]


def test_without_client_metadata_only_the_leader_answers() -> None:
    c = Cluster(replicas=(1, 2))
    c.produce("a", acks=1)
    c.fetch(2)
    c.fetch(2)
    plain = c.consume(0, node=2)
    assert plain is not None and plain.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_the_leader_epoch_a_consumer_names_is_checked_against_the_followers() -> None:
    c = Cluster(replicas=(1, 2))
    epoch = c.partition.leader_epoch
    assert c.consume(0, node=2, follower_read=True, epoch=epoch).error is Errors.NONE  # type: ignore[union-attr]
    ahead = c.consume(0, node=2, follower_read=True, epoch=epoch + 1)
    assert ahead is not None and ahead.error is Errors.UNKNOWN_LEADER_EPOCH
    c.elect(1)  # a new epoch of the same leader; the follower follows it
    behind = c.consume(0, node=2, follower_read=True, epoch=epoch)
    assert behind is not None and behind.error is Errors.FENCED_LEADER_EPOCH


def test_a_parked_follower_read_is_answered_when_the_followers_hw_passes_it() -> None:
    c = Cluster(replicas=(1, 2))
    assert c.consume(0, node=2, max_wait_ms=5_000, follower_read=True) is None  # parked
    c.produce("a", acks=1)
    c.fetch(2)  # the record arrives
    c.fetch(2)  # the leader's HW moves to 1; the follower's is still 0
    c.tick(2)
    assert c.consumer_responses == []
    c.fetch(2)  # HW 1 reaches the follower
    assert c.nodes[2].core.next_deadline_ms() == c.now_ms  # answer now
    c.tick(2)
    (answer,) = c.consumer_responses
    assert answer.error is Errors.NONE and values(answer.records) == [b"a"]
    assert answer.high_watermark == 1


def test_a_parked_follower_read_ends_empty_at_its_deadline_or_when_the_follower_moves_on() -> None:
    c = Cluster(replicas=(1, 2))
    assert c.consume(0, node=2, max_wait_ms=500, follower_read=True) is None
    c.advance(499)
    assert c.consumer_responses == []
    c.advance(1)
    (timed_out,) = c.consumer_responses
    assert timed_out.error is Errors.NONE and timed_out.records == b""
    assert c.consume(0, node=2, max_wait_ms=5_000, follower_read=True) is None
    c.elect(2, isr=(1, 2))  # the follower becomes the leader: its parked read is answered
    assert len(c.consumer_responses) == 2 and c.consumer_responses[-1].records == b""

"""The Kafka APIs on the wire, request by request, with the exact Kafka error codes: what a
client library does not show (version negotiation, leader hints, stale epochs, idempotence
answers, byte-exact batches, long polls). Raw requests are kafka-python message classes sent
over a plain socket (conftest.Wire). One RF-3 partition per test, on the shared cluster.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from harness.kafka.handlers import SUPPORTED
from partition.log import batch as rb
from tests.kafka.conftest import BROKERS, KafkaCluster, Wire

pytestmark = pytest.mark.integration

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


def batch(values: list[bytes], producer_id: int = -1, base_sequence: int = -1) -> bytes:
    return rb.encode_batch([rb.Record(v, None, timestamp_ms=1_700_000_000_000) for v in values],
                           producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=base_sequence)  # fmt: skip


def produce(w: Wire, topic: str, records: bytes, acks: int = -1, timeout_ms: int = 10_000,
            partition: int = 0, version: int = 9) -> Any:  # fmt: skip
    cls = ProduceRequest[version]
    t = cls.TopicProduceData(
        name=topic,
        partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=partition, records=records)
        ],
    )
    req = cls(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[t])
    if acks == 0:
        w.send(req)
        return None
    return w.call(req).responses[0].partition_responses[0]


def fetch(w: Wire, topic: str, offset: int, *, epoch: int = -1, max_wait_ms: int = 0,
          version: int = 12) -> Any:  # fmt: skip
    cls = FetchRequest[version]
    p = cls.FetchTopic.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                      last_fetched_epoch=-1, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)  # fmt: skip
    req = cls(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
              isolation_level=0, session_id=0, session_epoch=-1,
              topics=[cls.FetchTopic(topic=topic, partitions=[p])], forgotten_topics_data=[],
              rack_id="")  # fmt: skip
    return w.call(req).responses[0].partitions[0]


def list_offset(w: Wire, topic: str, timestamp: int, epoch: int = -1) -> Any:
    cls = ListOffsetsRequest[7]
    tcls = cls.ListOffsetsTopic
    req = cls(replica_id=-1, isolation_level=0, topics=[tcls(name=topic, partitions=[
        tcls.ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch,
                                  timestamp=timestamp)])])  # fmt: skip
    return w.call(req).topics[0].partitions[0]


def roles(c: KafkaCluster, topic: str) -> tuple[int, int, int]:
    """(leader, leader epoch, one follower)."""
    leader, epoch = c.leader(topic)
    return leader, epoch, next(b for b in BROKERS if b != leader)


def test_api_versions_advertise_exactly_what_is_implemented(kcluster: KafkaCluster) -> None:
    with Wire(kcluster.kafka_port(101)) as w:
        r = w.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    assert r.error_code == NONE
    assert {(k.api_key, k.min_version, k.max_version) for k in r.api_keys} == {
        (0, 3, 10), (1, 4, 12), (2, 1, 7), (3, 0, 12), (18, 0, 3), (22, 0, 4),
        (19, 2, 7), (20, 1, 5), (60, 0, 1), (32, 0, 4), (33, 0, 2), (44, 0, 1),
        # The classic group protocol (docs/groups.md): FindCoordinator, OffsetCommit,
        # OffsetFetch, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, DescribeGroups, ListGroups,
        # DeleteGroups.
        (10, 0, 6), (8, 2, 9), (9, 1, 9), (11, 0, 9), (12, 0, 4), (13, 0, 5), (14, 0, 5),
        (15, 0, 6), (16, 0, 5), (42, 0, 2),
        # OffsetForLeaderEpoch, ElectLeaders, DescribeLogDirs, DescribeQuorum, DescribeProducers.
        (23, 2, 4), (43, 0, 2), (35, 1, 4), (55, 0, 2), (61, 0, 0),
    }
    assert {k: (lo, hi) for k, (_, _, lo, hi) in SUPPORTED.items()} == {
        k.api_key: (k.min_version, k.max_version) for k in r.api_keys
    }


def test_unsupported_api_versions_version_gets_v0_error_answer(kcluster: KafkaCluster) -> None:
    # KIP-511: ApiVersions at a version the broker does not know is answered at v0 with
    # UNSUPPORTED_VERSION and the broker's ranges, so the client can retry lower.
    client_id = b"future-client"
    payload = struct.pack(">hhih", 18, 99, 42, len(client_id)) + client_id + b"\x00" * 8
    with Wire(kcluster.kafka_port(102)) as w:
        w.send_raw(struct.pack(">i", len(payload)) + payload)
        frame = w.recv_frame()
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame)
    assert (correlation_id, error_code, count) == (42, UNSUPPORTED_VERSION, len(SUPPORTED))
    keys = {struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)}
    assert (18, 0, 3) in keys


def test_unknown_api_key_and_unsupported_version_close_the_connection(
    kcluster: KafkaCluster,
) -> None:
    # ConsumerGroupHeartbeat (KIP-848, not implemented); versions too old or too new.
    for api_key, version in ((68, 0), (0, 2), (1, 13), (3, 13)):
        payload = struct.pack(">hhih", api_key, version, 7, 1) + b"x" + b"\x00" * 16
        with Wire(kcluster.kafka_port(101), timeout_s=5) as w:
            w.send_raw(struct.pack(">i", len(payload)) + payload)
            with pytest.raises(ConnectionError):
                w.recv_frame()
    with Wire(kcluster.kafka_port(101)) as w:  # and the broker still serves
        assert w.call(ApiVersionsRequest[0]()).error_code == NONE


def test_metadata_brokers_topics_and_partitions(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-meta", 2)
    with Wire(kcluster.kafka_port(103)) as w:
        md = w.metadata(["kp-meta", "kp-no-such-topic"])
        everything = w.metadata(None)
    assert md.cluster_id == kcluster.file.cluster_id
    assert {(b.node_id, b.host, b.port) for b in md.brokers} == {
        (b, "127.0.0.1", kcluster.kafka_port(b)) for b in BROKERS
    }
    topic, unknown = md.topics
    assert (unknown.name, unknown.error_code) == ("kp-no-such-topic", UNKNOWN_TOPIC_OR_PARTITION)
    assert (topic.name, topic.error_code) == ("kp-meta", NONE)
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
    for p in topic.partitions:
        assert p.error_code == NONE
        assert sorted(p.replica_nodes) == BROKERS
        assert p.leader_id in p.replica_nodes
        assert sorted(p.isr_nodes) == BROKERS
        assert p.offline_replicas == []
        assert p.leader_epoch >= 0
    assert "kp-meta" in {t.name for t in everything.topics}
    assert "kp-no-such-topic" not in {t.name for t in everything.topics}  # auto-create is off


def test_produce_errors_leader_hint_and_unknown_topic(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-produce")
    leader, _, follower = roles(kcluster, "kp-produce")
    leader_epoch = kcluster.leader("kp-produce")[1]
    with Wire(kcluster.kafka_port(follower)) as w:
        assert produce(w, "kp-produce", batch([b"x"])).error_code == NOT_LEADER_OR_FOLLOWER
        # KIP-951 (Produce v10): the new leader and its Kafka endpoint come with the error.
        cls = ProduceRequest[10]
        t = cls.TopicProduceData(name="kp-produce", partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=0, records=batch([b"x"]))])
        r = w.call(cls(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[t]))
        p = r.responses[0].partition_responses[0]
        assert p.error_code == NOT_LEADER_OR_FOLLOWER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, leader_epoch)
        assert [(e.node_id, e.host, e.port) for e in r.node_endpoints] == [
            (leader, "127.0.0.1", kcluster.kafka_port(leader))]
        assert produce(w, "kp-nope", batch([b"x"])).error_code == UNKNOWN_TOPIC_OR_PARTITION
    with Wire(kcluster.kafka_port(leader)) as w:
        good = batch([b"a", b"b"])
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF  # the CRC no longer matches
        assert produce(w, "kp-produce", bytes(corrupt)).error_code == CORRUPT_MESSAGE
        r = produce(w, "kp-produce", good)
        assert (r.error_code, r.base_offset) == (NONE, 0)
        assert produce(w, "kp-produce", good, partition=7).error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_idempotent_produce_duplicates_and_gaps(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-idem")
    leader, _, _ = roles(kcluster, "kp-idem")
    with Wire(kcluster.kafka_port(leader)) as w:
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=-1,
                                               producer_id=-1, producer_epoch=-1))  # fmt: skip
        assert init.error_code == NONE and init.producer_id >= 0 and init.producer_epoch == 0
        pid = init.producer_id
        first = batch([b"s0", b"s1", b"s2"], pid, 0)
        r = produce(w, "kp-idem", first)
        assert (r.error_code, r.base_offset) == (NONE, 0)
        again = produce(w, "kp-idem", first)  # a retry: not written again, its offsets (KIP-98)
        assert (again.error_code, again.base_offset) == (NONE, 0)
        gap = produce(w, "kp-idem", batch([b"s9"], pid, 9))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = produce(w, "kp-idem", batch([b"s3"], pid, 3))
        assert (nxt.error_code, nxt.base_offset) == (NONE, 3)
        assert list_offset(w, "kp-idem", -1).offset == 4


def test_acks_zero_gets_no_response(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-acks0")
    leader, _, _ = roles(kcluster, "kp-acks0")
    with Wire(kcluster.kafka_port(leader)) as w:
        produce(w, "kp-acks0", batch([b"fire-and-forget"]), acks=0)
        # The next answer on this connection is the next request's (correlation id checked).
        r = produce(w, "kp-acks0", batch([b"acked"]), acks=1)
        assert (r.error_code, r.base_offset) == (NONE, 1)


def test_fetch_returns_log_bytes_untouched_below_the_hw(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-fetch")
    leader, epoch, follower = roles(kcluster, "kp-fetch")
    sent = [batch([b"one", b"two"]), batch([b"three"])]
    with Wire(kcluster.kafka_port(leader)) as w:
        for records in sent:
            assert produce(w, "kp-fetch", records).error_code == NONE
        r = fetch(w, "kp-fetch", 0, epoch=epoch)
        assert (r.error_code, r.high_watermark, r.last_stable_offset, r.log_start_offset) == (
            NONE,
            3,
            3,
            0,
        )
        # Only base offset and partition leader epoch differ from what the client sent.
        data = bytes(r.records)
        expected = b""
        for base, records in zip((0, 2), sent, strict=True):
            expected += (
                struct.pack(">q", base) + records[8:12] + struct.pack(">i", epoch) + records[16:]
            )
        assert data == expected
        assert (
            fetch(w, "kp-fetch", 2, epoch=epoch).records == expected[len(expected) - len(sent[1]) :]
        )
        assert fetch(w, "kp-fetch", 4).error_code == OFFSET_OUT_OF_RANGE  # past the HW
        # The leader epoch the client names reaches the core (KIP-320); FENCED_LEADER_EPOCH for
        # an older one is in test_z_faults.py, once a failover moved the epoch on.
        assert fetch(w, "kp-fetch", 0, epoch=epoch + 1).error_code == UNKNOWN_LEADER_EPOCH
        assert list_offset(w, "kp-fetch", -1, epoch=epoch + 1).error_code == UNKNOWN_LEADER_EPOCH
        assert (list_offset(w, "kp-fetch", -2).offset, list_offset(w, "kp-fetch", -1).offset) == (
            0,
            3,
        )
    with Wire(kcluster.kafka_port(follower)) as w:
        # KIP-392: a v11+ fetch carries client metadata, so the follower serves it, below its
        # own HW (which may lag the leader's by a fetch round); v10 and older: the leader only.
        r = fetch(w, "kp-fetch", 0)
        assert r.error_code == NONE and r.high_watermark in (0, 2, 3)
        assert bytes(r.records) == expected[:{0: 0, 2: len(sent[0]), 3: len(expected)}[
            r.high_watermark]]
        assert fetch(w, "kp-fetch", 0, version=10).error_code == NOT_LEADER_OR_FOLLOWER
        assert list_offset(w, "kp-fetch", -1).error_code == NOT_LEADER_OR_FOLLOWER


def test_fetch_long_poll_waits_then_wakes_on_produce(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-poll")
    leader, epoch, _ = roles(kcluster, "kp-poll")
    port = kcluster.kafka_port(leader)
    with Wire(port) as w:
        started = time.monotonic()
        r = fetch(w, "kp-poll", 0, epoch=epoch, max_wait_ms=600)
        waited = time.monotonic() - started
        assert (r.error_code, r.records) == (NONE, b"") and 0.5 <= waited < 5
        # A long poll is answered as soon as the HW passes new records, not at max_wait_ms.
        cls = FetchRequest[12]
        p = cls.FetchTopic.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                          last_fetched_epoch=-1, log_start_offset=-1,
                                          partition_max_bytes=1 << 20)  # fmt: skip
        w.send(cls(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1,
                   topics=[cls.FetchTopic(topic="kp-poll", partitions=[p])],
                   forgotten_topics_data=[], rack_id=""))  # fmt: skip
        started = time.monotonic()
        with Wire(port) as producer:
            assert produce(producer, "kp-poll", batch([b"wake"])).error_code == NONE
        w.sock.settimeout(10)
        frame = w.recv_frame()
        assert time.monotonic() - started < 10
        assert b"wake" in frame


def test_broker_survives_a_client_that_vanishes_mid_request(kcluster: KafkaCluster) -> None:
    port = kcluster.kafka_port(101)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c")  # a frame that never completes
    s.close()
    with Wire(port) as w:
        assert (
            w.call(
                ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
            ).error_code
            == NONE
        )


def test_list_offsets_by_timestamp_and_max_timestamp(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-times")
    leader, _, _ = roles(kcluster, "kp-times")
    stamps = [[1_000, 1_100], [2_000, 2_500, 2_200], [3_000]]  # offsets 0-1, 2-4, 5
    with Wire(kcluster.kafka_port(leader)) as w:
        for batch_stamps in stamps:
            records = [rb.Record(b"t", None, timestamp_ms=t) for t in batch_stamps]
            assert produce(w, "kp-times", rb.encode_batch(records)).error_code == NONE

        def lookup(ts: int) -> tuple[int, int, int]:
            p = list_offset(w, "kp-times", ts)
            return p.error_code, p.offset, p.timestamp

        assert lookup(0) == (NONE, 0, 1_000)
        assert lookup(1_050) == (NONE, 1, 1_100)
        assert lookup(2_100) == (NONE, 3, 2_500)  # first record (by offset) with ts >= 2100
        assert lookup(3_000) == (NONE, 5, 3_000)
        assert lookup(3_001) == (NONE, -1, -1)  # none: Kafka answers offset -1
        assert lookup(-3) == (NONE, 5, 3_000)  # KIP-734 max timestamp
        assert lookup(-2)[:2] == (NONE, 0) and lookup(-1)[:2] == (NONE, 6)


def test_pipelined_responses_keep_request_order(kcluster: KafkaCluster) -> None:
    # A long poll first, then an ApiVersions that its handler answers at once: the broker must
    # still send the Fetch response first (Kafka's per-connection ordering).
    kcluster.create_topic("kp-order")
    leader, epoch, _ = roles(kcluster, "kp-order")
    cls = FetchRequest[12]
    p = cls.FetchTopic.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                      last_fetched_epoch=-1, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)  # fmt: skip
    with Wire(kcluster.kafka_port(leader)) as w:
        fetch_id = w.send(cls(replica_id=-1, max_wait_ms=700, min_bytes=1, max_bytes=1 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1,
                              topics=[cls.FetchTopic(topic="kp-order", partitions=[p])],
                              forgotten_topics_data=[], rack_id=""))  # fmt: skip
        versions_id = w.send(ApiVersionsRequest[0]())
        first, second = w.recv_frame(), w.recv_frame()
    assert struct.unpack_from(">i", first)[0] == fetch_id
    assert struct.unpack_from(">i", second)[0] == versions_id

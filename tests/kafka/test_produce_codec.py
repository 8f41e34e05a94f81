"""harness/kafka/produce_codec.py against kafka-python's codec (Kafka's JSON schemas), for every
Produce version the listener accepts: the hand decoder reads what kafka-python writes, field for
field; the hand encoder writes the bytes kafka-python writes, byte for byte; and anything the hand
decoder cannot read exactly (truncated, trailing bytes) raises, so the listener falls back to
kafka-python's decoder and refuses what it refuses. No processes: pure codec tests."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse  # type: ignore[import-untyped]

from harness.kafka import produce_codec as pc

VERSIONS = list(range(pc.MIN_VERSION, pc.MAX_VERSION + 1))
names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
records = st.one_of(st.none(), st.binary(max_size=300))
topics = st.lists(
    st.tuples(names, st.lists(st.tuples(st.integers(0, 2**31 - 1), records), max_size=3)),
    max_size=3,
)


def request_frame(version: int, txn: str | None, acks: int, timeout_ms: int,
                  data: list[tuple[str, list[tuple[int, bytes | None]]]],
                  client_id: str | None = "c") -> bytes:  # fmt: skip
    cls = ProduceRequest[version]
    tcls = cls.TopicProduceData
    req = cls(transactional_id=txn, acks=acks, timeout_ms=timeout_ms, topic_data=[
        tcls(name=n, partition_data=[tcls.PartitionProduceData(index=i, records=r)
                                     for i, r in parts]) for n, parts in data])  # fmt: skip
    req.with_header(correlation_id=12345, client_id=client_id)
    return bytes(req.encode(header=True, framed=False))


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(VERSIONS), txn=st.one_of(st.none(), names),
       acks=st.sampled_from([-1, 0, 1, 7]), timeout_ms=st.integers(-(2**31), 2**31 - 1),
       data=topics, client_id=st.one_of(st.none(), names))  # fmt: skip
def test_decode_reads_what_kafka_python_writes(version: int, txn: str | None, acks: int,
                                               timeout_ms: int, data: Any,
                                               client_id: str | None) -> None:  # fmt: skip
    frame = request_frame(version, txn, acks, timeout_ms, data, client_id)
    header = pc.decode_header(memoryview(frame), flexible=version >= pc.FLEXIBLE_FROM)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        0, version, 12345, client_id)  # fmt: skip
    got = pc.decode_produce(memoryview(frame), header.body_offset, version)
    assert got.transactional_id == txn and got.acks == acks and got.timeout_ms == timeout_ms
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in got.topic_data] == [
        (n, [(i, r) for i, r in parts]) for n, parts in data]  # fmt: skip
    assert all(type(p.records) in (bytes, type(None)) for t in got.topic_data
               for p in t.partition_data)  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_or_padded_requests_raise(version: int) -> None:
    frame = request_frame(version, None, -1, 1000, [("t", [(0, b"x" * 40), (1, None)])])
    body = pc.decode_header(frame, flexible=version >= pc.FLEXIBLE_FROM).body_offset
    for cut in range(body, len(frame)):
        with pytest.raises((ValueError, IndexError, struct.error)):
            pc.decode_produce(frame[:cut], body, version)
    with pytest.raises(ValueError, match="trailing"):
        pc.decode_produce(frame + b"\0", body, version)
    with pytest.raises(ValueError):
        pc.decode_produce(frame, body, 11)


answers = st.lists(st.tuples(
    names,
    st.lists(st.builds(
        pc.PartitionAnswer, index=st.integers(0, 2**31 - 1), error_code=st.sampled_from([0, 6, 45]),
        base_offset=st.integers(-1, 2**40), log_start_offset=st.integers(-1, 2**40),
        error_message=st.one_of(st.none(), names),
        current_leader=st.one_of(st.none(), st.tuples(st.integers(0, 1000), st.integers(0, 99)))),
        max_size=3)), max_size=3)  # fmt: skip
endpoints = st.lists(st.builds(pc.NodeEndpoint, node_id=st.integers(0, 1000), host=names,
                               port=st.integers(1, 65535), rack=st.one_of(st.none(), names)),
                     max_size=2)  # fmt: skip


def kafka_python_response(version: int, responses: Any, node_endpoints: Any) -> bytes:
    cls = ProduceResponse[version]
    tcls = cls.TopicProduceResponse
    pcls = tcls.PartitionProduceResponse
    topics = []
    for name, parts in responses:
        out = []
        for p in parts:
            pd = pcls(index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                      log_append_time_ms=-1, log_start_offset=p.log_start_offset,
                      record_errors=[], error_message=p.error_message)  # fmt: skip
            if version >= 10 and p.current_leader is not None:
                pd.current_leader = pcls.LeaderIdAndEpoch(leader_id=p.current_leader[0],
                                                          leader_epoch=p.current_leader[1])  # fmt: skip
            out.append(pd)
        topics.append(tcls(name=name, partition_responses=out))
    body = cls(responses=topics, throttle_time_ms=0)
    if version >= 10:
        body.node_endpoints = [cls.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port,
                                                rack=e.rack) for e in node_endpoints]  # fmt: skip
    body.with_header(correlation_id=77)
    return bytes(body.encode(header=True, framed=True))


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(VERSIONS), responses=answers, node_endpoints=endpoints)
def test_encode_writes_what_kafka_python_writes(version: int, responses: Any,
                                                node_endpoints: Any) -> None:  # fmt: skip
    ours = pc.ProduceAnswer(version, responses, node_endpoints if version >= 10 else None)
    ours.with_header(correlation_id=77)
    assert bytes(ours.encode(header=True, framed=True)) == kafka_python_response(
        version, responses, node_endpoints)
    decoded = ProduceResponse[version].decode(bytes(ours.encode(header=False, framed=False)))
    assert [t.name for t in decoded.responses] == [name for name, _ in responses]

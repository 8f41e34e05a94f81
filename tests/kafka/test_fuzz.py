"""A malformed or unsupported request gets Kafka's error answer or a closed connection, never a
crashed broker.

Seeded fuzzing of one broker's Kafka listener on the shared cluster: random frames, valid request
headers (every supported api key and version, flexible or not) followed by garbage bodies, real
requests with flipped bytes, and real requests cut short. Each case runs on its own connection
and ends in one of three outcomes: an answer frame with the request's correlation id, a closed
connection, or (a frame the broker still waits on) nothing within the read timeout. Afterwards
the broker process must be the same PID, answer ApiVersions, and produce/fetch must still work;
its log must show no crash.
"""

from __future__ import annotations

import random
import socket
import struct
from collections import Counter
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from harness.kafka.handlers import SUPPORTED
from tests.kafka.conftest import KafkaCluster, Wire
from tests.kafka.test_protocol import batch, fetch, produce

pytestmark = pytest.mark.integration

SEED = 20261122
CASES_PER_KIND = 250
READ_TIMEOUT_S = 0.3


def header(rng: random.Random, api_key: int, version: int, correlation_id: int) -> bytes:
    request_cls = SUPPORTED[api_key][0]
    client_id = bytes(rng.randrange(97, 123) for _ in range(rng.randrange(0, 12)))
    out = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if request_cls.flexible_version_q(version):
        out += b"\x00"  # no tagged fields (request header v2)
    return out


def valid_request(rng: random.Random, topic: str) -> bytes:
    """A well-formed request body+header (what a mutation starts from)."""
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    if rng.random() < 0.5:
        cls = MetadataRequest[rng.randrange(1, 13)]
        req = cls(topics=[cls.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    else:
        cls = ProduceRequest[rng.randrange(3, 10)]
        req = cls(transactional_id=None, acks=rng.choice((-1, 1)), timeout_ms=1000,
                  topic_data=[cls.TopicProduceData(name=topic, partition_data=[
                      cls.TopicProduceData.PartitionProduceData(index=0,
                                                                records=batch([b"fuzz"]))])])  # fmt: skip
    req.with_header(correlation_id=rng.randrange(1 << 31), client_id="fuzz")
    return bytes(req.encode(header=True))


def run_case(port: int, frame: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(frame)
        s.settimeout(READ_TIMEOUT_S)
        try:
            head = s.recv(4)
        except TimeoutError:
            return "waiting"
        except ConnectionResetError:
            return "closed"
        return "answered" if head else "closed"


def test_garbage_never_crashes_the_broker(kcluster: KafkaCluster) -> None:
    kcluster.create_topic("kp-fuzz")
    leader, epoch = kcluster.leader("kp-fuzz")
    port = kcluster.kafka_port(leader)
    pid = kcluster.pid(leader)
    rng = random.Random(SEED)
    outcomes: Counter[tuple[str, str]] = Counter()
    keys = sorted(SUPPORTED)
    for _ in range(CASES_PER_KIND):
        # 1. Random bytes in a correctly sized frame.
        body = rng.randbytes(rng.randrange(0, 64))
        outcomes["random", run_case(port, struct.pack(">i", len(body)) + body)] += 1
        # 2. A valid header for a supported (key, version), then garbage.
        api_key = rng.choice(keys)
        lo, hi = SUPPORTED[api_key][2:]
        payload = header(rng, api_key, rng.randrange(lo, hi + 1), rng.randrange(1 << 31))
        payload += rng.randbytes(rng.randrange(0, 200))
        outcomes["header+garbage", run_case(port, struct.pack(">i", len(payload)) + payload)] += 1
        # 3. A real request with a few bytes flipped after the api key/version.
        real = bytearray(valid_request(rng, "kp-fuzz"))
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(4, len(real))
            real[i] = rng.randrange(256)
        outcomes["mutated", run_case(port, struct.pack(">i", len(real)) + bytes(real))] += 1
        # 4. A real request cut short, framed as if complete.
        real = bytearray(valid_request(rng, "kp-fuzz"))
        cut = bytes(real[: rng.randrange(4, len(real))])
        outcomes["truncated", run_case(port, struct.pack(">i", len(cut)) + cut)] += 1
    # 5. Absurd frame sizes: negative, zero, over socket.request.max.bytes.
    for size in (-1, 0, 3, 100 * 1024 * 1024 + 1, 2**31 - 1):
        outcomes["size", run_case(port, struct.pack(">i", size) + b"\x00" * 8)] += 1
    print(dict(outcomes))  # the figures the report quotes (pytest -s)

    assert sum(outcomes.values()) == 4 * CASES_PER_KIND + 5
    assert outcomes["size", "answered"] == 0  # refused sizes close the connection
    assert kcluster.pid(leader) == pid  # the same process, not a restarted one
    with Wire(port) as w:
        assert (
            w.call(
                ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
            ).error_code
            == 0
        )
        r = produce(w, "kp-fuzz", batch([b"after-fuzz"]))
        assert r.error_code == 0
        data = fetch(w, "kp-fuzz", r.base_offset, epoch=epoch)
        assert data.error_code == 0 and b"after-fuzz" in bytes(data.records)
    log = Path(kcluster.file.node(leader).log_file).read_text()
    assert "node.crashed" not in log

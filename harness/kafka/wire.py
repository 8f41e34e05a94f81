"""A raw Kafka wire client: kafka-python's message classes over one plain blocking socket.

For the requests a client library would not send as asked (a chosen version, a stale leader
epoch, a bad sequence, garbage bytes) and for APIs the libraries do not wrap (DescribeQuorum):
the differential protocol tests send the same `Wire.call`s to a kraftlab broker and to an Apache
Kafka broker, and the Kafka peer kit (harness/peers/kafka) asks its nodes with it whether the
quorum has a leader and every broker is unfenced.

    with Wire(host, port) as w:
        md = w.metadata(["orders"])             # MetadataResponse v12
        q = w.call(DescribeQuorumRequest[1](topics=[...]))

`call` matches the response to the request by correlation id and decodes it with the response
class of the request's version; a closed connection raises ConnectionError. `call_async` is
one request on its own asyncio connection, for a client whose every call must be bounded by
its caller's `asyncio.timeout` (a blocking socket in a thread would outlive the cancellation):
a refused connection raises `NotSent` (the request never left), anything after the connect
raises as `call` does.
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
from typing import Any

CLIENT_ID = "kraftlab-wire"
METADATA_TOPIC = "__cluster_metadata"


class Wire:
    """One Kafka connection: `call(RequestClass[v](...))` returns the decoded response."""

    def __init__(self, port: int, timeout_s: float = 10.0, host: str = "127.0.0.1",
                 client_id: str = CLIENT_ID) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.correlation_id = 0
        self.client_id = client_id

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: Any) -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def call(self, request: Any) -> Any:
        cid = self.send(request)
        return _decode(request, cid, self.recv_frame())

    def metadata(self, topics: list[str] | None, version: int = 12,
                 auto_create: bool = False) -> Any:
        from kafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]

        cls = MetadataRequest[version]
        req = cls(topics=None if topics is None else [cls.MetadataRequestTopic(name=t)
                                                      for t in topics],
                  allow_auto_topic_creation=auto_create)  # fmt: skip
        return self.call(req)

    def describe_quorum(self, version: int = 1) -> Any:
        """DescribeQuorum of `__cluster_metadata` partition 0 (KIP-595; a broker forwards it to
        the active controller, KafkaApis.handleDescribeQuorumRequest)."""
        from kafka.protocol.admin import DescribeQuorumRequest  # type: ignore[import-untyped]

        cls = DescribeQuorumRequest[version]
        topic = cls.TopicData(topic_name=METADATA_TOPIC,
                              partitions=[cls.TopicData.PartitionData(partition_index=0)])
        return self.call(cls(topics=[topic]))

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)


class NotSent(ConnectionError):
    """The connection was refused or could not be made: the request was never sent."""


def _decode(request: Any, cid: int, payload: bytes) -> Any:
    response_cls = request.header.get_response_class()
    buf = io.BytesIO(payload)
    header = response_cls.parse_header(buf)
    if header.correlation_id != cid:
        raise ConnectionError(f"answer to correlation id {header.correlation_id}, "
                              f"expected {cid}")
    return response_cls.decode(payload[buf.tell():])


async def call_async(host: str, port: int, request: Any, client_id: str = CLIENT_ID) -> Any:
    """One request on a new connection to host:port, its decoded response (module docstring).
    The caller bounds it (`asyncio.timeout`); the connection is closed however it ends."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        raise NotSent(f"{host}:{port}: {exc}") from exc
    try:
        request.with_header(correlation_id=1, client_id=client_id)
        writer.write(bytes(request.encode(header=True, framed=True)))
        await writer.drain()
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            payload = await reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            raise ConnectionError("closed by the broker") from exc
        return _decode(request, 1, payload)
    finally:
        writer.close()


def frame_of(payload: bytes) -> bytes:
    """A size-prefixed frame around `payload` (for hand-made requests)."""
    return struct.pack(">i", len(payload)) + payload


def connect_refused(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True if nothing listens on host:port yet."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError:
        return True
    return False

"""The Kafka wire-protocol listener of one broker (`listeners=...,PLAINTEXT://host:port`).

Framing (Kafka protocol guide): every request is `int32 size` + request header + body; every
response `int32 size` + response header + body. The header and body codecs are kafka-python's
(kafka.protocol: Kafka's own JSON message schemas, every version, flexible versions with compact
types and tagged fields), except Produce's (produce_codec.py), so this module only frames, routes
and orders.

Invariants:
- Responses on one connection go out in request order (Kafka's in-flight pipelining contract),
  whatever order their handlers finish in: each request takes a slot in a FIFO, the writer sends
  the head slot once it is filled.
- A request Kafka's broker would not parse closes the connection: an oversized or negative frame
  size, an unknown api key, an unsupported version (except ApiVersions, which gets the
  UNSUPPORTED_VERSION answer at v0 as KIP-511 asks), or a header/body that does not decode.
  Nothing a client sends reaches `node.crash`: a handler exception is logged and closes only that
  connection.
- acks=0 Produce gets no response at all (Kafka), so it takes no slot.
- A client that stops reading its responses stops being read once 32 MiB wait unsent.
- Produce requests are decoded and answered by produce_codec.py (no object per partition; the
  records are one slice of the frame), every other request by kafka-python's codec. The request
  header is read by produce_codec too (the same bytes as kafka-python's RequestHeader).
- While the nemesis cuts clients off (harness/net/transport.py LinkFilter.drop_clients), requests
  are dropped unrun and answers unsent: the client times out, as behind a partition.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import Counter, deque
from typing import Any, cast

import structlog

from harness.kafka import handlers, produce_codec
from harness.kafka.answer import Reply
from harness.kafka.handlers import SUPPORTED, UNSUPPORTED_VERSION
from harness.runtime.broker import BrokerNode

log = structlog.get_logger()

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
API_VERSIONS_KEY = 18
WRITE_BUFFER_HIGH = 32 << 20  # unsent response bytes before we stop reading requests
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")


class BadRequest(Exception):
    """A request Kafka would refuse by closing the connection."""


class KafkaListener:
    """The asyncio server; one `_Connection` (an asyncio Protocol) per client socket."""

    def __init__(self, node: BrokerNode, host: str, port: int) -> None:
        self.node = node
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[_Connection] = set()
        self.requests = 0
        self.closed_bad_requests = 0
        # (api_key, api_version) -> requests served: which versions clients negotiated.
        self.versions_seen: Counter[tuple[int, int]] = Counter()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port)
        log.info("kafka.listening", host=self.host, port=self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()


class _Connection(asyncio.Protocol):
    """One client socket. Framing is done here, on the bytes uvloop hands over, not through an
    asyncio StreamReader: a frame that arrives whole is read straight out of the received chunk,
    one that spans chunks is gathered into one buffer of its announced size (no growing buffer,
    no task wake-up per request)."""

    def __init__(self, listener: KafkaListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.slots: deque[list[bytes | None]] = deque()
        self.versions: set[tuple[int, int]] = set()  # (api_key, api_version) used
        self.closed = False
        self.peer = "?"
        self.client_host = ""
        self._head = b""  # a frame size split across chunks (< 4 bytes)
        self._frame: bytearray | None = None  # a frame being gathered across chunks
        self._filled = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.listener._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener._connections.discard(self)
        self.close()
        log.info("kafka.connection_closed", peer=self.peer,
                 versions=sorted(f"{k}v{v}" for k, v in self.versions))  # fmt: skip

    # Backpressure: a client that does not read its responses stops being read.
    def pause_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        try:
            self._frames(data)
        except BadRequest as exc:
            self.listener.closed_bad_requests += 1
            log.warning("kafka.bad_request", peer=self.peer, error=str(exc))
            self.close()
        except Exception as exc:  # never let one client's bytes stop the broker
            self.listener.closed_bad_requests += 1
            log.error("kafka.connection_failed", peer=self.peer,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            self.close()

    def _frames(self, data: bytes) -> None:
        pos, size = 0, len(data)
        frame = self._frame
        if frame is not None:  # continue the frame being gathered
            take = min(len(frame) - self._filled, size)
            frame[self._filled : self._filled + take] = data[:take]
            self._filled += take
            pos = take
            if self._filled < len(frame):
                return
            self._frame = None
            with memoryview(frame) as whole:
                self._request(whole)
        if self._head:
            data = self._head + data[pos:]
            pos, size = 0, len(data)
            self._head = b""
        with memoryview(data) as view:
            while not self.closed and size - pos >= 4:
                (length,) = _SIZE.unpack_from(view, pos)
                if not 4 <= length <= MAX_REQUEST_BYTES:
                    raise BadRequest(f"frame size {length}")
                end = pos + 4 + length
                if end > size:  # the rest arrives in later chunks
                    frame = self._frame = bytearray(length)
                    self._filled = size - pos - 4
                    frame[: self._filled] = view[pos + 4 :]
                    return
                self._request(view[pos + 4 : end])
                pos = end
        if pos < size and not self.closed:
            self._head = bytes(data[pos:])

    def _request(self, payload: Any) -> None:
        """One whole request frame (a memoryview or bytearray, valid only during this call)."""
        if self.closed:
            return
        if self.listener.node.transport.links.drop_clients:
            return  # the nemesis cut clients off: the request is lost (never run)
        self.listener.requests += 1
        self._dispatch(payload)

    def _dispatch(self, payload: Any) -> None:
        if len(payload) < 4:
            raise BadRequest("request shorter than its header")
        api_key, api_version = _KEY_VERSION.unpack_from(payload, 0)
        api = SUPPORTED.get(api_key)
        if api is None:
            raise BadRequest(f"unsupported api key {api_key}")
        request_cls, _, min_version, max_version = api
        if not min_version <= api_version <= max_version:
            if api_key != API_VERSIONS_KEY:
                raise BadRequest(f"api key {api_key} version {api_version} not supported")
            # KIP-511: answer at v0 with UNSUPPORTED_VERSION and our ranges; the header is v1.
            header = _decode_header(payload, flexible=False)
            slot: list[bytes | None] = [None]
            self.slots.append(slot)
            self._fill(slot, handlers.api_versions_body(0, UNSUPPORTED_VERSION),
                       header.correlation_id)  # fmt: skip
            return
        flexible = request_cls.flexible_version_q(api_version)
        header = _decode_header(payload, flexible=flexible)
        request = None
        if api_key == produce_codec.PRODUCE_KEY:
            try:  # the hot request, by hand; anything it cannot read goes to kafka-python's
                request = produce_codec.decode_produce(payload, header.body_offset, api_version)
            except (ValueError, IndexError, struct.error):
                request = None
        if request is None:
            try:
                request = request_cls.decode(payload[header.body_offset :], version=api_version)
            except Exception as exc:  # any decode failure of client bytes: Kafka closes the socket
                raise BadRequest(
                    f"api key {api_key} v{api_version} does not decode: {exc!r}") from None
        cid = header.correlation_id
        self.listener.versions_seen[(api_key, api_version)] += 1
        self.versions.add((api_key, api_version))
        reply_slot: list[bytes | None] | None = None
        if not handlers.no_response(api_key, request):
            reply_slot = [None]
            self.slots.append(reply_slot)

        def reply(body: Any) -> None:
            if reply_slot is not None:
                self._fill(reply_slot, body, cid)

        try:
            handlers.handle(self.listener.node, api_key, api_version, request,
                            Reply(reply, client_id=header.client_id or "",
                                  client_host=self.client_host))  # fmt: skip
        except Exception as exc:  # a handler bug must not stop the broker: drop this client
            log.error("kafka.handler_failed", api_key=api_key, api_version=api_version,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip
            raise BadRequest(f"handler failed: {exc!r}") from None

    def _fill(self, slot: list[bytes | None], body: Any, correlation_id: int) -> None:
        if self.closed:
            return
        try:
            body.with_header(correlation_id=correlation_id)
            slot[0] = body.encode(header=True, framed=True)
            if self.listener.node.transport.links.drop_clients:
                slot[0] = b""  # the answer is lost in the nemesis's cut (order kept for the rest)
        except Exception as exc:
            log.error("kafka.encode_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            self.close()
            return
        transport = self.transport
        while self.slots and self.slots[0][0] is not None:
            data = self.slots.popleft()[0]
            assert data is not None and transport is not None
            if data:
                transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.slots.clear()
            self._frame = None
            if self.transport is not None:
                self.transport.close()


def _decode_header(payload: Any, *, flexible: bool) -> produce_codec.RequestHeader:
    try:
        return produce_codec.decode_header(payload, flexible=flexible)
    except (ValueError, IndexError, struct.error) as exc:
        raise BadRequest(f"header does not decode: {exc!r}") from None

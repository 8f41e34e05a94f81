"""The Kafka wire-protocol listener of one broker (`listeners=...,PLAINTEXT://host:port`).

Framing (Kafka protocol guide): every request is `int32 size` + request header + body; every
response `int32 size` + response header + body. The header and body codecs are kafka-python's
(kafka.protocol: Kafka's own JSON message schemas, every version, flexible versions with compact
types and tagged fields), so this module only frames, routes and orders.

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
- While the nemesis cuts clients off (harness/net/transport.py LinkFilter.drop_clients), requests
  are dropped unrun and answers unsent: the client times out, as behind a partition.
"""

from __future__ import annotations

import asyncio
import io
import struct
from collections import Counter, deque
from typing import Any

import structlog
from kafka.protocol.api_header import RequestHeader  # type: ignore[import-untyped]

from harness.kafka import handlers
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
    """The asyncio server; one `_Connection` per client socket."""

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
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        log.info("kafka.listening", host=self.host, port=self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(self, reader, writer)
        self._connections.add(conn)
        try:
            await conn.serve()
        finally:
            self._connections.discard(conn)
            conn.close()
            log.info("kafka.connection_closed", peer=conn.peer,
                     versions=sorted(f"{k}v{v}" for k, v in conn.versions))  # fmt: skip


class _Connection:
    def __init__(self, listener: KafkaListener, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:  # fmt: skip
        self.listener = listener
        self.reader = reader
        self.writer = writer
        self.slots: deque[list[bytes | None]] = deque()
        self.versions: set[tuple[int, int]] = set()  # (api_key, api_version) used
        self.closed = False
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = f"/{peer[0]}" if peer else ""

    async def serve(self) -> None:
        try:
            while not self.closed:
                head = await self.reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 4 <= size <= MAX_REQUEST_BYTES:
                    raise BadRequest(f"frame size {size}")
                payload = await self.reader.readexactly(size)
                if self.listener.node.transport.links.drop_clients:
                    continue  # the nemesis cut clients off: the request is lost (never run)
                self.listener.requests += 1
                self._dispatch(payload)
                if self.writer.transport.get_write_buffer_size() > WRITE_BUFFER_HIGH:
                    # Backpressure: a client that does not read its responses stops being read.
                    await self.writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except BadRequest as exc:
            self.listener.closed_bad_requests += 1
            log.warning("kafka.bad_request", peer=self.peer, error=str(exc))
        except Exception as exc:  # never let one client's bytes stop the broker
            self.listener.closed_bad_requests += 1
            log.error("kafka.connection_failed", peer=self.peer,
                      error=f"{type(exc).__name__}: {exc}", exc_info=exc)  # fmt: skip

    def _dispatch(self, payload: bytes) -> None:
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
        try:
            flexible = request_cls.flexible_version_q(api_version)
            buf = io.BytesIO(payload)
            header = RequestHeader.decode(buf, flexible=flexible)
            request = request_cls.decode(memoryview(payload)[buf.tell() :], version=api_version)
        except BadRequest:
            raise
        except Exception as exc:  # any decode failure of client bytes: Kafka closes the socket
            raise BadRequest(f"api key {api_key} v{api_version} does not decode: {exc!r}") from None
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
            slot[0] = bytes(body.encode(header=True, framed=True))
            if self.listener.node.transport.links.drop_clients:
                slot[0] = b""  # the answer is lost in the nemesis's cut (order kept for the rest)
        except Exception as exc:
            log.error("kafka.encode_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            self.close()
            return
        while self.slots and self.slots[0][0] is not None:
            data = self.slots.popleft()[0]
            assert data is not None
            self.writer.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.slots.clear()
            self.writer.close()


def _decode_header(payload: bytes, *, flexible: bool) -> Any:
    try:
        return RequestHeader.decode(io.BytesIO(payload), flexible=flexible)
    except Exception as exc:
        raise BadRequest(f"header does not decode: {exc!r}") from None

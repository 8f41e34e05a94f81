"""Inter-node RPC transport of the asyncio driver: length-prefixed msgpack frames over TCP.

Wire format: every frame is a 4-byte big-endian length followed by that many
bytes of msgpack. The first frame on a connection is a handshake `{"kraftlab": 1, "cluster_id",
"node_id"}` from the connecting side; the accepting side answers `{"ok": true, "node_id"}` or
`{"ok": false, "error": "INCONSISTENT_CLUSTER_ID", ...}` and closes. Every later frame carries one
Raft message, encoded by `quorum.codec` (only the codec knows message bytes).

Topology: each node owns one *outbound* connection per peer and sends only on it; what a peer
sends arrives on that peer's own outbound connection to us. So there is exactly one connection per
(sender, receiver) pair, no simultaneous-connect races, and a dead peer shows up as a closed or
refused outbound connection (Kafka's NetworkClient works the same way).

Invariants and failure handling:
- A bad frame (oversized length, undecodable msgpack, a codec `DecodeError`, an unknown message
  type, a wrong handshake, a truncated frame at EOF) closes that one connection and is logged as
  `transport.bad_frame` / `transport.handshake_refused`; the node keeps serving.
- A refused (or reset) connect to a peer is reported once per attempt through `on_unreachable(peer)`
  so the driver can call `RaftCore.peer_unreachable` (fast failure detection).
- Sends never block and never spawn a task per message: frames are appended to a per-peer buffer
  (answers to a client to a per-connection one) and written with one `transport.write` per
  buffer. While a delivery is held (`hold`/`release`: the frames of one `data_received` on an
  inbound connection, or one step of the node) the write waits for the release, which runs the
  `on_delivered` hook and then writes every buffer that gained bytes; outside a hold it waits for
  the end of this loop iteration (a `Soon` of harness/loop). So what one input causes (records to two
  followers, the answer to the client who asked) leaves in the same loop iteration as that input,
  without a second pass of the loop, and a chunk of frames still costs one write per buffer.
- Memory per connection is bounded, whatever the other side does: what waits for a peer (our
  pending buffer plus the asyncio transport's own write buffer, `get_write_buffer_size()`) stays
  within MAX_PENDING_BYTES; a frame that does not fit is dropped (counted in `dropped_out`; the
  cores retry on their timers). While the transport is above its high-water mark
  (`pause_writing`, WRITE_BUFFER_HIGH) nothing more is handed to it; `resume_writing` flushes.
  A native client that stops reading its answers has its connection closed once its unread
  answers pass MAX_CLIENT_PENDING_BYTES (`transport.slow_client`): an answer cannot be dropped
  silently (the client would wait for it), so the client sees the connection end instead.
- The link filter (the nemesis hook) drops frames to and from the peers in `drop`, and delays every
  outgoing frame (or only those to `delay_to`) by `delay_ms`. Raft tolerates both: a lost message
  is retried by the core's own timers. Peers and clients are cut independently: `drop` names
  peers (node ids: Raft, controller RPC, replica fetches) and never touches client connections;
  `drop_clients` silences every native client connection (key/value and data clients) on this
  port: their handshakes and requests are dropped unanswered and answers to requests accepted
  before the cut are dropped too, so a client sees a timeout, as behind a real partition, never
  a refusal. The admin API applies the same filter to HTTP (harness/admin/server.py, /nemesis/links).
- Deferred work (a flush on the loop's next pass, a delayed frame) runs through harness/loop: an
  exception in it goes to `on_error` (the node's crash), as one raised by a delivery would.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import msgpack  # type: ignore[import-untyped]
import structlog

from harness.loop import OnError, Soon, run_later

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 32 * 1024 * 1024
# Bytes queued for a peer that is not connected (or slow) before new frames are dropped: our
# pending buffer plus the asyncio transport's write buffer together.
MAX_PENDING_BYTES = 16 * 1024 * 1024
# Unread answers to one native client (in the transport's buffer) before it is disconnected.
MAX_CLIENT_PENDING_BYTES = 64 * 1024 * 1024
# The asyncio transport's write-buffer marks: above HIGH it calls pause_writing (we stop handing
# it bytes), at or below LOW resume_writing.
WRITE_BUFFER_HIGH = 1024 * 1024
WRITE_BUFFER_LOW = 256 * 1024
HANDSHAKE_TIMEOUT_S = 2.0
RECONNECT_BACKOFF_MS = (20, 1000)
PROTOCOL_VERSION = 1

log = structlog.get_logger()


class FrameError(Exception):
    """A frame violated the wire format (length, handshake, payload)."""


@dataclass(frozen=True, slots=True)
class LinkFilter:
    """The nemesis view of this node's links (docs/api.md /nemesis/links)."""

    drop: frozenset[int] = frozenset()  # peers (node ids); client connections are not peers
    delay_ms: int = 0
    delay_to: frozenset[int] | None = None  # None: delay traffic to every peer
    drop_clients: bool = False  # silence client connections (native and admin HTTP)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"drop": sorted(self.drop), "delay_ms": self.delay_ms}
        if self.delay_to is not None:
            out["delay_to"] = sorted(self.delay_to)
        if self.drop_clients:  # shown only when set: docs/api.md's shape is unchanged otherwise
            out["drop_clients"] = True
        return out

    def delay_for(self, peer: int) -> int:
        if self.delay_ms <= 0 or (self.delay_to is not None and peer not in self.delay_to):
            return 0
        return self.delay_ms


def frame(payload: bytes) -> bytes:
    """One wire frame: length prefix + payload."""
    return HEADER.pack(len(payload)) + payload


class FrameProtocol(asyncio.Protocol):
    """Splits a byte stream into frames and hands each payload to `on_frame`.

    Subclasses decide what a frame means. A `FrameError` raised by `on_frame` (or by framing)
    closes this connection only.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self.closed = False
        self.write_paused = False  # the transport's buffer is above WRITE_BUFFER_HIGH

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH, low=WRITE_BUFFER_LOW)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # latency over bytes

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False

    def write_buffer_size(self) -> int:
        """Bytes the asyncio transport holds, not yet taken by the kernel."""
        if self.transport is None or self.closed:
            return 0
        return self.transport.get_write_buffer_size()

    def data_received(self, data: bytes) -> None:
        # One copy per frame: each payload is copied once, out of a memoryview (slicing the
        # bytearray and then calling bytes() copied it twice; docs/benchmarks.md "Transport copy
        # savings"). With nothing buffered, frames are cut straight from `data`; only a partial
        # frame's bytes are kept in `_buffer`. While the view is held, `_buffer` must not be resized, so
        # `fail` rebinds it instead of clearing it (on_frame may call fail).
        buf = self._buffer
        buffered = bool(buf)
        if not buffered:
            size = len(data)
            if size >= 4:
                (length,) = HEADER.unpack_from(data)
                if length + 4 == size:
                    # Exactly one frame (a request, a fetch, an answer: nearly every read of a
                    # sequential exchange): cut it out directly, no view and no loop.
                    if length > MAX_FRAME_BYTES:
                        self.fail(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
                        return
                    try:
                        self.on_frame(data[4:] if type(data) is bytes else bytes(data[4:]))
                    except FrameError as exc:
                        self.fail(str(exc))
                    return
        if buffered:
            buf += data  # continue the partial frame
            view = memoryview(buf)
        else:
            view = memoryview(data)
        pos = 0
        size = len(view)
        try:
            with view:
                while size - pos >= 4:
                    (length,) = HEADER.unpack_from(view, pos)
                    if length > MAX_FRAME_BYTES:
                        raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
                    end = pos + 4 + length
                    if end > size:
                        break
                    payload = bytes(view[pos + 4 : end])
                    pos = end
                    self.on_frame(payload)
                    if self.closed:
                        return
                if not buffered and pos < size:
                    buf += view[pos:]  # keep the partial frame (`buf` is not the viewed object)
        except FrameError as exc:
            self.fail(str(exc))
            return
        if buffered and pos:
            del buf[:pos]  # the view is released: resizing is allowed again

    def eof_received(self) -> bool | None:
        if self._buffer:
            self.fail(f"truncated frame: connection closed with {len(self._buffer)} bytes pending")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def write_frame(self, payload: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(frame(payload))

    def on_frame(self, payload: bytes) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def fail(self, reason: str) -> None:
        """Close this connection because the remote side broke the protocol."""
        self.on_failed(reason)
        self.closed = True
        self._buffer = bytearray()  # not clear(): data_received may hold a view of it
        if self.transport is not None:
            self.transport.abort()

    def on_failed(self, reason: str) -> None:
        pass


def _unpack_handshake(payload: bytes) -> dict[str, Any]:
    try:
        value = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise FrameError(f"undecodable handshake: {exc!r}") from None
    if not isinstance(value, dict):
        raise FrameError("handshake is not a map")
    return value


class _InboundProtocol(FrameProtocol):
    """Accepted connection: handshake first, then messages from one peer, or requests from a
    native client (harness/net/client.py), answered on this same connection."""

    def __init__(self, owner: Transport) -> None:
        super().__init__()
        self.owner = owner
        self.peer_id: int | None = None
        self.is_client = False
        self.remote = "?"
        self._replies = bytearray()
        self._reply_soon = Soon(owner.loop, self._flush_replies, on_error=owner.on_error)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.remote = str(transport.get_extra_info("peername"))

    def data_received(self, data: bytes) -> None:
        # Every frame of this chunk is handled before anything is written: what they caused
        # leaves at the release, one write per buffer (the module docstring).
        owner = self.owner
        owner.held += 1
        try:
            FrameProtocol.data_received(self, data)
        finally:
            owner.release()

    def on_frame(self, payload: bytes) -> None:
        owner = self.owner
        if self.is_client:
            if owner.links.drop_clients:
                owner.dropped_client_frames += 1
                return
            try:
                request = owner.decode(payload)
            except owner.decode_errors as exc:
                raise FrameError(f"undecodable client request: {exc}") from None
            assert owner.on_client_request is not None
            owner.on_client_request(self, request)
            return
        if self.peer_id is None:
            self._handshake(payload)
            return
        if self.peer_id in owner.links.drop:
            owner.dropped_in += 1
            return
        try:
            message = owner.decode(payload)
        except owner.decode_errors as exc:
            raise FrameError(f"undecodable message: {exc}") from None
        owner.on_message(self.peer_id, message)

    def _handshake(self, payload: bytes) -> None:
        owner = self.owner
        hello = _unpack_handshake(payload)
        node_id = hello.get("node_id")
        cluster_id = hello.get("cluster_id")
        client = hello.get("client") is True and owner.on_client_request is not None
        if client and owner.links.drop_clients:
            # Cut off: the hello is lost and never answered (the client's connect times out).
            # The connection stays unidentified: its next frame is taken as a hello again.
            owner.dropped_client_frames += 1
            return
        if hello.get("kraftlab") != PROTOCOL_VERSION or not (isinstance(node_id, int) or client):
            raise FrameError(f"bad handshake {sorted(hello)}")
        if cluster_id != owner.cluster_id:
            log.warning(
                "transport.handshake_refused",
                remote=self.remote,
                remote_node_id=node_id,
                remote_cluster_id=str(cluster_id),
                error="INCONSISTENT_CLUSTER_ID",
            )
            owner.refused += 1
            self.write_frame(
                msgpack.packb(
                    {"ok": False, "error": "INCONSISTENT_CLUSTER_ID", "cluster_id": owner.cluster_id}
                )
            )
            self.closed = True
            assert self.transport is not None
            self.transport.close()
            return
        if client:
            self.is_client = True
        else:
            assert isinstance(node_id, int)
            self.peer_id = node_id
            owner.learn_peer(node_id, hello.get("listener"))
        self.write_frame(msgpack.packb({"ok": True, "node_id": owner.node_id}))

    def reply(self, message: Any) -> None:
        """Answer a client request; replies are written once per loop iteration."""
        if self.closed:
            return
        if self.owner.links.drop_clients:  # the answer is lost in the cut
            self.owner.dropped_client_frames += 1
            return
        data = frame(self.owner.encode(message))
        if self.write_buffer_size() + len(self._replies) + len(data) > MAX_CLIENT_PENDING_BYTES:
            # The client does not read its answers: close rather than hold them without bound.
            log.warning("transport.slow_client", remote=self.remote,
                        unread_bytes=self.write_buffer_size() + len(self._replies))
            self.owner.slow_clients_closed += 1
            self.closed = True
            self._replies = bytearray()
            if self.transport is not None:
                self.transport.abort()
            return
        self._replies += data
        owner = self.owner
        if owner.held:
            if self._reply_soon.claim():
                owner._dirty_replies.append(self)  # written at the release
        else:
            self._reply_soon.schedule()

    def _flush_replies(self) -> None:
        # Hand the buffer over instead of copying it: it is never touched again here, so the
        # transport may keep it (uvloop holds the buffer of a write it could not finish).
        replies, self._replies = self._replies, bytearray()
        if self.transport is not None and not self.closed and replies:
            self.transport.write(replies)

    def on_failed(self, reason: str) -> None:
        self.owner.bad_frames += 1
        log.warning("transport.bad_frame", remote=self.remote, peer=self.peer_id, reason=reason)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.owner._inbound.discard(self)


class _OutboundProtocol(FrameProtocol):
    """Our connection to one peer: we only send on it; the peer only sends the handshake ack."""

    def __init__(self, link: _PeerLink) -> None:
        super().__init__()
        self.link = link
        self.ack: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        super().resume_writing()
        self.link.schedule_flush()  # what waited while the transport was full

    def on_frame(self, payload: bytes) -> None:
        if self.ack.done():
            raise FrameError("unexpected frame on an outbound connection")
        self.ack.set_result(_unpack_handshake(payload))

    def on_failed(self, reason: str) -> None:
        log.warning("transport.bad_frame", peer=self.link.peer_id, reason=reason, outbound=True)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.ack.done():
            self.ack.set_exception(ConnectionResetError("closed during handshake"))
        self.link.on_connection_lost(self, exc)


@dataclass(slots=True)
class _PeerLink:
    """Outbound state for one peer."""

    owner: Transport
    peer_id: int
    host: str
    port: int
    protocol: _OutboundProtocol | None = None
    connecting: bool = False
    pending: bytearray = field(default_factory=bytearray)
    backoff_ms: int = RECONNECT_BACKOFF_MS[0]
    retry_at: float = 0.0
    flush_soon: Soon = field(init=False)  # a write of `pending` asked for, not yet done

    def __post_init__(self) -> None:
        self.flush_soon = Soon(self.owner.loop, self._write, on_error=self.owner.on_error)

    def schedule_flush(self) -> None:
        if self.protocol is None:
            return
        owner = self.owner
        if owner.held:
            if self.flush_soon.claim():
                owner._dirty_links.append(self)  # written at the release
        else:
            self.flush_soon.schedule()

    def enqueue(self, data: bytes) -> None:
        proto = self.protocol
        # What waits for this peer: our pending buffer plus the transport's write buffer.
        queued = len(self.pending) + (proto.write_buffer_size() if proto is not None else 0)
        if queued + len(data) > MAX_PENDING_BYTES or (
            self.protocol is None
            and not self.connecting
            and self.owner.loop.time() < self.retry_at
        ):
            # Slow peer, or backing off after a failed connect: drop (the core retries).
            self.owner.dropped_out += 1
            return
        self.pending += data
        if self.protocol is not None:
            self.schedule_flush()
        elif not self.connecting:
            self.maybe_connect()

    def flush(self) -> None:
        """Write what is pending now (a flush asked for is done by this one)."""
        self.flush_soon.run_now()

    def _write(self) -> None:
        proto = self.protocol
        if proto is None or proto.transport is None or not self.pending or proto.write_paused:
            return  # (paused: resume_writing flushes)
        # Handed over, not copied (as _flush_replies): the transport owns these bytes now.
        data, self.pending = self.pending, bytearray()
        proto.transport.write(data)

    def maybe_connect(self) -> None:
        loop = self.owner.loop
        if self.connecting or self.protocol is not None or self.owner.closing:
            return
        now = loop.time()
        if now < self.retry_at:
            # Back off; a later send (the core retries on its timers) tries again.
            return
        self.connecting = True
        # One task per connection attempt (not per message).
        self.owner._tasks.add(task := loop.create_task(self._connect()))
        task.add_done_callback(self.owner._tasks.discard)

    async def _connect(self) -> None:
        owner = self.owner
        loop = owner.loop
        try:
            _, proto = await loop.create_connection(
                lambda: _OutboundProtocol(self), self.host, self.port
            )
            proto.write_frame(
                msgpack.packb(
                    {"kraftlab": PROTOCOL_VERSION, "cluster_id": owner.cluster_id,
                     "node_id": owner.node_id, "listener": [owner.host, owner.port]}
                )
            )
            ack = await asyncio.wait_for(proto.ack, HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, OSError, FrameError) as exc:
            self.connecting = False
            self._failed(exc)
            return
        self.connecting = False
        if not ack.get("ok"):
            log.error("transport.handshake_rejected", peer=self.peer_id, answer=ack)
            if proto.transport is not None:
                proto.transport.close()
            self._failed(ConnectionRefusedError(str(ack.get("error"))))
            return
        if ack.get("node_id") != self.peer_id:
            log.error("transport.wrong_peer", peer=self.peer_id, answered=ack.get("node_id"))
            proto.fail("peer answered with another node id")
            self._failed(ConnectionRefusedError("wrong node id"))
            return
        self.protocol = proto
        self.backoff_ms = RECONNECT_BACKOFF_MS[0]
        log.info("transport.connected", peer=self.peer_id)
        self.flush()

    def _failed(self, exc: BaseException) -> None:
        owner = self.owner
        self.retry_at = owner.loop.time() + self.backoff_ms / 1000
        self.backoff_ms = min(self.backoff_ms * 2, RECONNECT_BACKOFF_MS[1])
        self.pending.clear()
        owner.connect_failures += 1
        log.debug("transport.connect_failed", peer=self.peer_id, error=repr(exc))
        if owner.closing:
            return
        # Connection refused or reset: nobody listens there (the peer process died).
        owner.on_unreachable(self.peer_id)

    def on_connection_lost(self, proto: _OutboundProtocol, exc: Exception | None) -> None:
        if self.protocol is not proto:
            return
        self.protocol = None
        self.pending.clear()
        if self.owner.closing:
            return
        log.info("transport.disconnected", peer=self.peer_id, error=repr(exc) if exc else None)
        # Reconnect at once: a refused reconnect is how a dead leader is noticed quickly.
        self.retry_at = 0.0
        self.maybe_connect()

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()
        self.protocol = None


class Transport:
    """The node's RPC endpoint: a listening socket plus one outbound link per peer."""

    def __init__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        host: str,
        port: int,
        peers: dict[int, tuple[str, int]],
        on_message: Callable[[int, Any], None],
        on_unreachable: Callable[[int], None],
        encode: Callable[[Any], bytes],
        decode: Callable[[bytes], Any],
        decode_errors: tuple[type[BaseException], ...],
        on_error: OnError,
        on_client_request: Callable[[_InboundProtocol, Any], None] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.host = host
        self.port = port
        self.on_message = on_message
        self.on_unreachable = on_unreachable
        self.encode = encode
        self.decode = decode
        self.decode_errors = decode_errors
        self.on_client_request = on_client_request
        self.on_error = on_error  # an exception in deferred work: the node's crash
        self.loop = asyncio.get_running_loop()
        self.links = LinkFilter()
        self.closing = False
        self._peers = {
            pid: _PeerLink(self, pid, h, p) for pid, (h, p) in peers.items() if pid != node_id
        }
        self._static_peers = frozenset(self._peers)
        self._inbound: set[_InboundProtocol] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | None = None
        # Counters for /metrics.
        self.bad_frames = 0
        self.refused = 0
        self.dropped_in = 0
        self.dropped_out = 0
        self.dropped_client_frames = 0
        self.connect_failures = 0
        self.slow_clients_closed = 0
        self._links_changed = asyncio.Event()
        self.sent = 0
        # Delivery holds (`hold`/`release`): while > 0, writes wait for the release.
        self.held = 0
        self._dirty_links: list[_PeerLink] = []
        self._dirty_replies: list[_InboundProtocol] = []
        # Called at the outermost release, before the writes (the node proposes what the
        # delivery submitted, so the records go out in the same writes).
        self.on_delivered: Callable[[], None] | None = None

    async def start(self) -> None:
        def factory() -> _InboundProtocol:
            proto = _InboundProtocol(self)
            self._inbound.add(proto)
            return proto

        self._server = await self.loop.create_server(factory, self.host, self.port, reuse_address=True)
        log.info("transport.listening", host=self.host, port=self.port)

    def send(self, to: int, message: Any) -> None:
        """Queue `message` for peer `to`. Never blocks; best effort (Raft retries)."""
        link = self._peers.get(to)
        if link is None:
            log.warning("transport.unknown_peer", peer=to)
            return
        links = self.links
        if to in links.drop:
            self.dropped_out += 1
            return
        data = frame(self.encode(message))
        self.sent += 1
        delay_ms = links.delay_for(to) if links.delay_ms > 0 else 0
        if delay_ms:
            run_later(self.loop, delay_ms, link.enqueue, data, on_error=self.on_error)
        else:
            link.enqueue(data)

    @property
    def is_held(self) -> bool:
        """Inside a delivery: what is written now leaves at its release."""
        return self.held > 0

    def hold(self) -> None:
        """Start (or nest) a delivery: writes wait for the matching `release`."""
        self.held += 1

    def release(self) -> None:
        """End a delivery; the outermost release runs `on_delivered`, then writes every buffer
        that gained bytes meanwhile (peers first, then client answers)."""
        self.held -= 1
        if self.held:
            return
        if self.on_delivered is not None:
            self.held = 1  # what the hook causes joins these writes
            try:
                self.on_delivered()
            finally:
                self.held = 0
        if self._dirty_links:
            links, self._dirty_links = self._dirty_links, []
            for link in links:
                link.flush_soon.run_pending()
        if self._dirty_replies:
            conns, self._dirty_replies = self._dirty_replies, []
            for conn in conns:
                conn._reply_soon.run_pending()

    def flush_now(self) -> None:
        """Hand every peer's queued frames to the kernel now instead of at the end of this loop
        iteration: the node calls it right before a blocking fsync, so that the records a leader
        just sent travel (and its followers fsync them) while it fsyncs its own copy."""
        for link in self._peers.values():
            if link.flush_soon.pending or link.pending:
                link.flush()

    def learn_peer(self, peer_id: int, listener: Any) -> None:
        """A node we were not configured with (a broker, i.e. a Raft observer) connected and
        named its listener in the handshake: answer it there (our own outbound connection, as
        for every peer). A changed address (a restarted broker) replaces the old link."""
        if peer_id == self.node_id or not (
            isinstance(listener, list | tuple) and len(listener) == 2
            and isinstance(listener[0], str) and isinstance(listener[1], int)
        ):
            return
        host, port = listener
        link = self._peers.get(peer_id)
        if link is not None:
            if (link.host, link.port) == (host, port) or peer_id in self._static_peers:
                return
            link.close()
        self._peers[peer_id] = _PeerLink(self, peer_id, host, port)
        log.info("transport.peer_learned", peer=peer_id, host=host, port=port)

    def set_links(self, links: LinkFilter) -> None:
        self.links = links
        log.warning("transport.links_changed", **links.to_json())
        changed, self._links_changed = self._links_changed, asyncio.Event()
        changed.set()

    async def links_changed(self) -> None:
        """Returns at the next `set_links` (the admin API holds cut-off requests on this)."""
        await self._links_changed.wait()

    def connected_peers(self) -> list[int]:
        return sorted(pid for pid, link in self._peers.items() if link.protocol is not None)

    async def close(self) -> None:
        self.closing = True
        for link in self._peers.values():
            link.flush()
            link.close()
        for proto in list(self._inbound):
            if proto.transport is not None:
                proto.transport.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()

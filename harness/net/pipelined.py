"""A client's pipelined connection to one node's RPC port, shared by the native data client
(harness/client) and the native key/value client (harness/net/client.py).

Same framing as the node-to-node transport (harness/net/transport.py) with a `"client": true`
handshake. Requests are frozen dataclasses with a `request_id`; responses are matched back by
that id, so many requests are in flight on one connection, and writes are coalesced into one
`transport.write` per loop iteration. A lost connection fails every outstanding request with
`ConnectionResetError`; a request not answered within its timeout fails with `TimeoutError`.
The coalesced write and the timeouts run through harness/loop: an exception in either is a bug
of this connection, and fails every outstanding request with it (then closes the connection)
rather than leave them to time out.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack  # type: ignore[import-untyped]

from harness.loop import Soon, run_later
from harness.net.transport import PROTOCOL_VERSION, FrameError, FrameProtocol
from quorum import codec


class _Protocol(FrameProtocol):
    def __init__(self, conn: PipelinedConnection) -> None:
        super().__init__()
        self.conn = conn
        self.ack: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def on_frame(self, payload: bytes) -> None:
        if not self.ack.done():
            self.ack.set_result(msgpack.unpackb(payload, raw=False))
            return
        try:
            response: Any = codec.decode(payload)
        except codec.DecodeError as exc:
            raise FrameError(str(exc)) from None
        future = self.conn.pending.pop(getattr(response, "request_id", -1), None)
        if future is not None and not future.done():
            future.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.ack.done():
            self.ack.set_exception(ConnectionResetError("closed during handshake"))
        self.conn.on_lost()


class PipelinedConnection:
    """One client connection to `host:port`; `name` says whom in error messages."""

    def __init__(self, host: str, port: int, name: str) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self._proto: _Protocol | None = None
        self._out = bytearray()
        self._flush_soon: Soon | None = None  # set once connected (it needs the running loop)
        self.closed = False

    @property
    def is_open(self) -> bool:
        return self._proto is not None and not self._proto.closed

    async def connect(self, cluster_id: str, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        _, proto = await asyncio.wait_for(
            loop.create_connection(lambda: _Protocol(self), self.host, self.port), timeout_s
        )
        proto.write_frame(msgpack.packb(
            {"kraftlab": PROTOCOL_VERSION, "cluster_id": cluster_id, "client": True}))  # fmt: skip
        ack = await asyncio.wait_for(proto.ack, timeout_s)
        if not ack.get("ok"):
            proto.fail("handshake refused")
            raise ConnectionRefusedError(f"{self.name}: {ack.get('error')}")
        self._proto = proto
        self._flush_soon = Soon(loop, self._flush, on_error=self._broken)

    def on_lost(self) -> None:
        self._proto = None
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionResetError(f"connection to {self.name} lost"))

    def close(self) -> None:
        self.closed = True
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()

    def submit(self, message: Any, timeout_s: float | None = None) -> asyncio.Future[Any]:
        """Send `message` (a registered dataclass with a unique `request_id`); the future
        resolves with the response, or fails (ConnectionResetError, TimeoutError)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._proto is None or self._flush_soon is None:
            future.set_exception(ConnectionResetError(f"not connected to {self.name}"))
            return future
        rid = message.request_id
        self.pending[rid] = future
        payload = codec.encode(message)
        self._out += len(payload).to_bytes(4, "big")
        self._out += payload
        self._flush_soon.schedule()
        if timeout_s is not None:
            handle = run_later(loop, timeout_s * 1000, self._expire, rid, on_error=self._broken)
            future.add_done_callback(lambda _: handle.cancel())
        return future

    def _broken(self, exc: Exception) -> None:
        """A bug in this connection's deferred work: every outstanding request fails with it."""
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(exc)
        self.close()

    def _flush(self) -> None:
        proto = self._proto
        if proto is not None and proto.transport is not None and self._out:
            proto.transport.write(bytes(self._out))
        self._out.clear()

    def _expire(self, rid: int) -> None:
        future = self.pending.pop(rid, None)
        if future is not None and not future.done():
            future.set_exception(TimeoutError(f"no answer from {self.name}"))

"""The native client path: key/value requests as frames on a controller's RPC port.

The admin HTTP API is the contract for users; this is the lighter path for benchmarks and load
generators (no HTTP parsing, requests pipelined on one connection, responses batched per loop
iteration, no task per request on the server). Same framing and handshake as the node-to-node
transport (harness/transport.py), with `"client": true` instead of a node id; the server answers on
the same connection. Only the leader serves requests: any other node answers NOT_CONTROLLER with
the leader hint, and the client reconnects there.

Messages are frozen dataclasses registered with quorum.codec (only the codec knows bytes).
Semantics are those of the admin API: a write answers once committed and applied; `get` is
linearizable (read barrier); errors are Kafka error names.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import msgpack  # type: ignore[import-untyped]

from harness.transport import PROTOCOL_VERSION, FrameError, FrameProtocol
from quorum import codec


@codec.register("client.KvRequest")
@dataclass(frozen=True, slots=True)
class KvRequest:
    request_id: int
    op: str  # "put" | "cas" | "delete" | "get"
    key: str
    value: str | None = None
    expected: str | None = None  # cas: None means "the key must be absent"


@codec.register("client.KvResponse")
@dataclass(frozen=True, slots=True)
class KvResponse:
    request_id: int
    error: str  # "NONE" or a Kafka error name (CAS_FAILED, NOT_CONTROLLER, ...)
    version: int | None = None
    value: str | None = None
    leader_id: int | None = None


class ClientError(Exception):
    def __init__(self, response: KvResponse) -> None:
        self.response = response
        super().__init__(f"{response.error} (leader hint {response.leader_id})")


class _ClientProtocol(FrameProtocol):
    def __init__(self, client: NativeKvClient) -> None:
        super().__init__()
        self.client = client
        self.ack: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    def on_frame(self, payload: bytes) -> None:
        if not self.ack.done():
            self.ack.set_result(msgpack.unpackb(payload, raw=False))
            return
        try:
            response = codec.decode(payload, KvResponse)
        except codec.DecodeError as exc:
            raise FrameError(str(exc)) from None
        future = self.client.pending.pop(response.request_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.ack.done():
            self.ack.set_exception(ConnectionResetError("closed during handshake"))
        self.client.on_lost()


class NativeKvClient:
    """Pipelined key/value client for one controller's RPC port."""

    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[KvResponse]] = {}
        self._next_id = 1
        self._proto: _ClientProtocol | None = None
        self._out = bytearray()
        self._flush_scheduled = False

    async def connect(self, host: str, port: int, cluster_id: str) -> None:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(lambda: _ClientProtocol(self), host, port)
        proto.write_frame(
            msgpack.packb({"kraftlab": PROTOCOL_VERSION, "cluster_id": cluster_id, "client": True})
        )
        ack = await asyncio.wait_for(proto.ack, 5)
        if not ack.get("ok"):
            raise ConnectionRefusedError(str(ack))
        self._proto = proto

    def on_lost(self) -> None:
        self._proto = None
        for future in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionResetError("connection to the controller lost"))
        self.pending.clear()

    def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._proto is not None and self._proto.transport is not None and self._out:
            self._proto.transport.write(bytes(self._out))
        self._out.clear()

    async def call(self, op: str, key: str, value: str | None = None,
                   expected: str | None = None) -> KvResponse:
        if self._proto is None:
            raise ConnectionResetError("not connected")
        request_id = self._next_id
        self._next_id += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[KvResponse] = loop.create_future()
        self.pending[request_id] = future
        payload = codec.encode(KvRequest(request_id, op, key, value, expected))
        self._out += len(payload).to_bytes(4, "big") + payload
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        response = await future
        if response.error != "NONE":
            raise ClientError(response)
        return response

"""The native client path: key/value requests as frames on a controller's RPC port.

The admin HTTP API is the contract for users; this is the lighter path for benchmarks and load
generators (no HTTP parsing, requests pipelined on one connection, responses batched per loop
iteration, no task per request on the server). Same framing and handshake as the node-to-node
transport (harness/net/transport.py), with `"client": true` instead of a node id; the server answers on
the same connection. Only the leader serves requests: any other node answers NOT_CONTROLLER with
the leader hint, and the client reconnects there.

Messages are frozen dataclasses registered with quorum.codec (only the codec knows bytes).
Semantics are those of the admin API: a write answers once committed and applied; `get` is
linearizable (read barrier); errors are Kafka error names.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from harness.net.pipelined import PipelinedConnection
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


class NativeKvClient:
    """Pipelined key/value client for one controller's RPC port (harness/net/pipelined.py)."""

    def __init__(self) -> None:
        self._conn: PipelinedConnection | None = None
        self._next_id = 1

    async def connect(self, host: str, port: int, cluster_id: str) -> None:
        conn = PipelinedConnection(host, port, f"controller at {host}:{port}")
        await conn.connect(cluster_id, 5)
        self._conn = conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def submit(self, op: str, key: str, value: str | None = None,
               expected: str | None = None) -> asyncio.Future[KvResponse]:
        """Send one request; the future resolves with its KvResponse whatever its `error` (the
        caller checks it), or fails with ConnectionResetError when the connection is lost. No
        coroutine per request: load generators chain the next request from a done callback."""
        conn = self._conn
        if conn is None or not conn.is_open:
            raise ConnectionResetError("not connected")
        request_id = self._next_id
        self._next_id = request_id + 1
        future: asyncio.Future[KvResponse] = conn.submit(
            KvRequest(request_id, op, key, value, expected))
        return future

    async def call(self, op: str, key: str, value: str | None = None,
                   expected: str | None = None) -> KvResponse:
        """One request; raises ClientError unless its error is NONE."""
        response = await self.submit(op, key, value, expected)
        if response.error != "NONE":
            raise ClientError(response)
        return response

"""A small HTTP/1.1 load generator for the admin API's `PUT /kv/{key}` (`kraftlab bench quorum`).

Made the way wrk and etcd's benchmark tool make theirs, so that the load generator's own CPU,
which shares the 2 cores with the three controllers, stays a small part of the ceiling:
- one asyncio Protocol per keep-alive connection, one request in flight on each; the next
  request is written from `data_received` as soon as the answer is complete (no task, future or
  coroutine switch per request, no client session, no header objects);
- requests are pre-formatted bytes (request line, Host, Content-Type, Content-Length, the
  bearer token when the cluster has one: harness/admin/client.py `token_for`);
- responses are framed by Content-Length only (what aiohttp's `web.Response` sends); a response
  without it, or bytes nobody asked for, is a protocol error that closes the connection.

Honesty rules (a benchmark that counts what did not happen is worse than a slow one):
- a write counts only when its answer is `200` and the body is the JSON object the API promises
  for it (`key` equal to the key written, an integer `version`); anything else is counted under
  an error name (`HTTP 421 NOT_CONTROLLER`, `bad body`, `connection lost`, ...) and the
  connection goes on with its next write (a lost connection ends that connection's run);
- latency is from handing the request to the transport to the last byte of its answer.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import quote

from harness.admin.client import token_for

MAX_HEADER_BYTES = 64 * 1024


class HttpProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response we can frame."""


@dataclass
class LoadResult:
    """One run: the writes that counted (with their latencies when recorded), and the others
    by error name."""

    commits: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)


def parse_head(head: bytes) -> tuple[int, int | None, bool]:
    """Status line and headers (without the blank line) -> (status, Content-Length or None,
    whether the server closes the connection after this response)."""
    lines = head.split(b"\r\n")
    status_line = lines[0]
    if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12:
        raise HttpProtocolError(f"bad status line {status_line[:40]!r}")
    try:
        status = int(status_line[9:12])
    except ValueError:
        raise HttpProtocolError(f"bad status line {status_line[:40]!r}") from None
    length: int | None = None
    close = status_line.startswith(b"HTTP/1.0")
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise HttpProtocolError(f"bad header line {line[:40]!r}")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise HttpProtocolError(f"bad Content-Length {value[:20]!r}") from None
            if length < 0:
                raise HttpProtocolError(f"bad Content-Length {length}")
        elif name == b"transfer-encoding":
            raise HttpProtocolError("Transfer-Encoding is not spoken by this client")
        elif name == b"connection":
            close = value.strip().lower() == b"close"
    return status, length, close


def check_put_answer(status: int, body: bytes, key: str) -> str | None:
    """None when this is the answer to a successful `PUT /kv/{key}`, else an error name."""
    try:
        doc = json.loads(body)
    except ValueError:
        return f"HTTP {status} bad body"
    if not isinstance(doc, dict):
        return f"HTTP {status} bad body"
    if status != 200:
        return f"HTTP {status} {doc.get('error', '?')}"
    version = doc.get("version")
    if doc.get("key") != key or not isinstance(version, int) or isinstance(version, bool):
        return "HTTP 200 bad body"
    return None


class KvPutLoad:
    """`connections` keep-alive connections to one node's admin API, each writing
    `{prefix}-{connection}-{n % keys_per_connection}` with `value`, one write in flight each."""

    def __init__(self, host: str, port: int, value: str, *, prefix: str = "tput",
                 keys_per_connection: int = 16, token: str | None = None) -> None:
        self.host = host
        self.port = port
        self.prefix = prefix
        self.keys_per_connection = keys_per_connection
        self.body = json.dumps({"value": value}).encode()
        token = token if token is not None else token_for(host, port)
        auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
        self._headers_tail = (f"Host: {host}:{port}\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {len(self.body)}\r\n").encode() + auth + b"\r\n"
        self.connections: list[_Connection] = []
        self.result = LoadResult()
        self.record = True
        self._stop_at = 0.0
        self._remaining: int | None = None
        self._running = 0
        self._done: asyncio.Future[None] | None = None

    def request(self, key: str) -> bytes:
        return b"PUT /kv/" + quote(key, safe="").encode() + b" HTTP/1.1\r\n" + \
            self._headers_tail + self.body

    async def connect(self, connections: int) -> None:
        loop = asyncio.get_running_loop()
        for i in range(connections):
            _, proto = await loop.create_connection(
                lambda i=i: _Connection(self, i), self.host, self.port)  # type: ignore[misc]
            self.connections.append(proto)

    def close(self) -> None:
        for conn in self.connections:
            if conn.transport is not None:
                conn.transport.close()

    async def run(self, *, duration_s: float | None = None, writes: int | None = None,
                  record: bool = True) -> LoadResult:
        """Write until `duration_s` has passed (every connection finishes its write in flight)
        or until `writes` writes were sent; latencies recorded only when `record`."""
        if (duration_s is None) == (writes is None):
            raise ValueError("give duration_s or writes")
        self.result = LoadResult()
        self.record = record
        self._stop_at = time.perf_counter() + duration_s if duration_s is not None else float("inf")
        self._remaining = writes
        self._done = asyncio.get_running_loop().create_future()
        self._running = 0
        for conn in self.connections:
            if conn.transport is not None and not conn.transport.is_closing():
                self._running += 1
                conn.send_next()
        if self._running == 0:
            self._done.set_result(None)
        await self._done
        return self.result

    def may_send(self) -> bool:
        if time.perf_counter() >= self._stop_at:
            return False
        if self._remaining is not None:
            if self._remaining <= 0:
                return False
            self._remaining -= 1
        return True

    def finished(self) -> None:
        self._running -= 1
        if self._running == 0 and self._done is not None and not self._done.done():
            self._done.set_result(None)


class _Connection(asyncio.Protocol):
    def __init__(self, load: KvPutLoad, index: int) -> None:
        self.load = load
        self.index = index
        self.n = 0
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.key = ""
        self.sent_at = 0.0
        self.in_flight = False
        self.active = False  # counted in the load's running connections
        self.body_length: int | None = None  # known once the head of the answer is in
        self.status = 0
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def send_next(self) -> None:
        load = self.load
        self.active = True
        if self.transport is None or self.transport.is_closing() or not load.may_send():
            self._finish()
            return
        self.key = f"{load.prefix}-{self.index}-{self.n % load.keys_per_connection}"
        self.n += 1
        self.in_flight = True
        self.sent_at = time.perf_counter()
        self.transport.write(load.request(self.key))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        try:
            if self.body_length is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buf) > MAX_HEADER_BYTES:
                        raise HttpProtocolError("response head too large")
                    return
                if not self.in_flight:
                    raise HttpProtocolError("a response nobody asked for")
                self.status, length, self.close_after = parse_head(self.buf[:end])
                if length is None:
                    raise HttpProtocolError("response without Content-Length")
                self.body_length = length
                self.buf = self.buf[end + 4:]
            if len(self.buf) < self.body_length:
                return
            if len(self.buf) > self.body_length:
                raise HttpProtocolError("bytes after the response")
        except HttpProtocolError as exc:
            self._fail(f"protocol error: {exc}")
            return
        body, self.buf, self.body_length = self.buf, b"", None
        self._answered(body)

    def _answered(self, body: bytes) -> None:
        latency_ms = (time.perf_counter() - self.sent_at) * 1000
        self.in_flight = False
        result = self.load.result
        error = check_put_answer(self.status, body, self.key)
        if error is not None:
            result.errors[error] += 1
        else:
            result.commits += 1
            if self.load.record:
                result.latencies_ms.append(latency_ms)
        if self.close_after:
            self._fail("server closed the connection")
            return
        self.send_next()

    def _fail(self, error: str) -> None:
        if self.in_flight:
            self.load.result.errors[error] += 1
            self.in_flight = False
        if self.transport is not None:
            self.transport.close()
        self._finish()

    def _finish(self) -> None:
        if self.active:
            self.active = False
            self.load.finished()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.in_flight:
            self.load.result.errors["connection lost"] += 1
            self.in_flight = False
        self._finish()

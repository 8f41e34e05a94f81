"""A small blocking client for the admin HTTP API (docs/api.md), for the CLI, tests and benchmarks.

It keeps one HTTP/1.1 keep-alive connection per node. Errors come back as `AdminError` carrying the
HTTP status and the Kafka error name from the body (`{"error": NAME, "message": ...}`); transport
failures (refused, timeout) are `OSError`s, so callers can tell "the node said no" from "the node
did not answer".

Resending (docs/api.md, the admin HTTP API): a request is sent at most once unless a resend is
provably safe. A GET/HEAD that meets a broken connection is resent once (the stale keep-alive a
node closed while idle). A write (POST, PUT, PATCH, DELETE) is never resent once any of it may
have reached the node: before reusing an idle keep-alive connection the client checks that the
node has not closed it (a readable idle socket is an EOF or a reset), and opens a fresh one if it
has; a connection that breaks after the write was handed to it raises `OutcomeUnknown`, since the
node may have executed it (the same rule as harness/net/http_session.py for aiohttp). A refused
or failed connect is a plain `OSError`: nothing was sent.

Bearer token (docs/operations.md "Security"): a client sends `Authorization: Bearer <token>` when
it knows the cluster's token: given explicitly, registered for its (host, port) by
harness/launcher/cluster.py when cluster.json is loaded (so the CLI, benchmarks and Jepsen runs send it
without being told), or from $KRAFTLAB_ADMIN_TOKEN. The token is never put into an exception,
a repr or a log line.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
from typing import Any
from urllib.parse import quote

# (host, admin port) -> the cluster's bearer token (filled by harness/launcher/cluster.py).
_TOKENS: dict[tuple[str, int], str] = {}
TOKEN_ENV = "KRAFTLAB_ADMIN_TOKEN"


# Methods a broken connection may resend (RFC 9110 9.2.1 safe methods we use).
SAFE_METHODS = frozenset({"GET", "HEAD"})


def register_token(host: str, port: int, token: str) -> None:
    _TOKENS[(host, port)] = token


def token_for(host: str, port: int) -> str | None:
    """The bearer token a client of (host, port) sends: registered for it, else $KRAFTLAB_ADMIN_TOKEN."""
    return _TOKENS.get((host, port)) or os.environ.get(TOKEN_ENV) or None


class AdminError(Exception):
    """The node answered with an error (`status` HTTP code, `error` Kafka error name)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.error = self.body.get("error", "UNKNOWN_SERVER_ERROR")
        super().__init__(f"HTTP {status} {self.error}: {self.body.get('message', '')}")


class OutcomeUnknown(ConnectionError):
    """A write was handed to the connection but no answer came back (the connection broke or
    timed out): the node may or may not have executed it, and it was not resent."""

    def __init__(self, method: str, path: str, host: str, port: int, cause: OSError) -> None:
        self.method = method
        self.path = path
        self.cause = cause  # what broke the exchange (TimeoutError: no answer within the timeout)
        super().__init__(f"outcome unknown: {method} {path} was sent to {host}:{port} and no "
                         f"answer came back ({type(cause).__name__}); it may or may not have "
                         "taken effect")  # fmt: skip


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle keep-alive socket that is readable was closed (EOF or reset) by the node, or
    carries bytes no request asked for: unusable either way, and nothing was sent on it yet."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


class AdminClient:
    def __init__(
        self, host: str, port: int, timeout_s: float = 5.0, token: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._token = token or token_for(host, port)
        self._conn: http.client.HTTPConnection | None = None

    def __repr__(self) -> str:
        return f"AdminClient({self.host}:{self.port}, token={'set' if self._token else 'none'})"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; returns (status, parsed JSON or text). A GET/HEAD on a broken connection
        is resent once; a write whose connection breaks after sending raises OutcomeUnknown."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        safe = method.upper() in SAFE_METHODS
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except OSError as exc:
                self.close()
                if not safe:
                    raise OutcomeUnknown(method, path, self.host, self.port, exc) from exc
                stale = isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError
                                   | ConnectionResetError)  # fmt: skip
                if not stale or attempt == 1:
                    raise
        ctype = response.getheader("Content-Type", "")
        data: Any = json.loads(raw) if "json" in ctype and raw else raw.decode()
        return response.status, data

    def _connection(self) -> http.client.HTTPConnection:
        """A connected HTTPConnection on which nothing has been sent for the coming request: the
        kept-alive one if the node has not closed it, else a fresh one. A connect failure is a
        plain OSError (nothing sent)."""
        if self._conn is not None and self._conn.sock is not None and _closed_by_peer(self._conn.sock):
            self.close()
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        if self._conn.sock is None:
            try:
                self._conn.connect()
            except OSError:
                self.close()
                raise
        return self._conn

    def _ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.request(method, path, body)
        if status >= 400:
            raise AdminError(status, data)
        return data

    def _ok_dict(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = self._ok(method, path, body)
        if not isinstance(data, dict):
            raise AdminError(502, {"error": "UNKNOWN_SERVER_ERROR", "message": f"not a JSON object: {data!r}"})
        return data

    def get_json(self, path: str) -> Any:
        return self._ok("GET", path)

    # KV space (docs/api.md).
    def kv_get(self, key: str, consistency: str = "linearizable") -> dict[str, Any]:
        return self._ok_dict("GET", f"/kv/{quote(key, safe='')}?consistency={consistency}")

    def kv_put(self, key: str, value: str) -> dict[str, Any]:
        return self._ok_dict("PUT", f"/kv/{quote(key, safe='')}", {"value": value})

    def kv_cas(self, key: str, expected: str | None, value: str) -> dict[str, Any]:
        return self._ok_dict("POST", f"/kv/{quote(key, safe='')}/cas", {"expected": expected, "value": value})

    def kv_delete(self, key: str) -> dict[str, Any]:
        return self._ok_dict("DELETE", f"/kv/{quote(key, safe='')}")

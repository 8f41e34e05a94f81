"""A small blocking client for the admin HTTP API (docs/api.md), for the CLI, tests and benchmarks.

It keeps one HTTP/1.1 keep-alive connection per node. Errors come back as `AdminError` carrying the
HTTP status and the Kafka error name from the body (`{"error": NAME, "message": ...}`); transport
failures (refused, timeout) are `OSError`s, so callers can tell "the node said no" from "the node
did not answer".

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
from typing import Any
from urllib.parse import quote

# (host, admin port) -> the cluster's bearer token (filled by harness/launcher/cluster.py).
_TOKENS: dict[tuple[str, int], str] = {}
TOKEN_ENV = "KRAFTLAB_ADMIN_TOKEN"


def register_token(host: str, port: int, token: str) -> None:
    _TOKENS[(host, port)] = token


class AdminError(Exception):
    """The node answered with an error (`status` HTTP code, `error` Kafka error name)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.error = self.body.get("error", "UNKNOWN_SERVER_ERROR")
        super().__init__(f"HTTP {status} {self.error}: {self.body.get('message', '')}")


class AdminClient:
    def __init__(
        self, host: str, port: int, timeout_s: float = 5.0, token: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._token = token or _TOKENS.get((host, port)) or os.environ.get(TOKEN_ENV) or None
        self._conn: http.client.HTTPConnection | None = None

    def __repr__(self) -> str:
        return f"AdminClient({self.host}:{self.port}, token={'set' if self._token else 'none'})"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; returns (status, parsed JSON or text). Retries once on a stale keep-alive."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        for attempt in range(2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt == 1:
                    raise
            except OSError:
                self.close()
                raise
        ctype = response.getheader("Content-Type", "")
        data: Any = json.loads(raw) if "json" in ctype and raw else raw.decode()
        return response.status, data

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

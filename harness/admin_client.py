"""A small blocking client for the admin HTTP API (API.md), for the CLI, tests and benchmarks.

It keeps one HTTP/1.1 keep-alive connection per node. Errors come back as `AdminError` carrying the
HTTP status and the Kafka error name from the body (`{"error": NAME, "message": ...}`); transport
failures (refused, timeout) are `OSError`s, so callers can tell "the node said no" from "the node
did not answer".
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import quote


class AdminError(Exception):
    """The node answered with an error (`status` HTTP code, `error` Kafka error name)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.error = self.body.get("error", "UNKNOWN_SERVER_ERROR")
        super().__init__(f"HTTP {status} {self.error}: {self.body.get('message', '')}")


class AdminClient:
    def __init__(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request; returns (status, parsed JSON or text). Retries once on a stale keep-alive."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
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

    # KV space (API.md).
    def kv_get(self, key: str, consistency: str = "linearizable") -> dict[str, Any]:
        return self._ok_dict("GET", f"/kv/{quote(key, safe='')}?consistency={consistency}")

    def kv_put(self, key: str, value: str) -> dict[str, Any]:
        return self._ok_dict("PUT", f"/kv/{quote(key, safe='')}", {"value": value})

    def kv_cas(self, key: str, expected: str | None, value: str) -> dict[str, Any]:
        return self._ok_dict("POST", f"/kv/{quote(key, safe='')}/cas", {"expected": expected, "value": value})

    def kv_delete(self, key: str) -> dict[str, Any]:
        return self._ok_dict("DELETE", f"/kv/{quote(key, safe='')}")

"""The HTTP edge every admin route module shares (server.py, topics.py, records.py): JSON
answers, the error body, the 400 for bad input, the mapping of exceptions to answers (run by the
one middleware, harness/admin/edge.py), and the readers of JSON bodies and values.

Rules (docs/api.md):
- Errors are `{"error": KAFKA_NAME, "message": ..., hints}`.
- Bad input (JSON, fields, query values) is 400 INVALID_REQUEST (`BadRequest`), never a 500; an
  unexpected exception is logged and answered as 500 UNKNOWN_SERVER_ERROR (a bug, not a contract).
- A value is given as a UTF-8 string `name` or as base64 bytes `name_b64`, never both.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger()

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadRequest(Exception):
    """400 INVALID_REQUEST with this message."""


def json_answer(data: Any, status: int = 200) -> web.Response:
    """`web.json_response` with the same bytes and Content-Type (`application/json;
    charset=utf-8`), without its text-to-bytes round trip."""
    return web.Response(body=json.dumps(data).encode(), status=status,
                        content_type="application/json", charset="utf-8")


def kv_write_answer(key: str, version: int | None, offset: int) -> web.Response:
    """The body of every successful kv write, `{"key": ..., "version": ..., "offset": ...}`,
    byte for byte what `json.dumps` of that dict gives (tests/admin/test_edge.py), formatted
    without building the dict: json.dumps of a dict sets up an encoder on every call, which
    cost as much as the rest of the answer."""
    body = b'{"key": %s, "version": %s, "offset": %d}' % (
        json.dumps(key).encode(), b"null" if version is None else b"%d" % version, offset)
    return web.Response(body=body, content_type="application/json", charset="utf-8")


def error_response(status: int, error: str, message: str, **hints: Any) -> web.Response:
    return json_answer({"error": error, "message": message, **hints}, status)


def error_answer(request: web.Request, exc: Exception) -> web.Response | None:
    """The answer for an exception out of a route (None: re-raise it, e.g. a redirect), called
    in the `except` block that caught it. BadRequest -> 400 INVALID_REQUEST; aiohttp's own 4xx
    (unknown route or method, a body over client_max_size) named in the house shape; anything
    else is a bug: logged with its traceback, 500."""
    if isinstance(exc, BadRequest):
        return error_response(400, "INVALID_REQUEST", str(exc))
    if isinstance(exc, web.HTTPException):
        if exc.status >= 400 and exc.content_type != "application/json":
            name = "UNKNOWN_ROUTE" if exc.status in (404, 405) else "INVALID_REQUEST"
            if exc.status == 413:  # a body over client_max_size: named as an oversized batch is
                name = "MESSAGE_TOO_LARGE"
            return error_response(exc.status, name, exc.reason)
        return None
    # The HTTP edge: a bug becomes a 500 with a log line, not a hang.
    log.exception("admin.unhandled_error", path=request.path, method=request.method)
    return error_response(500, "UNKNOWN_SERVER_ERROR", f"{type(exc).__name__}: {exc}")


def parse_json_object(body: bytes, charset: str | None = None) -> dict[str, Any]:
    """A request body that must be a JSON object (decoded as aiohttp's `request.json()` does:
    the Content-Type's charset, else UTF-8)."""
    try:
        parsed = json.loads(body.decode(charset or "utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, LookupError):
        raise BadRequest("body is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise BadRequest("body must be a JSON object")
    return parsed


async def read_json_object(request: web.Request) -> dict[str, Any]:
    return parse_json_object(await request.read(), request.charset)


def value_field(body: dict[str, Any], name: str, *, nullable: bool = False) -> str | bytes | None:
    """`name` as a UTF-8 string, or `name_b64` as bytes (docs/api.md): one of them, never both
    (the OpenAPI document says `oneOf`; which one would win is not the client's guess to make)."""
    if name in body and f"{name}_b64" in body:
        raise BadRequest(f"give '{name}' or '{name}_b64', not both")
    if name in body:
        value = body[name]
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise BadRequest(f"'{name}' must be a string" + (" or null" if nullable else ""))
        return value
    b64 = body.get(f"{name}_b64")
    if b64 is not None:
        if not isinstance(b64, str):
            raise BadRequest(f"'{name}_b64' must be a base64 string")
        try:
            return base64.b64decode(b64, validate=True)
        except ValueError:
            raise BadRequest(f"'{name}_b64' is not valid base64") from None
    if nullable:
        raise BadRequest(f"missing field '{name}' (use null for 'absent')")
    raise BadRequest(f"missing field '{name}'")


def encode_value(value: str | bytes) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"value_b64": base64.b64encode(value).decode()}
    return {"value": value}

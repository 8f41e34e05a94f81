"""Bearer-token protection of the admin API's mutating routes (docs/operations.md "Security").

Rule: a node whose admin listener is bound to 127.0.0.1 serves everyone on that host (the
launcher's default, and the only address the team's tests use); bound to any other address, or
with `kraftlab.admin.require.token=true`, every request that is not a read (any method but GET,
HEAD, OPTIONS: topic create/delete, kv writes, elections, produce, ISR overrides, nemesis links)
must carry `Authorization: Bearer <token>`, the cluster's token from DIR/admin-token. Reads stay
open: status, describe and /metrics are what an operator's dashboards poll.

Without it, or with another token: 401 `{"error": "SASL_AUTHENTICATION_FAILED", ...}` (Kafka's
error for failed authentication, code 58) and a `WWW-Authenticate: Bearer` header (RFC 6750).

Invariants:
- The token is compared in constant time (hmac.compare_digest) and never logged, echoed in an
  error, or put into a log event (a rejected request logs method, path and remote only).
- A follower that forwards a write to the active controller adds its own token
  (harness/admin/forward.py), so a client's request is authenticated once, by the node it reached.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger()
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
AUTH_ERROR = "SASL_AUTHENTICATION_FAILED"


def bearer(token: str) -> dict[str, str]:
    """The header that authenticates a request with `token`."""
    return {"Authorization": f"Bearer {token}"}


def is_authorized(header: str | None, token: str) -> bool:
    if header is None:
        return False
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


def unauthorized(request: web.BaseRequest) -> web.Response:
    """The 401 for a write without the token (logged without it)."""
    log.warning("admin.unauthorized", method=request.method, path=request.path,
                remote=request.remote, had_header="Authorization" in request.headers)
    return web.json_response(
        {"error": AUTH_ERROR,
         "message": "this admin API requires 'Authorization: Bearer <token>' on writes; "
                    "the token is in the cluster directory's admin-token file"},
        status=401, headers={"WWW-Authenticate": 'Bearer realm="kraftlab"'},
    )


def auth_middleware(token: str) -> Any:
    """Middleware that requires the token on every non-read request (the admin API checks it in
    its one middleware, harness/admin/edge.py; the UI server uses this one)."""

    @web.middleware
    async def require_token(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method in READ_METHODS or is_authorized(
            request.headers.get("Authorization"), token
        ):
            return await handler(request)
        return unauthorized(request)

    return require_token

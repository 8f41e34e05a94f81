"""The one middleware every admin request passes through (server.py `build_app`): the link
filter, the metrics timer, the bearer token and the mapping of errors, in that order from the
outside in.

One middleware rather than four: aiohttp runs each middleware as a coroutine of its own per
request, and on the leader's `PUT /kv/{key}` path the four layers cost about as much as the
route itself (docs/benchmarks.md, "Metadata quorum"). What each layer promised still holds:
- link filter (the nemesis, harness/net/transport.py LinkFilter): a request from a cut-off
  source is never executed; it is held, like a packet lost in a partition, until the filter
  changes (or LOST_REQUEST_HOLD_S passes), then its connection is aborted unanswered; an answer
  ready while its source is cut off is lost the same way. A forwarded request
  (FORWARDED_HEADER names the node that forwarded it) is peer traffic, cut iff that node is in
  `drop`; any other request is a client's, cut iff `drop_clients`. /nemesis/* is never cut: it
  is the operator's out-of-band channel (Jepsen's ssh + iptables), so a node can always be
  healed. With no filter set (`drop` empty, `drop_clients` off) nothing is looked at;
- metrics: every request that is not cut off before it runs is timed under its route template
  (harness/runtime/metrics.py `observe_request`), errors and 401s included;
- token (harness/admin/auth.py): when the node requires it, a request that is not a read needs
  `Authorization: Bearer <token>`, else 401 SASL_AUTHENTICATION_FAILED;
- errors (harness/admin/http.py `error_answer`): BadRequest is 400 INVALID_REQUEST, aiohttp's
  own 4xx are named (UNKNOWN_ROUTE, MESSAGE_TOO_LARGE), an unexpected exception is logged and
  answered 500 UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from harness.admin.auth import READ_METHODS, is_authorized, unauthorized
from harness.admin.context import AdminNode
from harness.admin.forward import FORWARDED_HEADER
from harness.admin.http import Handler, error_answer
from harness.net.transport import LinkFilter

LOST_REQUEST_HOLD_S = 120.0


def filters_clients(links: LinkFilter) -> bool:
    """Whether a request may be cut off at all under this filter."""
    return bool(links.drop) or links.drop_clients


def is_cut_off(request: web.BaseRequest, links: LinkFilter) -> bool:
    if request.path.startswith("/nemesis/"):
        return False
    forwarded_by = request.headers.get(FORWARDED_HEADER, "")
    if forwarded_by.isdigit():
        return int(forwarded_by) in links.drop
    return links.drop_clients


def edge_middleware(node: AdminNode, token: str | None) -> Any:
    """The middleware for `node`; `token`: required on writes when not None."""
    transport = node.transport
    observe = node.metrics.observe_request

    async def lose(request: web.Request) -> web.StreamResponse:
        """Hold a cut-off request until its source is reachable again (or the hold passes),
        then abort its connection unanswered."""
        try:
            async with asyncio.timeout(LOST_REQUEST_HOLD_S):
                while is_cut_off(request, transport.links):
                    await transport.links_changed()
        except TimeoutError:
            pass
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # nothing is written on the aborted connection

    @web.middleware
    async def edge(request: web.Request, handler: Handler) -> web.StreamResponse:
        links = transport.links
        if filters_clients(links) and is_cut_off(request, links):
            return await lose(request)
        started = time.perf_counter()
        try:
            if token is not None and request.method not in READ_METHODS and not is_authorized(
                request.headers.get("Authorization"), token
            ):
                response: web.StreamResponse = unauthorized(request)
            else:
                response = await handler(request)
        except Exception as exc:
            answer = error_answer(request, exc)
            if answer is None:
                raise
            response = answer
        finally:
            observe(request, started)
        links = transport.links
        if filters_clients(links) and is_cut_off(request, links):
            return await lose(request)
        return response

    return edge

"""Answering as a follower (server.py, topics.py): forward to the active controller's admin API,
or say who leads.

Rules (docs/api.md):
- A follower forwards writes and linearizable reads to the active controller, one hop only: a
  forwarded request (FORWARDED_HEADER names the node that forwarded it) that meets a non-leader
  gets 421 NOT_CONTROLLER with the leader hint, never a loop.
- With no known leader: 503 LEADER_NOT_AVAILABLE with what this node knows (epoch, voters).
- A forwarded write whose connection was made but whose answer was lost is 504
  REQUEST_TIMED_OUT with `"indeterminate": true`: it may have reached the leader.
- A forwarded request carries this node's admin token (the leader may require it, auth.py).
- A leader whose process has not answered the liveness probe for 4 ping intervals is not
  forwarded to: 503 LEADER_NOT_AVAILABLE at once (it is hung, and an election follows), rather
  than a request that waits out the client's timeout.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from harness.admin.auth import bearer
from harness.admin.context import AdminNode
from harness.admin.http import error_response
from harness.net.http_session import no_resend_session
from harness.runtime.context import NotLeaderError, OutcomeUnknownError

FORWARDED_HEADER = "X-Kraftlab-Forwarded-By"


def forwarding_session() -> aiohttp.ClientSession:
    """The session a follower forwards with: a fresh connection per request, and never a
    resend. aiohttp resends a PUT or DELETE once when the connection breaks after it was sent;
    the leader may have executed the first send, and the resend's answer (a refused connection,
    or LEADER_NOT_AVAILABLE from a node that lost leadership meanwhile) would be relayed as a
    definite failure (harness/net/http_session.py). Found by the Jepsen kv workload: a PUT
    answered 503 LEADER_NOT_AVAILABLE was committed."""
    return no_resend_session(connector=aiohttp.TCPConnector(limit=256, force_close=True))


class LeaderForwarding:
    """The follower's answers of one node. `session` is opened and closed with the app
    (server.py build_app)."""

    def __init__(self, node: AdminNode) -> None:
        self.node = node
        self.session: aiohttp.ClientSession | None = None

    def no_leader(self) -> web.Response:
        node = self.node
        return error_response(
            503,
            "LEADER_NOT_AVAILABLE",
            "no active controller is known; retry after an election",
            leader_id=None,
            leader_epoch=node.epoch,
            role=node.role,
            current_voters=sorted(node.config.voters),
        )

    async def forward(self, request: web.Request, body: bytes | None = None) -> web.StreamResponse:
        """Send this request to the leader's admin API and relay its answer verbatim."""
        node = self.node
        leader = node.leader_id
        if leader is None or leader == node.node_id:
            return self.no_leader()
        if FORWARDED_HEADER in request.headers:
            return error_response(
                421, "NOT_CONTROLLER", f"node {node.node_id} is not the active controller",
                leader=leader, leader_epoch=node.epoch,
            )
        silent_ms = node.leader_silent_ms()
        if silent_ms > 0 and silent_ms >= 4 * node.config.liveness_interval_ms:
            # Its process does not answer pings (harness/net/liveness.py): a forwarded request
            # would wait out the client's timeout there. Say so now; an election is coming.
            return error_response(
                503, "LEADER_NOT_AVAILABLE",
                f"leader {leader} has not answered liveness pings for {silent_ms} ms",
                leader_id=None, leader_epoch=node.epoch,
            )
        target = node.config.admin_listeners.get(leader)
        if target is None:
            # A controller added after this node's config was written (KIP-853): its admin
            # address is not known here; the client asks the leader directly (cluster.json).
            return error_response(
                421, "NOT_CONTROLLER", f"node {node.node_id} is not the active controller and "
                f"does not know leader {leader}'s admin address", leader=leader,
                leader_epoch=node.epoch,
            )
        url = f"http://{target.host}:{target.port}{request.rel_url}"
        if body is None and request.can_read_body:
            body = await request.read()
        assert self.session is not None
        timeout = aiohttp.ClientTimeout(total=node.config.request_timeout_ms / 1000 + 1)
        headers = {FORWARDED_HEADER: str(node.node_id), "Content-Type": "application/json"}
        if node.admin_token is not None:
            headers.update(bearer(node.admin_token))  # the leader may require it (auth.py)
        try:
            async with self.session.request(
                request.method, url, data=body, timeout=timeout, headers=headers,
            ) as resp:
                payload = await resp.read()
                return web.Response(
                    body=payload, status=resp.status, content_type=resp.content_type
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            if request.method in ("GET", "HEAD") or isinstance(exc, aiohttp.ClientConnectorError):
                return error_response(
                    503, "LEADER_NOT_AVAILABLE", f"forwarding to leader {leader} failed: {exc!r}",
                    leader_id=leader, leader_epoch=node.epoch,
                )
            # Not a read and the connection was made: the write may have reached the leader
            # before the failure, so its outcome is unknown, never "did not happen" (found by
            # the Jepsen kv workload under kill-leader).
            return error_response(
                504, "REQUEST_TIMED_OUT",
                f"forwarding to leader {leader} failed, outcome unknown: {exc!r}",
                indeterminate=True, leader_id=leader, leader_epoch=node.epoch,
            )

    def leader_error(self, exc: NotLeaderError) -> web.Response:
        if exc.leader_id is None:
            return self.no_leader()
        return error_response(
            421, "NOT_CONTROLLER", str(exc), leader=exc.leader_id, leader_epoch=exc.epoch
        )

    @staticmethod
    def unknown_outcome(exc: OutcomeUnknownError) -> web.Response:
        return error_response(504, "REQUEST_TIMED_OUT", str(exc), indeterminate=True)

"""aiohttp client sessions that never resend a request.

aiohttp resends an idempotent request (GET, HEAD, PUT, DELETE, ...) once when the connection
breaks after it was sent (RFC 9112 9.3.1; aiohttp's ClientSession._request, 3.9 and later), even
on a fresh connection. For a write that is wrong wherever the first send may have been executed:
the caller sees the resend's answer (a refused connection, or a node that has since lost
leadership saying LEADER_NOT_AVAILABLE) and would report "did not happen" for a write that
committed. Two places must know the difference: the Jepsen workloads' client (harness/jepsen)
and a follower's forwarding of a write to the active controller (harness/admin/forward.py).
"""

from __future__ import annotations

from typing import Any

import aiohttp


def disable_idempotent_retry(session: aiohttp.ClientSession) -> None:
    """Make a broken connection surface as an error instead of a silent resend.

    The switch is private (aiohttp's own test client flips it), so refuse to run rather than
    answer a possibly executed write with a resend's definite error if it ever disappears.
    """
    if not hasattr(session, "_retry_connection"):
        raise RuntimeError("this aiohttp cannot disable its retry of idempotent requests; "
                           "a refused resend would be reported as a definite failure")
    session._retry_connection = False


def no_resend_session(**kwargs: Any) -> aiohttp.ClientSession:
    """An aiohttp.ClientSession(**kwargs) that never resends (call inside the event loop)."""
    session = aiohttp.ClientSession(**kwargs)
    disable_idempotent_retry(session)
    return session

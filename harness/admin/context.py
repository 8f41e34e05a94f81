"""The node as the admin API sees it (server.py, topics.py, records.py, forward.py): the broker
node's context (harness/runtime/broker.py `BrokerNode`) plus what only the HTTP API asks for,
its role and token, proposals and read barriers that wait, the active controller, the status
views and the metrics registry. A protocol, so this package never imports the node class
(harness/node/__main__.py hands it the node).
"""

from __future__ import annotations

from typing import Any, Protocol

from harness.runtime.broker import BrokerNode
from harness.runtime.controller_rpc import ActiveController
from harness.runtime.metrics import NodeMetrics
from quorum.metadata.image import ApplyResult


class AdminNode(BrokerNode, Protocol):
    @property
    def role(self) -> str:
        """The Raft role name (leader, follower, candidate, ...)."""
        ...

    @property
    def admin_token(self) -> str | None: ...

    @property
    def active(self) -> ActiveController | None:
        """The active-controller driver on a controller (None on a broker)."""
        ...

    @property
    def metrics(self) -> NodeMetrics: ...

    async def propose(self, record: Any) -> ApplyResult:
        """Commit one record. Raises NotLeaderError, OutcomeUnknownError (runtime/context.py)."""
        ...

    async def read_barrier(self) -> None:
        """Return once a linearizable read may be served from the image (same errors)."""
        ...

    def quorum_status(self) -> dict[str, Any]: ...

    def leader_silent_ms(self) -> int:
        """How long the leader has left a liveness ping unanswered (0: answering, or no probe)."""
        ...

    def quorum_replication(self) -> list[dict[str, Any]]: ...

"""What the runtime's helpers may use of the node they serve: small protocols, not the node class.

The node (harness/runtime/node.py `ControllerNode`) owns the Raft core, the metadata log, the
image and the transport. The helpers around it (the broker lifecycle, the replica manager, the
active controller and its RPC server, the native client paths, the status views) and the listeners
composed beside it (harness/kafka, harness/admin) see it only as a `NodeContext`: a clock, the
metadata image and who leads, a way to send to a peer, to propose a record and to start a read
barrier, and a way to stop the process on a broken invariant. A helper that needs more declares
it beside itself, extending `NodeContext` (`BrokerNode` in broker.py, `ScrapedNode` in
metrics.py, `AdminNode` in harness/admin/context.py), so what each one reaches is written down.

Rules:
- This module imports no helper, not even under TYPE_CHECKING: every helper may import it, and
  no helper imports node.py (the node imports them, never the other way). The one runtime module
  it names, clock.py, is a leaf: it imports nothing of the runtime.
- Only public members: `crash` is the one way a helper stops the process (a broken
  invariant is a crash in a real node).
- The node's errors live here, so helpers and listeners catch them without importing the node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from harness.drive.broker_session import BrokerSession
from harness.net.transport import Transport
from harness.runtime.clock import NodeClock
from harness.runtime.config import NodeConfig
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.raft import QuorumStatus


class NotLeaderError(Exception):
    """This node is not the active controller (leader_id: the known leader, or None)."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        self.leader_id = leader_id
        self.epoch = epoch
        super().__init__(f"not the active controller (leader {leader_id}, epoch {epoch})")


class OutcomeUnknownError(Exception):
    """A proposal or read barrier whose outcome is unknown (leadership lost, timeout)."""


class VoterChangeError(Exception):
    """A voter change (KIP-853) was refused or not committed: Kafka's error name and why."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}" if message else error)
        self.error = error
        self.message = message


class ResultSink(Protocol):
    """Where a proposal's outcome goes: an asyncio.Future, or an answer written as soon as the
    record is applied (NodeContext.submit_to)."""

    def done(self) -> bool: ...

    def set_result(self, result: ApplyResult, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


class NodeContext(Protocol):
    """One node process as its helpers see it, on its running event loop.

    Times: `now_ms()` is the loop clock the cores run on; `wall_ms(mono_ms)` turns one of its
    readings into Unix epoch ms for display (KIP-836 timestamps)."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> NodeConfig: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def image(self) -> MetadataImage:
        """The metadata image, applied up to the committed offset this node knows."""
        ...

    @property
    def epoch(self) -> int: ...

    @property
    def leader_id(self) -> int | None: ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def clock(self) -> NodeClock:
        """The process's clock (clock.py): `now_ms` and `wall_ms` read it; core timers are
        armed on it (a harness/loop Timer on this clock) so a skewed clock moves them too."""
        ...

    def now_ms(self) -> int: ...

    def wall_ms(self, mono_ms: int) -> int: ...

    def raft_status(self) -> QuorumStatus:
        """The metadata quorum as this node's Raft core sees it (DescribeQuorum)."""
        ...

    def send(self, to: int, message: Any) -> None:
        """One message to a peer over the node transport (queued, never blocking)."""
        ...

    def submit(self, record: Any) -> asyncio.Future[ApplyResult]:
        """Propose one metadata record; resolves once applied. Raises NotLeaderError."""
        ...

    def submit_to(self, record: Any, sink: ResultSink) -> None:
        """`submit`, completing `sink` synchronously once applied (or failed), without a
        future and its extra loop iteration. Raises NotLeaderError."""
        ...

    def begin_read(self) -> asyncio.Future[int]:
        """Start a read barrier; resolves once a linearizable read may be served from the
        image. Raises NotLeaderError."""
        ...

    def crash(self, exc: BaseException) -> NoReturn:
        """A bug or a broken invariant: log it and stop the process at once."""
        ...


class BrokerLink(Protocol):
    """The broker lifecycle (broker.py) as its replica manager uses it: the session's
    registration and broker epoch, and requests to the active controller."""

    @property
    def session(self) -> BrokerSession: ...

    @property
    def broker_epoch(self) -> int: ...

    def send_controller(self, request: Any, callback: Callable[[Any], None]) -> None: ...

    async def call_controller(self, request: Any) -> Any: ...

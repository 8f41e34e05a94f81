"""Controller RPCs between nodes: the envelopes (harness/drive/controller_rpc.py, shared with the
simulator) carry quorum.controller requests (broker registration, heartbeats, AlterPartition, ...)
over the node transport; this module forwards them and drives the active controller that
answers them on the Raft leader.

Wire: `ControllerRpcRequest(request_id, request, origin)` travels on the sender's outbound
connection; the answer is `ControllerRpcResponse(request_id, response)` sent back to `origin`.
A follower controller forwards a request once to the leader it knows (with its own request id) and
relays the answer; a forwarded request that meets another non-leader is answered NOT_CONTROLLER
(one hop, never a loop), as the admin API does for HTTP.

ActiveController drives the ControllerService (quorum/controller/service.py) exactly as its
contract says:
- created only when this node leads AND its image applied this epoch's LeaderChange (then the
  image holds everything earlier leaders committed; docs/controller.md);
- one proposal at a time: the records of one operation are submitted as one batch, and
  `committed(results)` runs only once all of them are applied; then `pump` again;
- pumped after every submit and every commit, and by a timer at `next_deadline_ms()`;
- on leadership loss (or a proposal that fails) `failed()` answers every waiting caller
  NOT_CONTROLLER (retriable) and the service is dropped; a new one is built next epoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import structlog

from harness.drive.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.runtime.context import NodeContext
from quorum.controller import (
    ControllerConfig,
    ControllerRequest,
    ControllerResponse,
    ControllerService,
    Propose,
    Respond,
    ServiceOutput,
)
from quorum.controller.service import error_response
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult
from quorum.metadata.records import ELIGIBLE_LEADER_REPLICAS_VERSION

log = structlog.get_logger()


def controller_config(node: NodeContext) -> ControllerConfig:
    c = node.config
    elr = bool(c.eligible_leader_replicas_enable)
    return ControllerConfig(
        broker_heartbeat_interval_ms=c.broker_heartbeat_interval_ms,
        broker_session_timeout_ms=c.broker_session_timeout_ms,
        leader_imbalance_check_interval_ms=c.leader_imbalance_check_interval_ms,
        auto_leader_rebalance_enable=bool(c.auto_leader_rebalance_enable),
        # eligible.leader.replicas.enable: finalized in the log by the first active controller,
        # honoured from the log by every controller after it (KIP-966).
        eligible_leader_replicas_enable=elr,
        bootstrap_features=((ELIGIBLE_LEADER_REPLICAS_VERSION, 1),) if elr else (),
    )


class ActiveController:
    """The ControllerService of one leadership epoch, driven on the node's event loop."""

    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.loop = node.loop
        self.service: ControllerService | None = None
        self.service_epoch = -1
        # Requests that arrived while this leader's image had not yet applied its LeaderChange.
        self._early: list[tuple[Hashable, ControllerRequest]] = []
        self._callers: dict[Hashable, asyncio.Future[ControllerResponse]] = {}
        self._next_token = 0
        self._timer: asyncio.TimerHandle | None = None
        self._in_flight: list[asyncio.Future[ApplyResult]] = []

    # --- callers ----------------------------------------------------------------------------

    def call(self, request: ControllerRequest) -> asyncio.Future[ControllerResponse]:
        """Run one controller request here (this node must lead). The future resolves with the
        response after its records are committed and applied."""
        future: asyncio.Future[ControllerResponse] = self.loop.create_future()
        self._next_token += 1
        token = self._next_token
        self._callers[token] = future
        if self.service is None:
            self._early.append((token, request))
        else:
            # The receipt time: a heartbeat counts as contact from now (KAFKA-15019).
            self.service.submit(token, request, self.node.now_ms())
            self._pump()
        return future

    # --- leadership ---------------------------------------------------------------------------

    def maybe_start(self) -> None:
        """After applying entries: build the service once this epoch's LeaderChange is applied."""
        node = self.node
        if self.service is not None or not node.is_leader:
            return
        image = node.image
        if image.controller_epoch != node.epoch or image.controller_id != node.node_id:
            return
        self.service = ControllerService(
            controller_config(node), image=image, now_ms=node.now_ms()
        )
        self.service_epoch = node.epoch
        log.info("controller.activated", controller_epoch=node.epoch)
        early, self._early = self._early, []
        for token, request in early:
            self.service.submit(token, request)
        self._pump()

    def stop(self, reason: str) -> None:
        """Leadership lost: NOT_CONTROLLER to everyone waiting, drop the service."""
        service, self.service = self.service, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._in_flight = []
        outputs: list[Respond] = service.failed() if service is not None else []
        for token, request in self._early:
            outputs.append(Respond(token, error_response(request, Errors.NOT_CONTROLLER)))
        self._early = []
        for out in outputs:
            self._answer(out.token, out.response)
        if service is not None:
            log.info("controller.deactivated", reason=reason)

    # --- the service loop ---------------------------------------------------------------------

    def _pump(self) -> None:
        service = self.service
        if service is None:
            return
        self._run(service.pump(self.node.image, self.node.now_ms()))
        self._arm_timer()

    def _run(self, outputs: list[ServiceOutput]) -> None:
        for out in outputs:
            match out:
                case Respond(token=token, response=response):
                    self._answer(token, response)
                case Propose(records=records):
                    self._propose(records)

    def _propose(self, records: tuple[Any, ...]) -> None:
        node = self.node
        service = self.service
        try:
            futures = [node.submit(record) for record in records]
        except Exception as exc:  # NotLeaderError: leadership moved under us
            self.stop(f"proposal refused: {exc}")
            return
        self._in_flight = futures
        gathered = asyncio.gather(*futures, return_exceptions=True)
        gathered.add_done_callback(lambda f: self._proposal_done(service, futures, f))

    def _proposal_done(
        self, service: ControllerService | None, futures: list[Any], gathered: asyncio.Future[Any]
    ) -> None:
        if service is not self.service or futures is not self._in_flight:
            return  # a stale proposal of a service already failed
        self._in_flight = []
        results = gathered.result()
        if any(isinstance(r, BaseException) for r in results):
            self.stop("proposal not committed")
            return
        assert self.service is not None
        self._run(self.service.committed(results))
        self._pump()

    def _answer(self, token: Hashable, response: ControllerResponse) -> None:
        future = self._callers.pop(token, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        service = self.service
        if service is None or service.busy:
            return  # pumped again when the proposal completes
        delay_s = max(0.0, (service.next_deadline_ms() - self.node.now_ms()) / 1000)
        self._timer = self.loop.call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()


class ControllerRpcServer:
    """Answers ControllerRpcRequests arriving on the transport (controllers only)."""

    def __init__(self, node: NodeContext, active: ActiveController) -> None:
        self.node = node
        self.active = active
        self._next_id = 0
        self._forwarded: dict[int, tuple[int, int]] = {}  # our id -> (origin, their id)

    def on_request(self, src: int, message: ControllerRpcRequest) -> None:
        node = self.node
        if node.is_leader:
            future = self.active.call(message.request)
            future.add_done_callback(
                lambda f: self._reply(message.origin, message.request_id, f.result())
            )
            return
        leader = node.leader_id
        if leader is None or message.forwarded or leader == node.node_id:
            response = error_response(message.request, Errors.NOT_CONTROLLER)
            self._reply(message.origin, message.request_id, response)
            return
        # Forward once to the active controller (the answer comes back to us, then to origin).
        self._next_id += 1
        self._forwarded[self._next_id] = (message.origin, message.request_id)
        node.send(leader, ControllerRpcRequest(self._next_id, message.request, node.node_id, True))
        self.node.loop.call_later(
            node.config.request_timeout_ms / 1000, self._forwarded.pop, self._next_id, None
        )

    def on_response(self, message: ControllerRpcResponse) -> bool:
        """A forwarded request's answer: relay it. False if it is not ours (a client's)."""
        entry = self._forwarded.pop(message.request_id, None)
        if entry is None:
            return False
        origin, request_id = entry
        self.node.send(origin, ControllerRpcResponse(request_id, message.response, message.leader_id))
        return True

    def _reply(self, origin: int, request_id: int, response: ControllerResponse) -> None:
        leader = self.node.leader_id
        self.node.send(origin, ControllerRpcResponse(request_id, response, -1 if leader is None else leader))

"""Controller RPCs between nodes: the envelopes (harness/drive/controller_rpc.py, shared with the
simulator) carry quorum.controller requests (broker registration, heartbeats, AlterPartition, ...)
over the node transport; this module forwards them and drives the active controller that
answers them on the Raft leader.

Wire: `ControllerRpcRequest(request_id, request, origin)` travels on the sender's outbound
connection; the answer is `ControllerRpcResponse(request_id, response)` sent back to `origin`.
A follower controller forwards a request once to the leader it knows (with its own request id) and
relays the answer; a forwarded request that meets another non-leader is answered NOT_CONTROLLER
(one hop, never a loop), as the admin API does for HTTP.

ActiveController drives the ControllerService (quorum/controller/service.py) through the
ControllerSeat both drivers share (harness/drive/active_controller.py, which states the contract):
- started from `maybe_start` after every apply, once this node leads AND its image applied this
  epoch's LeaderChange (docs/controller.md);
- a proposal's records go to the Raft driver one future each; `committed(results)` runs once all
  of them are applied; then `pump` again;
- pumped after every submit and every commit, and by a timer at the seat's deadline (a
  harness/loop Timer on the loop's own clock, armed for the time left; its errors crash the node);
- on leadership loss (or a proposal that fails) `stop()` answers every waiting caller, the early
  ones included, NOT_CONTROLLER (retriable) and drops the service; a new one is built next epoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import structlog

from harness.drive.active_controller import ControllerSeat, run_outputs
from harness.drive.controller_rpc import (
    ControllerRpcRequest,
    ControllerRpcResponse,
    DescribeQuorumAnswer,
    DescribeQuorumCall,
)
from harness.loop import LoopTime, Timer, run_later
from harness.runtime.context import NodeContext
from harness.runtime.status import quorum_replication
from quorum.controller import (
    ControllerConfig,
    ControllerRequest,
    ControllerResponse,
    ControllerService,
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
        self.seat = ControllerSeat(controller_config(node))
        self._callers: dict[Hashable, asyncio.Future[ControllerResponse]] = {}
        self._next_token = 0
        self._timer = Timer(LoopTime(self.loop), self._on_timer, on_error=node.crash)
        self._in_flight: list[asyncio.Future[ApplyResult]] = []

    @property
    def service(self) -> ControllerService | None:
        return self.seat.service

    @property
    def service_epoch(self) -> int:
        return self.seat.service_epoch

    # --- callers ----------------------------------------------------------------------------

    def call(self, request: ControllerRequest) -> asyncio.Future[ControllerResponse]:
        """Run one controller request here (this node must lead). The future resolves with the
        response after its records are committed and applied."""
        future: asyncio.Future[ControllerResponse] = self.loop.create_future()
        self._next_token += 1
        token = self._next_token
        self._callers[token] = future
        # The receipt time: a heartbeat counts as contact from now (KAFKA-15019).
        if self.seat.submit(token, request, self.node.now_ms()):
            self._pump()
        return future

    # --- leadership ---------------------------------------------------------------------------

    def maybe_start(self) -> None:
        """After applying entries: build the service once this epoch's LeaderChange is applied."""
        if self.seat.service is not None:
            return  # built already (asked after every apply: the usual answer)
        node = self.node
        if self.seat.maybe_start(is_leader=node.is_leader, epoch=node.epoch, node_id=node.node_id,
                                 image=node.image, now_ms=node.now_ms()):  # fmt: skip
            log.info("controller.activated", controller_epoch=node.epoch)
            self._pump()

    def stop(self, reason: str) -> None:
        """Leadership lost: NOT_CONTROLLER to everyone waiting, drop the service."""
        active = self.seat.service is not None
        self._timer.cancel()
        self._in_flight = []
        for out in self.seat.fail(answer_early=True):
            self._answer(out.token, out.response)
        if active:
            log.info("controller.deactivated", reason=reason)

    # --- the service loop ---------------------------------------------------------------------

    def _pump(self) -> None:
        if self.seat.service is None:
            return
        self._run(self.seat.pump(self.node.image, self.node.now_ms()))
        self._arm_timer()

    def _run(self, outputs: list[ServiceOutput]) -> None:
        run_outputs(outputs, self._answer, self._propose)

    def _propose(self, records: tuple[Any, ...]) -> bool:
        node = self.node
        service = self.seat.service
        try:
            futures = [node.submit(record) for record in records]
        except Exception as exc:  # NotLeaderError: leadership moved under us
            self.stop(f"proposal refused: {exc}")
            return True  # the answers that follow still go out (to nobody waiting, mostly)
        self._in_flight = futures
        gathered = asyncio.gather(*futures, return_exceptions=True)
        gathered.add_done_callback(lambda f: self._proposal_done(service, futures, f))
        return True

    def _proposal_done(
        self, service: ControllerService | None, futures: list[Any], gathered: asyncio.Future[Any]
    ) -> None:
        if service is not self.seat.service or futures is not self._in_flight:
            return  # a stale proposal of a service already failed
        self._in_flight = []
        results = gathered.result()
        if any(isinstance(r, BaseException) for r in results):
            self.stop("proposal not committed")
            return
        assert self.seat.service is not None
        self._run(self.seat.service.committed(results))
        self._pump()

    def _answer(self, token: Hashable, response: ControllerResponse) -> None:
        future = self._callers.pop(token, None)
        if future is not None and not future.done():
            future.set_result(response)

    def _arm_timer(self) -> None:
        deadline_ms = self.seat.next_deadline_ms()
        if deadline_ms is None:
            self._timer.cancel()
            return  # no service, or pumped again when the proposal completes
        self._timer.arm_in(max(0, deadline_ms - self.node.now_ms()))

    def _on_timer(self) -> None:
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
        if node.is_leader and isinstance(message.request, DescribeQuorumCall):
            self._reply(message.origin, message.request_id, describe_quorum_answer(node))
            return
        if node.is_leader:
            future = self.active.call(message.request)
            future.add_done_callback(
                lambda f: self._reply(message.origin, message.request_id, f.result())
            )
            return
        leader = node.leader_id
        if leader is None or message.forwarded or leader == node.node_id:
            if isinstance(message.request, DescribeQuorumCall):
                return  # no controller error shape: the broker's call times out and says so
            response = error_response(message.request, Errors.NOT_CONTROLLER)
            self._reply(message.origin, message.request_id, response)
            return
        # Forward once to the active controller (the answer comes back to us, then to origin).
        self._next_id += 1
        self._forwarded[self._next_id] = (message.origin, message.request_id)
        node.send(leader, ControllerRpcRequest(self._next_id, message.request, node.node_id, True))
        run_later(node.loop, node.config.request_timeout_ms, self._forwarded.pop, self._next_id,
                  None, on_error=node.crash)

    def on_response(self, message: ControllerRpcResponse) -> bool:
        """A forwarded request's answer: relay it. False if it is not ours (a client's)."""
        entry = self._forwarded.pop(message.request_id, None)
        if entry is None:
            return False
        origin, request_id = entry
        self.node.send(origin, ControllerRpcResponse(request_id, message.response, message.leader_id))
        return True

    def _reply(self, origin: int, request_id: int,
               response: ControllerResponse | DescribeQuorumAnswer) -> None:
        leader = self.node.leader_id
        self.node.send(origin, ControllerRpcResponse(request_id, response, -1 if leader is None else leader))


def describe_quorum_answer(node: NodeContext) -> DescribeQuorumAnswer:
    """This (leading) node's Raft view for a broker's DescribeQuorum: quorum_replication's rows,
    the voters first, as kafka-metadata-quorum --replication prints them."""
    status = node.raft_status()
    rows = tuple((r["node_id"], r["log_end_offset"], r["last_fetch_timestamp"],
                  r["last_caught_up_timestamp"], r["status"] != "Observer")
                 for r in quorum_replication(node))  # fmt: skip
    leader = -1 if status.leader_id is None else status.leader_id
    return DescribeQuorumAnswer(leader, status.epoch, status.high_watermark, rows)

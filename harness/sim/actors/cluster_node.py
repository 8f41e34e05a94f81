"""A simulated controller or broker for `kraftlab sim cluster`: S's SimNode (the real Raft core,
log store, storage and image; harness/sim/actors/node.py) plus, on voters, the active controller (C's
ControllerService driven as docs/controller.md says) and, on observers, the broker lifecycle: the
same sans-IO BrokerSession the real brokers run (harness/drive/broker_session.py).

The controller driver here follows the same contract as the asyncio one
(harness/runtime/controller_rpc.py ActiveController):
- a service is created only while this node leads AND its image has applied this epoch's
  LeaderChange; it is failed (every waiting caller answered NOT_CONTROLLER) and dropped as soon
  as the node stops leading that epoch, or crashes;
- one proposal at a time: the records of one operation are proposed as one batch and
  `committed(results)` is called only when every one of them is applied (with the image's own
  ApplyResults, captured as the entries are applied);
- pumped after every input and at `next_deadline_ms()` (merged into the node's timer).

Controller RPCs travel through the simulated network as the same envelopes the real nodes use
(ControllerRpcRequest / ControllerRpcResponse), so they are delayed, dropped, duplicated and
partitioned like Raft traffic. A broker sends to the leader its observer core knows; a controller
that does not lead answers NOT_CONTROLLER (the broker retries).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.drive.broker_session import BrokerSession, BrokerTiming
from harness.runtime.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.sim.actors.node import SimNode
from harness.sim.checks.invariants import SafetyChecker
from quorum.controller import (
    ControllerConfig,
    ControllerRequest,
    ControllerService,
    Propose,
    Respond,
)
from quorum.controller.service import error_response
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import Endpoint, encode_record
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted
from quorum.raft.log import Entry

FAST_HEARTBEAT_MS = 20  # a fenced broker heartbeats this often (Kafka's initial catch-up)
DUPLICATE_BACKOFF_MS = 50
RETRY_BACKOFF_MS = 20


@dataclass(frozen=True, slots=True)
class ClusterTiming:
    """Broker lifecycle timing of one run (drawn from the seed, scaled to simulated seconds)."""

    heartbeat_interval_ms: int
    session_timeout_ms: int
    request_timeout_ms: int

    def controller_config(self) -> ControllerConfig:
        return ControllerConfig(
            broker_heartbeat_interval_ms=self.heartbeat_interval_ms,
            broker_session_timeout_ms=self.session_timeout_ms,
            leader_imbalance_check_interval_ms=10 * self.session_timeout_ms,
        )

    def broker_timing(self) -> BrokerTiming:
        return BrokerTiming(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            request_timeout_ms=self.request_timeout_ms,
            fast_heartbeat_ms=FAST_HEARTBEAT_MS,
            retry_backoff_ms=RETRY_BACKOFF_MS,
            duplicate_backoff_ms=DUPLICATE_BACKOFF_MS,
        )


class ClusterSimNode(SimNode):
    """A voter runs the active controller while it leads; an observer is a broker."""

    def __init__(
        self,
        node_id: int,
        voter_ids: Sequence[int],
        raft_config: RaftConfig,
        checker: SafetyChecker,
        timing: ClusterTiming,
    ) -> None:
        self.timing = timing
        self.is_broker = node_id not in voter_ids
        super().__init__(node_id, voter_ids, raft_config, checker)

    def _reset_memory(self) -> None:
        super()._reset_memory()
        # Controller (voters).
        self.service: ControllerService | None = None
        self.service_epoch = -1
        self.proposal: tuple[int, int, int] | None = None  # first, last offset, epoch
        self.apply_results: dict[int, ApplyResult] = {}
        self.early: list[tuple[Any, ControllerRequest]] = []
        self.admin_answers: list[Any] = []
        # Broker (observers): a fresh session (incarnation) per start, deterministic ids.
        self.session = BrokerSession(
            self.node_id,
            f"sim-{self.node_id}-{self.incarnation + 1}",
            (Endpoint("rpc", "sim", self.node_id),),
            self.timing.broker_timing(),
        )

    # -- inputs: every one ends with the controller/broker step ------------------------------------

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        match message:
            case ControllerRpcRequest():
                self._on_rpc_request(src, message, now_ms)
            case ControllerRpcResponse():
                if self.is_broker:
                    self._on_rpc_response(message, now_ms)
            case _:
                super().handle(src, message, now_ms)
        self.step(now_ms)

    def tick(self, now_ms: int) -> None:
        super().tick(now_ms)
        self.step(now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        super().peer_unreachable(peer, now_ms)
        self.step(now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (super().next_deadline_ms(),) if d is not None]
        if self.service is not None and not self.service.busy:
            deadlines.append(self.service.next_deadline_ms())
        if self.is_broker:
            session_deadline = self.session.next_deadline_ms()
            if session_deadline is not None:
                deadlines.append(session_deadline)
        return min(deadlines) if deadlines else None

    def step(self, now_ms: int) -> None:
        if self.core is None:
            return
        if self.is_broker:
            self._broker_step(now_ms)
        else:
            self._controller_step(now_ms)

    def admin_request(self, token: Any, request: ControllerRequest, now_ms: int) -> bool:
        """A topic/election request from the simulated admin client; False if not active."""
        if self.service is None:
            return False
        self.service.submit(token, request)
        self.step(now_ms)
        return True

    # -- applying: capture ApplyResults of our own proposal ------------------------------------------

    def _apply_committed(self) -> None:
        image = self.image
        if self.proposal is not None and type(image) is MetadataImage:
            # Instance-level hook: the image's apply_entry, recording the results in range.
            first, last, _ = self.proposal
            original = image.apply_entry

            def recording(entry: Entry) -> ApplyResult | None:
                result = original(entry)
                if result is not None and first <= entry.offset <= last:
                    self.apply_results[entry.offset] = result
                return result

            image.apply_entry = recording  # type: ignore[method-assign]
            try:
                super()._apply_committed()
            finally:
                del image.apply_entry
            return
        super()._apply_committed()

    # -- the active controller ------------------------------------------------------------------------

    def _controller_step(self, now_ms: int) -> None:
        core = self.core
        if self.service is not None and (not core.is_leader or core.epoch != self.service_epoch):
            self._fail_service()
        if self.service is None and core.is_leader:
            image = self.image
            if image.controller_epoch == core.epoch and image.controller_id == self.node_id:
                self.service = ControllerService(
                    self.timing.controller_config(), image=image, now_ms=now_ms
                )
                self.service_epoch = core.epoch
                early, self.early = self.early, []
                for token, request in early:
                    self.service.submit(token, request)
        service = self.service
        if service is None:
            return
        outputs: list[Any] = []
        if self.proposal is not None:
            first, last, _ = self.proposal
            if self.applied_end <= last:
                return
            results = [self.apply_results.get(o) for o in range(first, last + 1)]
            self.proposal = None
            self.apply_results = {}
            if any(r is None for r in results):
                self._fail_service()  # replaced by another leader's entries
                return
            outputs += service.committed([r for r in results if r is not None])
        outputs += service.pump(self.image, now_ms)
        self._run_outputs(outputs, now_ms)

    def _run_outputs(self, outputs: list[Any], now_ms: int) -> None:
        for out in outputs:
            match out:
                case Respond(token=token, response=response):
                    self._respond(token, response)
                case Propose(records=records):
                    data = [encode_record(r) for r in records]
                    result, effects = self.core.propose(data, now_ms)
                    if isinstance(result, Accepted):
                        self.proposal = (result.first_offset, result.last_offset, result.epoch)
                    self._run(effects)
                    if not isinstance(result, Accepted):
                        self._fail_service()
                        return

    def _fail_service(self) -> None:
        service, self.service = self.service, None
        self.proposal = None
        self.apply_results = {}
        outputs = service.failed() if service is not None else []
        for out in outputs:
            self._respond(out.token, out.response)

    def _respond(self, token: Any, response: Any) -> None:
        if isinstance(token, tuple) and token and token[0] == "rpc":
            _, src, request_id = token
            leader = self.core.leader_id if self.core is not None else None
            self.send(
                src, ControllerRpcResponse(request_id, response, -1 if leader is None else leader)
            )
        else:
            self.admin_answers.append((token, response))

    def _on_rpc_request(self, src: int, message: ControllerRpcRequest, now_ms: int) -> None:
        if self.is_broker:
            return
        token = ("rpc", message.origin, message.request_id)
        if self.service is not None:
            # The receipt time: a heartbeat counts as contact from now (KAFKA-15019), as in
            # harness/runtime/controller_rpc.py.
            self.service.submit(token, message.request, now_ms)
        elif self.core.is_leader:
            self.early.append((token, message.request))
        else:
            self._respond(token, error_response(message.request, Errors.NOT_CONTROLLER))

    # -- the broker lifecycle -------------------------------------------------------------------------

    def _broker_step(self, now_ms: int) -> None:
        out = self.session.poll(now_ms, self.core.leader_id, self.image.applied_offset)
        if out is not None:
            self.send(out.to, ControllerRpcRequest(out.request_id, out.request, self.node_id))

    def _on_rpc_response(self, message: ControllerRpcResponse, now_ms: int) -> None:
        self.session.on_response(message.request_id, message.response, now_ms)

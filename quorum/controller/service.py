"""ControllerService: the controller's driver contract as a small sans-IO queue, so the asyncio
node and the simulator serialize controller operations the same way.

Contract (see controller.py): one operation at a time, request or tick; its records are proposed
and must be applied to the image before the next operation is computed. Usage:

    service.submit(token, request, now_ms)     # token: whatever identifies the caller
    for out in service.pump(image, now_ms):     # call after submit, after commits, on timers
        Propose(records) -> propose them, in order; when all are applied call
                            service.committed(apply_results) and run its outputs
        Respond(token, response) -> answer the caller
    service.failed()  # the proposal failed or leadership was lost: every waiting caller gets
                      # NOT_CONTROLLER (retriable); then drop the service

Invariant: at most one proposal outstanding; a token is answered exactly once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

from quorum.controller.config import ControllerConfig
from quorum.controller.controller import QuorumController
from quorum.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControllerRequest,
    ControllerResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ReportRaftLeadersRequest,
    ReportRaftLeadersResponse,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
)
from quorum.controller.result import ControllerResult
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import Record

_RESPONSE_FOR: dict[type, type] = {
    BrokerRegistrationRequest: BrokerRegistrationResponse,
    BrokerHeartbeatRequest: BrokerHeartbeatResponse,
    CreateTopicRequest: CreateTopicResponse,
    DeleteTopicRequest: DeleteTopicResponse,
    AlterConfigsRequest: AlterConfigsResponse,
    AlterPartitionRequest: AlterPartitionResponse,
    ElectLeadersRequest: ElectLeadersResponse,
    AllocateProducerIdsRequest: AllocateProducerIdsResponse,
    ReportReplicaPositionRequest: ReportReplicaPositionResponse,
    ReportRaftLeadersRequest: ReportRaftLeadersResponse,
}


def error_response(request: ControllerRequest, error: Errors) -> ControllerResponse:
    """The response type of `request` carrying only `error`."""
    response: ControllerResponse = _RESPONSE_FOR[type(request)](error)
    return response


@dataclass(frozen=True, slots=True)
class Propose:
    """Propose these records, in order, and call `committed` with their ApplyResults."""

    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class Respond:
    token: Hashable
    response: ControllerResponse


ServiceOutput = Propose | Respond

_TICK = object()  # the token of a tick: nobody to answer


class ControllerService:
    """Queue + one-in-flight discipline around a QuorumController."""

    def __init__(
        self, config: ControllerConfig | None = None, *, image: MetadataImage, now_ms: int
    ) -> None:
        self.controller = QuorumController(config, image=image, now_ms=now_ms)
        self._queue: deque[tuple[Hashable, ControllerRequest]] = deque()
        self._in_flight: tuple[object, ControllerResult] | None = None

    @property
    def busy(self) -> bool:
        """A proposal is outstanding."""
        return self._in_flight is not None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def next_deadline_ms(self) -> int:
        return self.controller.next_deadline_ms()

    def submit(
        self, token: Hashable, request: ControllerRequest, received_ms: int | None = None
    ) -> None:
        """Queue `request`. `received_ms` (when it arrived) makes a heartbeat count as contact
        from then on, however long it waits behind proposals (KAFKA-15019)."""
        if received_ms is not None and isinstance(request, BrokerHeartbeatRequest):
            self.controller.heartbeat_received(request.broker_id, request.broker_epoch,
                                               received_ms)  # fmt: skip
        self._queue.append((token, request))

    def pump(self, image: MetadataImage, now_ms: int) -> list[ServiceOutput]:
        """Run operations until one needs a proposal (or nothing is left to do)."""
        out: list[ServiceOutput] = []
        ticked = False
        while self._in_flight is None:
            token: object
            if not ticked and now_ms >= self.controller.next_deadline_ms():
                ticked = True
                token, result = _TICK, self.controller.tick(image, now_ms)
            elif self._queue:
                token, request = self._queue.popleft()
                result = self.controller.handle(request, image, now_ms)
            else:
                break
            if result.records:
                self._in_flight = (token, result)
                out.append(Propose(result.records))
            elif token is not _TICK and result.response is not None:
                assert isinstance(token, Hashable)
                out.append(Respond(token, result.response))
        return out

    def committed(self, results: Sequence[ApplyResult]) -> list[ServiceOutput]:
        """The outstanding proposal is applied; `results` are its records' ApplyResults."""
        if self._in_flight is None:
            raise RuntimeError("committed() with no proposal outstanding")
        token, result = self._in_flight
        self._in_flight = None
        response = result.complete(results)
        if token is _TICK or response is None:
            return []
        assert isinstance(token, Hashable)
        return [Respond(token, response)]

    def failed(self) -> list[Respond]:
        """Leadership lost or the proposal failed: answer everyone NOT_CONTROLLER."""
        out: list[Respond] = []
        if self._in_flight is not None:
            token, result = self._in_flight
            self._in_flight = None
            if token is not _TICK and result.response is not None:
                assert isinstance(token, Hashable)
                out.append(Respond(token, _with_error(result.response, Errors.NOT_CONTROLLER)))
        while self._queue:
            token, request = self._queue.popleft()
            out.append(Respond(token, error_response(request, Errors.NOT_CONTROLLER)))
        return out


def _with_error(response: ControllerResponse, error: Errors) -> ControllerResponse:
    return replace(response, error=error)

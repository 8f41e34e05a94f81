"""The I/O-free part of the active controller both drivers run: when a leader's ControllerService
exists, which requests wait for it, how it fails, when it wants a timer, and how its outputs are
dispatched. The asyncio runtime (harness/runtime/controller_rpc.py ActiveController) and the
simulator (harness/sim/actors/controller.py ActiveController) each own one ControllerSeat and add
only their I/O: how a proposal reaches the Raft log and how its ApplyResults come back, timers,
and how an answer reaches its caller.

The contract (docs/controller.md, "Driver contract"):
- a service is built only while the node leads AND its image has applied this epoch's
  LeaderChange (`maybe_start`): then the image holds everything earlier leaders committed;
- a request that reaches a leader whose service is not up yet waits in `early` and is submitted
  (in arrival order) when the service starts;
- a request submitted to a live service carries its receipt time: a heartbeat counts as contact
  from its arrival (KAFKA-15019);
- one proposal at a time: while a proposal is outstanding (`service.busy`) there is no deadline,
  the driver pumps again when the proposal completes (`next_deadline_ms`);
- `fail` drops the service and returns its NOT_CONTROLLER answers for every waiting caller.

What differs between the drivers, and stays so (the caller chooses, `fail(answer_early=...)`):
the runtime answers requests still waiting in `early` NOT_CONTROLLER when its leadership ends
(the broker retries at the new leader); the simulator keeps them and submits them if the voter
becomes active again, as it always has (its seeded runs' fingerprints depend on it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, assert_never

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
from quorum.metadata.image import MetadataImage


class ControllerSeat:
    """The ControllerService of one leadership epoch, and the requests that wait for it."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.service: ControllerService | None = None
        self.service_epoch = -1
        self.early: list[tuple[Hashable, ControllerRequest]] = []

    def maybe_start(self, *, is_leader: bool, epoch: int, node_id: int, image: MetadataImage,
                    now_ms: int) -> bool:  # fmt: skip
        """Build the service if this node leads `epoch` and `image` applied its LeaderChange;
        submit the requests that waited. True if a service was started now."""
        if self.service is not None or not is_leader:
            return False
        if image.controller_epoch != epoch or image.controller_id != node_id:
            return False
        self.service = ControllerService(self.config, image=image, now_ms=now_ms)
        self.service_epoch = epoch
        early, self.early = self.early, []
        for token, request in early:
            self.service.submit(token, request)
        return True

    def submit(self, token: Hashable, request: ControllerRequest, now_ms: int) -> bool:
        """Hand `request` (received at `now_ms`) to the live service (True), or keep it for the
        service this leader will start (False)."""
        if self.service is None:
            self.early.append((token, request))
            return False
        self.service.submit(token, request, now_ms)
        return True

    def fail(self, *, answer_early: bool) -> list[Respond]:
        """Drop the service: its waiting callers' NOT_CONTROLLER answers, and with
        `answer_early` those of the requests still waiting for a service."""
        service, self.service = self.service, None
        outputs: list[Respond] = service.failed() if service is not None else []
        if answer_early:
            for token, request in self.early:
                outputs.append(Respond(token, error_response(request, Errors.NOT_CONTROLLER)))
            self.early = []
        return outputs

    def pump(self, image: MetadataImage, now_ms: int) -> list[ServiceOutput]:
        return [] if self.service is None else self.service.pump(image, now_ms)

    def next_deadline_ms(self) -> int | None:
        """When the service wants a pump; None without a service or while a proposal is
        outstanding (the driver pumps when it completes)."""
        service = self.service
        return service.next_deadline_ms() if service is not None and not service.busy else None


def run_outputs(outputs: Sequence[ServiceOutput],
                respond: Callable[[Hashable, ControllerResponse], Any],
                propose: Callable[[tuple[Any, ...]], bool]) -> None:  # fmt: skip
    """Answer each Respond, hand each Propose to the driver, in order; stop after a proposal the
    driver could not start (`propose` returned False: it failed the service)."""
    for out in outputs:
        match out:
            case Respond(token=token, response=response):
                respond(token, response)
            case Propose(records=records):
                if not propose(records):
                    return
            case _:
                assert_never(out)

"""The active controller on a controller voter: a NodePart (harness.sim.actors.raft_node) that
drives the real ControllerService (quorum.controller) as docs/controller.md says, and answers
the controller RPCs brokers send it (harness.drive.controller_rpc envelopes). A voter hosting it
is the simulator's controller: RaftCore + this + the quorum-state file on its simulated disk.

The I/O-free part is the ControllerSeat both drivers share (harness/drive/active_controller.py);
this part adds the simulator's I/O, following the same contract as the asyncio one
(harness/runtime/controller_rpc.py ActiveController):
- a service is created only while the node leads AND its image has applied this epoch's
  LeaderChange; it is failed (every waiting caller answered NOT_CONTROLLER) and dropped as soon
  as the node stops leading that epoch, or crashes (a crash resets the part);
- one proposal at a time: the records of one operation are proposed as one batch and
  `committed(results)` is called only when every one of them is applied, with the image's own
  ApplyResults (seen through `on_applied` as the entries are applied);
- pumped after every input of the node and at `next_deadline_ms()` (merged into the node's
  timer);
- a request that reaches a voter leading an epoch whose service is not up yet waits in `early`
  and is submitted when the service starts; a voter that does not lead answers NOT_CONTROLLER
  (the broker retries); a request's receipt time is its arrival (KAFKA-15019). Unlike the
  runtime, a failed service leaves `early` as it is (the seat's `fail(answer_early=False)`):
  those requests are submitted if this voter becomes active again.
Admin requests (topic creation and the like) arrive through `admin_request` and their answers
are kept in `admin_answers` (the simulated admin client does not read them). `on_heartbeat`, if
given, hears every broker heartbeat that reaches this voter while it leads.

How the data-plane runs' brokers learn metadata: pushes of the committed image's view of the
partition (`MetadataPush`). Those brokers are not Raft observers (the metadata run's are): the
controller that leads pushes its committed image's view of the data partition to every broker
each time its image advances, and answers every broker heartbeat with it (the observer fetch
path, abstracted). A broker cut off from the active controller therefore keeps acting on its
stale view: the zombie leader. `MetadataPublisher` is that behaviour as a second part of a voter;
the abstract controller (harness.sim.actors.abstract_controller) publishes the same view. A push
carries the image's applied offset; a broker applies only pushes newer than the last it applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.drive.active_controller import ControllerSeat, run_outputs
from harness.drive.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.sim.actors.raft_node import RaftNode
from partition.replica import MetadataUpdated
from quorum.controller import (
    BrokerHeartbeatRequest,
    ControllerConfig,
    ControllerRequest,
    ControllerService,
)
from quorum.controller.messages import BrokerState
from quorum.controller.service import error_response
from quorum.metadata.configs import REPLICATION_MODE
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import encode_record
from quorum.raft.core import Accepted
from quorum.raft.log import Entry

TOPIC = "t"  # the data-plane runs' one topic, of one partition

class ActiveController:
    """The controller role of one voter (see the module docstring)."""

    def __init__(
        self,
        node: RaftNode,
        config: ControllerConfig,
        on_heartbeat: Callable[[int], None] | None = None,
    ) -> None:
        self.node = node
        self.config = config
        self.on_heartbeat = on_heartbeat
        self.reset()

    def reset(self) -> None:
        self.seat = ControllerSeat(self.config)
        self.proposal: tuple[int, int, int] | None = None  # first, last offset, epoch
        self.apply_results: dict[int, ApplyResult] = {}
        self.admin_answers: list[Any] = []

    @property
    def service(self) -> ControllerService | None:
        return self.seat.service

    @property
    def early(self) -> list[tuple[Any, ControllerRequest]]:
        return self.seat.early

    # -- the NodePart ----------------------------------------------------------------------------

    def accepts(self, message: Any) -> bool:
        return isinstance(message, ControllerRpcRequest)

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        self.submit(("rpc", message.origin, message.request_id), message.request, now_ms)
        if (
            self.on_heartbeat is not None
            and self.node.core.is_leader
            and isinstance(message.request, BrokerHeartbeatRequest)
        ):
            self.on_heartbeat(message.origin)

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        if self.proposal is not None and result is not None:
            first, last, _ = self.proposal
            if first <= entry.offset <= last:
                self.apply_results[entry.offset] = result

    def next_deadline_ms(self) -> int | None:
        return self.seat.next_deadline_ms()

    def step(self, now_ms: int) -> None:
        node, core, seat = self.node, self.node.core, self.seat
        if seat.service is not None and (not core.is_leader or core.epoch != seat.service_epoch):
            self._fail_service()
        seat.maybe_start(is_leader=core.is_leader, epoch=core.epoch, node_id=node.node_id,
                         image=node.image, now_ms=now_ms)  # fmt: skip
        service = seat.service
        if service is None:
            return
        outputs: list[Any] = []
        if self.proposal is not None:
            first, last, _ = self.proposal
            if node.applied_end <= last:
                return
            results = [self.apply_results.get(o) for o in range(first, last + 1)]
            self.proposal = None
            self.apply_results = {}
            if any(r is None for r in results):
                self._fail_service()  # replaced by another leader's entries
                return
            outputs += service.committed([r for r in results if r is not None])
        outputs += service.pump(node.image, now_ms)
        run_outputs(outputs, self._respond, lambda records: self._propose(records, now_ms))

    # -- requests ----------------------------------------------------------------------------------

    def submit(self, token: Any, request: ControllerRequest, now_ms: int) -> None:
        """A request that reached this voter at `now_ms` (its receipt time, KAFKA-15019)."""
        if self.seat.service is None and not self.node.core.is_leader:
            self._respond(token, error_response(request, Errors.NOT_CONTROLLER))
        else:
            self.seat.submit(token, request, now_ms)

    def admin_request(self, token: Any, request: ControllerRequest, now_ms: int) -> bool:
        """A topic/election request from the simulated admin client; False if not active."""
        if self.seat.service is None:
            return False
        self.seat.service.submit(token, request)
        self.node.step(now_ms)
        return True

    # -- outputs ----------------------------------------------------------------------------------

    def _propose(self, records: tuple[Any, ...], now_ms: int) -> bool:
        """Propose one operation's records as one batch; False (service failed) if refused."""
        node = self.node
        data = [encode_record(r) for r in records]
        result, effects = node.core.propose(data, now_ms)
        if isinstance(result, Accepted):
            self.proposal = (result.first_offset, result.last_offset, result.epoch)
        node.run_effects(effects)
        if not isinstance(result, Accepted):
            self._fail_service()
            return False
        return True

    def _fail_service(self) -> None:
        self.proposal = None
        self.apply_results = {}
        for out in self.seat.fail(answer_early=False):
            self._respond(out.token, out.response)

    def _respond(self, token: Any, response: Any) -> None:
        if isinstance(token, tuple) and token and token[0] == "rpc":
            _, src, request_id = token
            core = self.node.core
            leader = core.leader_id if core is not None else None
            self.node.send(
                src, ControllerRpcResponse(request_id, response, -1 if leader is None else leader)
            )
        else:
            self.admin_answers.append((token, response))


# -- the data-plane runs' metadata pushes ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MetadataPush:
    """The committed image's view of the partition, at `offset`, with its topic's
    replication.mode (a raft partition is hosted by the broker's raft-partition host, not a ReplicaCore)."""

    offset: int
    update: MetadataUpdated | None
    replication_mode: str = "isr"


def partition_view(image: MetadataImage) -> MetadataPush:
    """The push of `image`: its partition 0 of TOPIC and the brokers a leader may be elected
    from (registered, unfenced), or no update while the topic does not exist."""
    topic = image.topic(TOPIC)
    part = None if topic is None else image.partition(topic.topic_id, 0)
    if part is None:
        return MetadataPush(image.applied_offset, None)
    eligible = tuple(BrokerState(b.broker_id, b.broker_epoch) for b in image.brokers()
                     if image.is_broker_usable(b.broker_id))
    mode = image.topic_config_overrides(TOPIC).get(REPLICATION_MODE, "isr")
    return MetadataPush(image.applied_offset, MetadataUpdated(part, eligible), mode)


class MetadataPublisher:
    """A voter's part: while it leads, push every advance of its image to every broker."""

    def __init__(self, node: RaftNode, broker_ids: Sequence[int]) -> None:
        self.node = node
        self.broker_ids = tuple(broker_ids)
        self.reset()

    def reset(self) -> None:
        self.pushed = -1  # the offset last pushed, in this process start

    def accepts(self, message: Any) -> bool:
        return False

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        raise AssertionError("the publisher accepts no input")

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        pass

    def step(self, now_ms: int) -> None:
        node = self.node
        if node.is_leader and node.image.applied_offset > self.pushed:
            self.pushed = node.image.applied_offset
            push = partition_view(node.image)
            for b in self.broker_ids:
                node.send(b, push)

    def next_deadline_ms(self) -> int | None:
        return None

    def answer_heartbeat(self, broker: int) -> None:
        """The heartbeat answer carries the broker's metadata catch-up (the fetch path)."""
        self.node.send(broker, partition_view(self.node.image))

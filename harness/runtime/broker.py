"""The broker side of KIP-631's broker lifecycle, in a broker process (`process.roles=broker`).

A broker is a Raft *observer* of the metadata log (its RaftCore's node id is not among the voters;
the runtime is the same as a controller's, see node.py) and applies the log to its own
MetadataImage. This module drives the sans-IO BrokerSession (harness/drive/broker_session.py:
registration with a fresh incarnation id per process start, DUPLICATE_BROKER_REGISTRATION
retries, heartbeats with the applied metadata offset, re-registration, controlled shutdown) on
the event loop, exactly as node.py drives the Raft core: input -> outputs -> re-arm ONE timer
at `next_deadline_ms()` (a harness/loop Timer on the node's clock, whose callback errors crash
the node). The simulator drives the same BrokerSession (harness/sim/actors/broker.py).

It also logs this broker's own partition assignments as they change (`broker.partition_*`) and
hands every applied metadata change to the replica manager (replica_manager.py), which hosts the
data replicas, then to the group host (group_host.py: the group coordinator, on the
`__consumer_offsets` partitions this broker leads). Controller RPCs (AlterPartition, AllocateProducerIds) go to the leader the observer
core knows, over the node transport (controller_rpc.py): `send_controller` / `call_controller`.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import structlog

from harness.drive.broker_session import BrokerSession, BrokerTiming, Transition
from harness.loop import Timer, run_later
from harness.runtime.clean_shutdown import take_previous_broker_epoch, write_clean_shutdown
from harness.runtime.context import NodeContext
from harness.runtime.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.runtime.group_host import GroupHost
from harness.runtime.replica_manager import ReplicaManager
from quorum.controller import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER, Endpoint

log = structlog.get_logger()


class BrokerNode(NodeContext, Protocol):
    """A node as the broker's data paths see it (data_requests.py, metrics.py, harness/kafka,
    harness/admin): its context plus the broker lifecycle it hosts (None on a controller)."""

    @property
    def broker(self) -> BrokerLifecycle | None: ...


class BrokerLifecycle:
    """The BrokerSession of one broker process, plus AlterPartition and assignment tracking."""

    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.loop = node.loop
        self.broker_id = node.node_id
        config = node.config
        rpc, admin = config.rpc_endpoint, config.admin_endpoint
        # KAFKA-15586: the replica manager's data directory holds the clean shutdown file.
        self.data_dir = Path(config.metadata_log_dir) / "data"
        previous_epoch = take_previous_broker_epoch(self.data_dir)
        self.session = BrokerSession(
            broker_id=node.node_id,
            incarnation_id=base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
            endpoints=(Endpoint("rpc", rpc.host, rpc.port), Endpoint("admin", admin.host, admin.port))
            + ((Endpoint("kafka", kl.host, kl.port),) if (kl := config.kafka_listener) else ()),
            timing=BrokerTiming(
                heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
                request_timeout_ms=config.request_timeout_ms,
            ),
            rack=config.rack,
            previous_broker_epoch=previous_epoch,
        )
        self._timer = Timer(node.clock, self._on_timer, on_error=node.crash)
        self._shut_down = asyncio.Event()
        self._stopped = False
        # AlterPartition calls (not part of the session): request id -> future.
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._next_call_id = 1 << 40  # disjoint from the session's request ids
        self._assignments: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = {}
        # Topics a Metadata request asked this broker to create, until the controller answers
        # (harness/kafka/auto_create.py: one creation in flight per topic), with its task.
        self.topics_being_created: dict[str, asyncio.Task[None]] = {}
        self.replicas = ReplicaManager(node, self)
        self.groups = GroupHost(node, self, self.replicas)  # the group coordinator (group_host.py)

    @property
    def incarnation_id(self) -> str:
        return self.session.incarnation_id

    @property
    def broker_epoch(self) -> int:
        return self.session.broker_epoch

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self._step()

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to let us go; True once it said should_shut_down."""
        if not self.session.registered:
            return True  # never registered: nothing to hand over
        # Raft partitions led here hand over first (EndQuorumEpoch): their voters elect a
        # successor at once; the controller is not asked (replication.mode=raft).
        handed_over = self.replicas.raft.resign_all()
        log.info("broker.controlled_shutdown_requested", broker_epoch=self.broker_epoch,
                 raft_leaderships_resigned=handed_over)
        self.session.request_shutdown(self.node.now_ms())
        self._step()
        try:
            await asyncio.wait_for(
                self._shut_down.wait(), self.node.config.controlled_shutdown_timeout_ms / 1000
            )
        except TimeoutError:
            log.warning("broker.controlled_shutdown_timed_out")
            return False
        return True

    async def close(self) -> None:
        """Stop, flush and close every log; then, as Kafka's LogManager does after a clean
        close, write the clean shutdown file with this registration's broker epoch."""
        self._stopped = True
        self.groups.close()
        self.replicas.close()
        if self.session.registered:
            write_clean_shutdown(self.data_dir, self.session.broker_epoch)
        self._timer.cancel()
        for future in self._calls.values():
            if not future.done():
                future.cancel()

    # --- driving the session -------------------------------------------------------------------

    def _step(self) -> None:
        if self._stopped:
            return
        node = self.node
        out = self.session.poll(node.now_ms(), node.leader_id, node.image.applied_offset)
        if out is not None:
            node.send(out.to, ControllerRpcRequest(out.request_id, out.request, self.broker_id))
        self._arm_timer()

    def _arm_timer(self) -> None:
        deadline = self.session.next_deadline_ms()
        if deadline is None or self._stopped:
            self._timer.cancel()
            return
        self._timer.arm(deadline, not_before_ms=self.node.now_ms() + 1)

    def _on_timer(self) -> None:
        self._step()

    def on_response(self, message: ControllerRpcResponse) -> None:
        future = self._calls.get(message.request_id)
        if future is not None:
            if not future.done():
                future.set_result(message.response)
            return
        transitions = self.session.on_response(
            message.request_id, message.response, self.node.now_ms()
        )
        for transition in transitions:
            self._log(transition)
        if any(t.event == "registered" for t in transitions):
            self.replicas.on_metadata(self.node.image)  # now the broker epoch is known
        self._step()

    def _log(self, t: Transition) -> None:
        session = self.session
        match t.event:
            case "registered":
                log.info("broker.registered", broker_epoch=t.broker_epoch,
                         incarnation_id=session.incarnation_id)
            case "registration_retry" | "registration_failed" | "registration_lost":
                level = log.info if t.event == "registration_retry" else log.warning
                level(f"broker.{t.event}", error=t.detail, broker_epoch=t.broker_epoch)
            case "fenced" | "unfenced":
                log.info(f"broker.{t.event}", broker_epoch=t.broker_epoch,
                         metadata_offset=self.node.image.applied_offset)
            case "shutdown_granted":
                log.info("broker.controlled_shutdown_granted", broker_epoch=t.broker_epoch)
                self._shut_down.set()
            case other:
                log.info(f"broker.{other}", broker_epoch=t.broker_epoch)

    # --- controller calls (AlterPartition, AllocateProducerIds) ---------------------------------

    def send_controller(self, request: Any, callback: Callable[[Any], None]) -> None:
        """Send `request` to the active controller; `callback(response)` runs on a later loop
        iteration with its answer, or with None after request.timeout.ms (or no controller)."""
        future = self._controller_future(request)
        future.add_done_callback(lambda f: callback(None if f.cancelled() else f.result()))

    async def call_controller(self, request: Any) -> Any:
        """`request` to the active controller; its response, or None (timeout, no controller)."""
        return await self._controller_future(request)

    def _controller_future(self, request: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()
        leader = self.node.leader_id
        if leader is None or self._stopped:
            future.set_result(None)
            return future
        self._next_call_id += 1
        call_id = self._next_call_id
        self._calls[call_id] = future
        self.node.send(leader, ControllerRpcRequest(call_id, request, self.broker_id))

        def expire() -> None:
            self._calls.pop(call_id, None)
            if not future.done():
                future.set_result(None)

        run_later(self.loop, self.node.config.request_timeout_ms, expire, on_error=self.node.crash)
        future.add_done_callback(lambda _: self._calls.pop(call_id, None))
        return future

    async def alter_isr(self, topic: str, partition: int, isr: list[int]) -> AlterPartitionResponse:
        """As the partition's leader, ask the controller to set the ISR (KIP-497). The controller
        validates epochs and eligibility (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
        INELIGIBLE_REPLICA, ...); NOT_LEADER_OR_FOLLOWER if this broker does not lead it.
        (A manual route for demonstrations; the replica cores do this by themselves.)"""
        image = self.node.image
        t = image.topic(topic)
        part = None if t is None else image.partition(t.topic_id, partition)
        if t is None or part is None:
            return AlterPartitionResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if part.leader != self.broker_id:
            return AlterPartitionResponse(Errors.NOT_LEADER_OR_FOLLOWER, leader=part.leader)
        request = AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            topic_id=t.topic_id,
            partition=partition,
            leader_epoch=part.leader_epoch,
            new_isr_with_epochs=tuple(BrokerState(b) for b in isr),
            partition_epoch=part.partition_epoch,
        )
        if self.node.leader_id is None:
            return AlterPartitionResponse(Errors.NOT_CONTROLLER)
        response = await self.call_controller(request)
        if not isinstance(response, AlterPartitionResponse):
            return AlterPartitionResponse(Errors.REQUEST_TIMED_OUT)
        return response

    # --- partition assignments ----------------------------------------------------------------

    def on_applied(self) -> None:
        """Log changes of this broker's partition assignments (leader / follower / removed)."""
        image = self.node.image
        current = {
            (topic.name, part.partition): (part.leader, part.leader_epoch, part.isr)
            for topic, part in image.partitions_hosted_by(self.broker_id)
        }
        self.replicas.on_metadata(image)
        self.groups.on_metadata()  # leadership of __consumer_offsets partitions
        if current == self._assignments:
            return
        for key, (leader, leader_epoch, isr) in sorted(current.items()):
            before = self._assignments.get(key)
            if before is not None and before[:2] == (leader, leader_epoch):
                continue
            role = ("leader" if leader == self.broker_id
                    else "offline" if leader == NO_LEADER else "follower")
            log.info(f"broker.partition_{role}", topic=key[0], partition=key[1],
                     leader=None if leader == NO_LEADER else leader,
                     leader_epoch=leader_epoch, isr=list(isr))
        for key in sorted(set(self._assignments) - set(current)):
            log.info("broker.partition_removed", topic=key[0], partition=key[1])
        self._assignments = current

    def assignments(self) -> list[dict[str, Any]]:
        """docs/api.md /partitions: the replicas hosted here, as their cores see them."""
        return self.replicas.statuses()

    def status(self) -> dict[str, Any]:
        session = self.session
        state = ("shut_down" if session.shut_down else "shutting_down" if session.want_shut_down
                 else "running" if session.registered else "registering")
        return {"broker_epoch": session.broker_epoch, "fenced": session.fenced, "state": state,
                "incarnation_id": session.incarnation_id}

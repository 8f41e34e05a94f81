"""The broker lifecycle on a Raft observer (the metadata run's brokers): a NodePart
(harness.sim.actors.raft_node) that drives the same sans-IO BrokerSession the real brokers run
(harness.drive.broker_session: registration with a fresh incarnation id per process start,
heartbeats with the applied metadata offset, fast heartbeats while fenced, re-registration),
the way harness/runtime/broker.py does: after every input of the node, poll the session and send
what it asks for, as a ControllerRpcRequest (harness.drive.controller_rpc), to the leader the
observer's Raft core knows; the session's deadline is merged into the node's timer.

Invariant: a fresh session per process start, its incarnation id `sim-<node>-<incarnation>`
(deterministic, so a seed's trace is byte-identical run to run).
"""

from __future__ import annotations

from typing import Any

from harness.drive.broker_session import BrokerSession, BrokerTiming
from harness.drive.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.sim.actors.raft_node import RaftNode
from quorum.metadata.image import ApplyResult
from quorum.metadata.records import Endpoint
from quorum.raft.log import Entry


def new_session(node_id: int, incarnation: int, timing: BrokerTiming) -> BrokerSession:
    """The session of process start number `incarnation` of broker `node_id`."""
    return BrokerSession(
        node_id, f"sim-{node_id}-{incarnation}", (Endpoint("rpc", "sim", node_id),), timing
    )


class BrokerLifecycle:
    """Registration and heartbeats of one observer, through its BrokerSession."""

    def __init__(self, node: RaftNode, timing: BrokerTiming) -> None:
        self.node = node
        self.timing = timing
        self.reset()

    def reset(self) -> None:
        # The session of the node's next (or current) process start.
        self.session = new_session(self.node.node_id, self.node.incarnation + 1, self.timing)

    def accepts(self, message: Any) -> bool:
        return isinstance(message, ControllerRpcResponse)

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        self.session.on_response(message.request_id, message.response, now_ms)

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        pass  # an observer's image is its view; the session reads its applied offset

    def step(self, now_ms: int) -> None:
        node = self.node
        out = self.session.poll(now_ms, node.core.leader_id, node.image.applied_offset)
        if out is not None:
            node.send(out.to, ControllerRpcRequest(out.request_id, out.request, node.node_id))

    def next_deadline_ms(self) -> int | None:
        return self.session.next_deadline_ms()

"""The controller RPC envelopes both drivers send: a broker's (or a follower controller's)
quorum.controller request on its way to the active controller, and the answer on its way back.
The asyncio runtime sends them over the node transport (harness/runtime/controller_rpc.py, which
also forwards and relays them); the simulator sends them over its simulated network
(harness/sim/actors/controller.py, broker_lifecycle.py, broker.py), so both speak one protocol.

Wire (quorum.codec tags, unchanged since the envelopes lived in the runtime):
`ControllerRpcRequest(request_id, request, origin)` travels on the sender's connection; the
answer is `ControllerRpcResponse(request_id, response, leader_id)` sent back to `origin`.
Request ids are the sender's own (a broker keeps its session's and its other calls' apart);
`leader_id` is a hint: the active controller the answering node knows (-1: none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quorum import codec


@codec.register("node.ControllerRpcRequest")
@dataclass(frozen=True, slots=True)
class ControllerRpcRequest:
    request_id: int
    request: Any  # a quorum.controller ControllerRequest (nested record, tagged)
    origin: int  # the node the answer goes to
    forwarded: bool = False


@codec.register("node.ControllerRpcResponse")
@dataclass(frozen=True, slots=True)
class ControllerRpcResponse:
    request_id: int
    response: Any  # a ControllerResponse
    leader_id: int = -1  # hint: the active controller this node knows (-1: none)


@codec.register("node.DescribeQuorumCall")
@dataclass(frozen=True, slots=True)
class DescribeQuorumCall:
    """A broker's DescribeQuorum on its way to the active controller, which alone knows every
    replica's log end offset and fetch times (KIP-595; Kafka's brokers forward the request:
    KafkaApis.handleDescribeQuorumRequest). Answered by the Raft leader's node, not by the
    controller service: it asks the Raft core, not the metadata."""

    wanted: bool = True  # carries nothing; a field keeps the envelope a plain tagged record


@codec.register("node.DescribeQuorumAnswer")
@dataclass(frozen=True, slots=True)
class DescribeQuorumAnswer:
    """The Raft leader's view for DescribeQuorum: per replica (node id, log end offset, last
    fetch and last caught-up timestamps in Unix epoch ms or -1, voter?), voters first."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    replicas: tuple[tuple[int, int, int, int, bool], ...]

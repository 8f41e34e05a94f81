"""Unit tests of the node runtime's control-plane pieces that need no processes: broker configs
(process.roles=broker), and the controller-RPC server's one-hop forwarding on a follower."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.runtime.clock import NodeClock
from harness.runtime.config import (
    ConfigError,
    Endpoint,
    NodeConfig,
    from_properties,
    parse_properties,
)
from harness.runtime.controller_rpc import (
    ControllerRpcRequest,
    ControllerRpcResponse,
    ControllerRpcServer,
)
from quorum import codec
from quorum.controller import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from quorum.metadata.errors import Errors

BASE = {
    "cluster.id": "c1",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
    "kraftlab.admin.listeners": "1@127.0.0.1:8081,2@127.0.0.1:8082,3@127.0.0.1:8083,"
                                "101@127.0.0.1:8101",
    "metadata.log.dir": "/tmp/x",
}


def test_a_broker_config_round_trips_and_listens_on_its_own_endpoint() -> None:
    config = from_properties({**BASE, "node.id": "101", "process.roles": "broker",
                              "listeners": "127.0.0.1:9101", "broker.rack": "r1",
                              "broker.session.timeout.ms": "3000",
                              "auto.leader.rebalance.enable": "false"})
    assert config.is_broker and config.rpc_endpoint == Endpoint("127.0.0.1", 9101)
    assert (config.broker_session_timeout_ms, config.auto_leader_rebalance_enable) == (3000, 0)
    assert config.rack == "r1" and config.admin_endpoint == Endpoint("127.0.0.1", 8101)
    again = from_properties(parse_properties(config.to_properties()))
    assert again == config


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"node.id": "101", "process.roles": "broker"}, "listeners"),
        ({"node.id": "2", "process.roles": "broker", "listeners": "127.0.0.1:1"}, "voter"),
        ({"node.id": "101", "process.roles": "broker,controller"}, "process.roles"),
        ({"node.id": "101"}, "not in controller.quorum.voters"),
        ({"node.id": "1", "broker.session.timeout.ms": "soon"}, "integer"),
    ],
)
def test_bad_broker_configs_are_refused(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_properties({**BASE, **extra})


class _FakeNode:
    def __init__(self, leader_id: int | None, is_leader: bool = False) -> None:
        self.node_id = 2
        self.leader_id = leader_id
        self.is_leader = is_leader
        self.sent: list[tuple[int, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.clock = NodeClock(self.loop)
        self.config = NodeConfig(node_id=2, cluster_id="c1", voters={}, admin_listeners={},
                                 metadata_log_dir=Path("/tmp/x"))

    def send(self, to: int, message: Any) -> None:
        self.sent.append((to, codec.decode(codec.encode(message))))  # through the codec

    def crash(self, exc: BaseException) -> None:
        raise exc


HEARTBEAT = BrokerHeartbeatRequest(101, 5, 10)


def test_a_follower_forwards_once_and_relays_the_answer_to_the_broker() -> None:
    node = _FakeNode(leader_id=1)
    server = ControllerRpcServer(node, active=None)  # type: ignore[arg-type]
    server.on_request(101, ControllerRpcRequest(7, HEARTBEAT, 101))
    [(to, forwarded)] = node.sent
    assert to == 1 and forwarded.forwarded and forwarded.origin == 2
    assert forwarded.request == HEARTBEAT
    answer = BrokerHeartbeatResponse(Errors.NONE, is_caught_up=True, is_fenced=False)
    assert server.on_response(ControllerRpcResponse(forwarded.request_id, answer, 1))
    assert node.sent[1] == (101, ControllerRpcResponse(7, answer, 1))
    node.loop.close()


def test_no_loops_and_no_leader_give_not_controller() -> None:
    for leader, forwarded in ((1, True), (None, False)):
        node = _FakeNode(leader_id=leader)
        server = ControllerRpcServer(node, active=None)  # type: ignore[arg-type]
        server.on_request(101, ControllerRpcRequest(3, HEARTBEAT, 101, forwarded))
        [(to, reply)] = node.sent
        assert to == 101 and reply.request_id == 3
        assert reply.response == BrokerHeartbeatResponse(Errors.NOT_CONTROLLER)
        node.loop.close()

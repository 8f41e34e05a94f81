"""The broker's replica manager in quorum mode, without processes: the initial metadata catch-up
(Kafka's BrokerServer: the replica manager sees metadata only once the image has applied the
broker's own RegisterBroker record), and the back-off of position reports.

Scenario (a restart from a stale snapshot, on the node layer): broker 101 restarts with a snapshot
in which partition t-0 (replication.mode=quorum) is led by 102 at epoch 0. Meanwhile the
controller fenced it (leader -1, epoch 1) and 101 registered again (RegisterBroker at a later
offset = its broker epoch). Until the image reaches that offset the replica manager must host
nothing: no replica, no fetch to the zombie leader 102. Once caught up, the replica is fenced at
epoch 1, reports its position there and fetches from nobody."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NoReturn

from harness.runtime.clock import NodeClock
from harness.runtime.config import NodeConfig
from harness.runtime.replica_manager import POSITION_REPORT_REFRESH_MS, ReplicaManager
from quorum.controller.messages import ReportReplicaPositionRequest, ReportReplicaPositionResponse
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    NO_LEADER,
    Endpoint,
    Partition,
    PartitionChange,
    RegisterBroker,
    Topic,
    UnfenceBroker,
)

ME = 101


class _Session:
    registered = True


class _Broker:
    def __init__(self) -> None:
        self.session = _Session()
        self.broker_epoch = -1
        self.sent: list[Any] = []
        self.callbacks: list[Any] = []

    def send_controller(self, request: Any, callback: Any) -> None:
        self.sent.append(request)
        self.callbacks.append(callback)


class _Transport:
    def learn_peer(self, node_id: int, address: Any) -> None:
        pass


class _Node:
    def __init__(self, data_dir: Path) -> None:
        self.node_id = ME
        self.loop = asyncio.new_event_loop()
        self.clock = NodeClock(self.loop)
        self.config = NodeConfig(node_id=ME, cluster_id="c", voters={}, admin_listeners={},
                                 metadata_log_dir=data_dir, process_roles="broker")  # fmt: skip
        self.transport = _Transport()
        self.sent: list[tuple[int, Any]] = []
        self.clock_ms = 1_000_000
        self.leader_id: int | None = 1  # the active controller
        self.epoch = 5  # the metadata quorum's epoch

    def now_ms(self) -> int:
        return self.clock_ms

    def wall_ms(self, mono_ms: int) -> int:
        return mono_ms

    def send(self, to: int, message: Any) -> None:
        self.sent.append((to, message))

    def crash(self, exc: BaseException) -> NoReturn:
        raise exc


def test_a_restarted_broker_acts_on_metadata_only_after_reaching_its_registration(tmp_path: Path) -> None:
    node, broker = _Node(tmp_path), _Broker()
    manager = ReplicaManager(node, broker)  # type: ignore[arg-type]
    try:
        _restart_behind_a_fence(node, broker, manager)
    finally:
        manager.close()
        node.loop.close()


def test_an_accepted_position_report_is_not_resent_until_the_controller_changes(tmp_path: Path) -> None:
    node, broker = _Node(tmp_path), _Broker()
    manager = ReplicaManager(node, broker)  # type: ignore[arg-type]
    try:
        _restart_behind_a_fence(node, broker, manager)
        [r] = manager.replicas.values()
        [report] = broker.sent
        interval_ms = r.core.config.position_report_interval_ms

        def tick(ms: int) -> None:
            node.clock_ms += ms
            manager._step(r, None)

        tick(interval_ms)  # the core re-sends; the first is still in flight
        assert len(broker.sent) == 1
        broker.callbacks[0](ReportReplicaPositionResponse(Errors.NONE, "T1", 0))
        for _ in range(POSITION_REPORT_REFRESH_MS // interval_ms - 1):
            tick(interval_ms)  # accepted by this controller: nothing more to say
        assert len(broker.sent) == 1
        tick(interval_ms)  # a failover this broker has not noticed: refresh it, at the latest now
        assert broker.sent == [report, report]
        node.leader_id, node.epoch = 2, 6  # a new active controller knows no reports
        tick(interval_ms)
        assert broker.sent == [report] * 3
        broker.callbacks[2](None)  # timed out: sent again at the next report
        tick(interval_ms)
        assert broker.sent == [report] * 4
    finally:
        manager.close()
        node.loop.close()


def _restart_behind_a_fence(node: _Node, broker: _Broker, manager: ReplicaManager) -> None:
    image = MetadataImage()
    offset = 0

    def apply(*records: Any) -> None:
        nonlocal offset
        for record in records:
            offset += 1
            image.apply_record(offset, 1, record)

    rpc = (Endpoint("rpc", "127.0.0.1", 1),)
    for b in (101, 102, 103):
        apply(RegisterBroker(b, f"inc-{b}", rpc))
        apply(UnfenceBroker(b, image.broker(b).broker_epoch))  # type: ignore[union-attr]
    apply(Topic("t", "T1", (("replication.mode", "quorum"),)),
          Partition("T1", 0, (101, 102, 103), (101, 102, 103), 102))  # fmt: skip
    snapshot_offset = offset  # the stale snapshot 101 restarts from
    # What 101 has not applied yet: the fence, then its own new registration.
    fence = PartitionChange("T1", 0, leader=NO_LEADER)
    registration = RegisterBroker(ME, "inc-101-b", rpc)
    broker.broker_epoch = snapshot_offset + 2  # the controller answered: epoch = its offset

    manager.on_metadata(image)  # the snapshot, right after the registration answer
    manager._flush()
    assert manager.replicas == {} and node.sent == [] and broker.sent == []

    apply(fence)  # still behind its registration: nothing yet
    manager.on_metadata(image)
    manager._flush()
    assert manager.replicas == {} and node.sent == [] and broker.sent == []

    apply(registration)
    assert image.broker(ME).broker_epoch == broker.broker_epoch  # type: ignore[union-attr]
    manager.on_metadata(image)
    manager._flush()
    [r] = manager.replicas.values()
    status = r.core.status()
    assert (status.role, status.leader_id, status.leader_epoch) == ("offline", NO_LEADER, 1)
    assert node.sent == []  # no fetch to the zombie leader 102
    [report] = broker.sent
    assert isinstance(report, ReportReplicaPositionRequest)
    assert (report.broker_id, report.broker_epoch, report.leader_epoch) == (ME, offset, 1)
    assert r.log.log.read_fenced_epoch() == 1  # durable before the report was sent

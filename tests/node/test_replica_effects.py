"""The broker's replica effect executor (harness/drive/replica_effects.py) over a real core and a
PartitionLog: effects run in the core's order, so an answer is never given before the append it
reports; consumer fetch answers (to = -1) go by request id; follower fetches go to the leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.drive.replica_effects import execute_replica_effects
from partition.log import LogConfig, PartitionLog, Record, SimStorage, encode_batch
from partition.replica import (
    ACKS_ALL,
    ACKS_LEADER,
    CONSUMER_REPLICA_ID,
    FetchRequest,
    LeadershipChanged,
    LocalReplicaLog,
    MetadataUpdated,
    ProduceRequest,
    ReplicaConfig,
    ReplicaCore,
)
from partition.replica.messages import FetchResponse, ProduceResponse
from quorum.controller.messages import (
    AlterPartitionRequest,
    BrokerState,
    ReportReplicaPositionRequest,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Partition


@dataclass
class RecordingEnv:
    """Records every call with the log's end offset and HW at that moment."""

    log: PartitionLog
    calls: list[tuple[str, Any, int, int]] = field(default_factory=list)

    def _note(self, kind: str, value: Any) -> None:
        self.calls.append((kind, value, self.log.log_end_offset, self.log.high_watermark))

    def send_fetch(self, to: int, request: FetchRequest) -> None:
        self._note("fetch", (to, request))

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        self._note("fetch_response", (to, response))

    def send_alter_partition(self, request: AlterPartitionRequest) -> None:
        self._note("alter", request)

    def complete_produce(self, response: ProduceResponse) -> None:
        self._note("produce", response)

    def send_replica_position(self, request: ReportReplicaPositionRequest) -> None:
        self._note("position", request)

    def leadership_changed(self, effect: LeadershipChanged) -> None:
        self._note("leadership", effect)


def leader_setup(isr: tuple[int, ...]) -> tuple[ReplicaCore, LocalReplicaLog, RecordingEnv]:
    log = PartitionLog.open(SimStorage(), "/data", "t", 0, LogConfig())
    local = LocalReplicaLog(log)
    core = ReplicaCore(101, "tid", 0, local, ReplicaConfig(), broker_epoch=5, topic="t")
    env = RecordingEnv(log)
    part = Partition("tid", 0, (101, 102), isr, 101, leader_epoch=3)
    brokers = (BrokerState(101, 5), BrokerState(102, 7))
    execute_replica_effects(core.handle(MetadataUpdated(part, brokers), 0), local, env)
    return core, local, env


def test_acks_1_is_answered_after_the_append_it_reports() -> None:
    core, local, env = leader_setup(isr=(101,))
    data = encode_batch([Record(b"a"), Record(b"b")])
    effects = core.handle(ProduceRequest("tid", 0, 77, data, ACKS_LEADER), 10)
    execute_replica_effects(effects, local, env)
    kind, response, leo_then, _ = env.calls[-1]
    assert kind == "produce"
    assert (response.request_id, response.error, response.base_offset, response.last_offset) == (
        77, Errors.NONE, 0, 1)
    assert leo_then == 2  # the log already held both records when the answer was given


def test_acks_all_waits_for_the_follower_then_completes_with_the_hw() -> None:
    core, local, env = leader_setup(isr=(101, 102))
    data = encode_batch([Record(b"x")])
    execute_replica_effects(core.handle(ProduceRequest("tid", 0, 9, data, ACKS_ALL), 10), local, env)
    assert not [c for c in env.calls if c[0] == "produce"]  # parked until the HW passes it
    fetch = FetchRequest("tid", 0, 102, 1, last_fetched_epoch=3, current_leader_epoch=3,
                         broker_epoch=7, request_id=4)
    execute_replica_effects(core.handle(fetch, 20), local, env)
    produced = [c for c in env.calls if c[0] == "produce"]
    assert len(produced) == 1
    _, response, _, hw_then = produced[0]
    assert (response.error, response.base_offset) == (Errors.NONE, 0) and hw_then == 1


def test_consumer_fetch_answer_is_routed_by_request_id() -> None:
    core, local, env = leader_setup(isr=(101,))
    execute_replica_effects(core.handle(
        ProduceRequest("tid", 0, 1, encode_batch([Record(b"v")]), ACKS_LEADER), 10), local, env)
    fetch = FetchRequest("tid", 0, CONSUMER_REPLICA_ID, 0, request_id=12345)
    execute_replica_effects(core.handle(fetch, 11), local, env)
    kind, (to, response), _, _ = env.calls[-1]
    assert (kind, to, response.request_id, response.error) == (
        "fetch_response", CONSUMER_REPLICA_ID, 12345, Errors.NONE)
    assert response.high_watermark == 1 and response.records


def test_a_follower_fetches_from_its_leader() -> None:
    log = PartitionLog.open(SimStorage(), "/data", "t", 0, LogConfig())
    local = LocalReplicaLog(log)
    core = ReplicaCore(102, "tid", 0, local, ReplicaConfig(), broker_epoch=7, topic="t")
    env = RecordingEnv(log)
    part = Partition("tid", 0, (101, 102), (101, 102), 101, leader_epoch=3)
    execute_replica_effects(core.handle(MetadataUpdated(part, ()), 0), local, env)
    kinds = [c[0] for c in env.calls]
    assert kinds == ["leadership", "fetch"]
    to, request = env.calls[-1][1]
    assert (to, request.replica_id, request.current_leader_epoch, request.broker_epoch) == (
        101, 102, 3, 7)


def test_quorum_mode_fence_report_and_epoch_marker_reach_the_env_and_the_log() -> None:
    log = PartitionLog.open(SimStorage(), "/data", "t", 0, LogConfig())
    local = LocalReplicaLog(log)
    core = ReplicaCore(101, "tid", 0, local, ReplicaConfig(replication_mode="quorum"),
                       broker_epoch=5, topic="t")  # fmt: skip
    env = RecordingEnv(log)
    brokers = (BrokerState(101, 5), BrokerState(102, 7), BrokerState(103, 9))
    part = Partition("tid", 0, (101, 102, 103), (101, 102, 103), 101, leader_epoch=3)
    execute_replica_effects(core.handle(MetadataUpdated(part, brokers), 0), local, env)
    execute_replica_effects(core.handle(ProduceRequest(
        "tid", 0, 1, encode_batch([Record(b"a"), Record(b"b")]), ACKS_LEADER), 1), local, env)
    fenced = Partition("tid", 0, (101, 102, 103), (101, 102, 103), -1, leader_epoch=4,
                       partition_epoch=1)  # fmt: skip
    execute_replica_effects(core.handle(MetadataUpdated(fenced, brokers), 2), local, env)
    kind, report, leo_then, _ = env.calls[-1]
    assert kind == "position" and leo_then == 2
    assert report == ReportReplicaPositionRequest(101, 5, "tid", 0, 4, 3, 2)
    elected = Partition("tid", 0, (101, 102, 103), (101, 102), 101, leader_epoch=5,
                        partition_epoch=2)  # fmt: skip
    execute_replica_effects(core.handle(MetadataUpdated(elected, brokers), 3), local, env)
    # The epoch marker (HW 0 < LEO 2): a control batch of epoch 5 at offset 2, in the log.
    headers = log.batch_headers(0)
    assert [(h.base_offset, h.partition_leader_epoch, h.is_control) for h in headers] == [
        (0, 3, False), (2, 5, True)]
    assert log.log_end_offset == 3 and core.log_end_offset == 3


def test_hw_observer_sees_each_move_after_it_is_applied() -> None:
    """The simulator's invariant hook (harness/sim/actors/broker.py Broker): called once per
    UpdateHighWatermark with the HW before and after, the log already holding `after`."""
    core, local, env = leader_setup(isr=(101, 102))
    seen: list[tuple[int, int, int]] = []

    def observe(before: int, after: int) -> None:
        seen.append((before, after, local.high_watermark))

    data = encode_batch([Record(b"x"), Record(b"y")])
    execute_replica_effects(core.handle(ProduceRequest("tid", 0, 9, data, ACKS_ALL), 10), local,
                            env, observe)
    assert seen == []  # acks=all: the HW waits for the follower
    fetch = FetchRequest("tid", 0, 102, 2, last_fetched_epoch=3, current_leader_epoch=3,
                         broker_epoch=7, request_id=4)
    execute_replica_effects(core.handle(fetch, 20), local, env, observe)
    assert seen == [(0, 2, 2)]
    produced = [c for c in env.calls if c[0] == "produce"]
    assert len(produced) == 1 and produced[0][3] == 2  # answered after the HW moved

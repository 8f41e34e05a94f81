"""replication.mode=raft on the controller (docs/replication.md): a raft partition's replicas are
the voters of one Raft group (partition/raft) and elect their leader themselves. The controller
assigns the replicas and records the leader each group elected, as the leader's broker reports it
(ReportRaftLeadersRequest), so Metadata answers, `topic describe` and clients find it. It never
elects, fences or moves a raft partition's leader, and no election waits for it: with every
controller down the groups keep electing and writing, and brokers answer Metadata from their own
Raft state when it is newer than their image (harness/runtime/raft_leadership.py).

Rules (each checked per partition; errors are per partition):
- A new raft partition has no leader (-1) at epoch 0 and ISR = replicas; the group's first
  election (epoch >= 1) names one.
- A report is recorded when its Raft epoch is newer than the image's, or equal to it with the
  image naming the reporter or nobody (an ISR update; a leader re-asserting itself after the
  controller dropped it). The image's leader epoch becomes the Raft epoch
  (PartitionChange.leader_epoch), so the KIP-320 epochs clients read from Metadata are the ones
  the replicas check. An older epoch is FENCED_LEADER_EPOCH; an epoch whose leader the image
  already names as another broker, a reporter that is not a replica or not in its own ISR, an ISR
  naming a non-replica, or a partition of another mode is INVALID_REQUEST.
- The reported ISR is the leader and the voters that fetched from it within the fetch timeout:
  informational (commits count a majority of the voters, not the ISR), reported only when it
  changes.
- A broker that leaves (fenced, shutting down, re-registering) is taken out of the ISR, and if
  the image names it leader the leader becomes -1 at the same epoch: the controller knows the
  leader is gone, not who comes next (only a Raft election moves the epoch). The ISR never
  becomes empty (Kafka's rule).
- AlterPartition, ElectLeaders and the preferred-leader rebalance do not apply (INVALID_REQUEST,
  or nothing).
"""

from __future__ import annotations

from collections.abc import Collection

import structlog

from quorum.controller.messages import (
    RaftLeader,
    RaftLeaderResult,
    ReportRaftLeadersRequest,
    ReportRaftLeadersResponse,
)
from quorum.controller.result import ControllerResult, PendingRecords
from quorum.metadata.configs import REPLICATION_MODE, REPLICATION_MODE_RAFT
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, Partition, PartitionChange, Topic

__all__ = ["is_raft_topic", "raft_leave", "report_raft_leaders"]

_log = structlog.get_logger("controller")


def is_raft_topic(image: MetadataImage, topic: Topic) -> bool:
    return image.topic_configs(topic.name).get(REPLICATION_MODE) == REPLICATION_MODE_RAFT


def raft_leave(part: Partition, remove: Collection[int]) -> PartitionChange | None:
    """The change taking `remove` out of a raft partition's ISR and leadership (leader -1, the
    epoch unchanged); None if they are in neither."""
    isr = tuple(r for r in part.isr if r not in remove) or part.isr
    leader = NO_LEADER if part.leader in remove else part.leader
    if isr == part.isr and leader == part.leader:
        return None
    return PartitionChange(
        part.topic_id,
        part.partition,
        leader=None if leader == part.leader else leader,
        isr=None if isr == part.isr else isr,
        expected_partition_epoch=part.partition_epoch,
        leader_epoch=part.leader_epoch,
    )


def report_raft_leaders(req: ReportRaftLeadersRequest, image: MetadataImage) -> ControllerResult:
    """Record the leaderships a broker reports (module docstring). Top-level errors:
    BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH (another incarnation: its Raft state may be
    older than what it reports now)."""
    if isinstance(error := image.registered_sender(req.broker_id, req.broker_epoch), Errors):
        return ControllerResult(response=ReportRaftLeadersResponse(error))
    batch = PendingRecords(image)
    results = [_record_one(batch, req.broker_id, report) for report in req.leaders]
    return batch.result(ReportRaftLeadersResponse(Errors.NONE, tuple(results)))


def _record_one(batch: PendingRecords, broker_id: int, report: RaftLeader) -> RaftLeaderResult:
    view = batch.view
    topic = view.topic_by_id(report.topic_id)
    part = view.partition(report.topic_id, report.partition)
    if topic is None or part is None:
        return RaftLeaderResult(report.topic_id, report.partition,
                                Errors.UNKNOWN_TOPIC_OR_PARTITION)  # fmt: skip

    def answer(error: Errors) -> RaftLeaderResult:
        now = batch.view.partition(report.topic_id, report.partition)
        assert now is not None
        return RaftLeaderResult(report.topic_id, report.partition, error, now.leader,
                                now.leader_epoch)  # fmt: skip

    if (not is_raft_topic(view, topic) or broker_id not in part.replicas
            or broker_id not in report.isr or not set(report.isr) <= set(part.replicas)
            or len(set(report.isr)) != len(report.isr)):  # fmt: skip
        return answer(Errors.INVALID_REQUEST)
    if report.leader_epoch < part.leader_epoch:
        return answer(Errors.FENCED_LEADER_EPOCH)
    if report.leader_epoch == part.leader_epoch and part.leader not in (NO_LEADER, broker_id):
        return answer(Errors.INVALID_REQUEST)  # one leader per epoch: the image has another
    isr = tuple(r for r in part.replicas if r in report.isr)  # assignment order
    if (part.leader, part.leader_epoch, part.isr) == (broker_id, report.leader_epoch, isr):
        return answer(Errors.NONE)  # already recorded (a repeated report)
    batch.add(PartitionChange(
        part.topic_id, part.partition,
        leader=None if part.leader == broker_id else broker_id,
        isr=None if isr == part.isr else isr,
        expected_partition_epoch=part.partition_epoch,
        leader_epoch=report.leader_epoch,
    ))  # fmt: skip
    if (part.leader, part.leader_epoch) != (broker_id, report.leader_epoch):
        _log.info("controller.raft_leader_recorded", topic=topic.name, partition=part.partition,
                  leader=broker_id, leader_epoch=report.leader_epoch, isr=list(isr))  # fmt: skip
    return answer(Errors.NONE)

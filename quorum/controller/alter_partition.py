"""AlterPartition validation, in the order of Kafka's ReplicationControlManager
(validateAlterPartitionData), so a request broken in several ways gets the error Kafka gives.

1. the sender is not registered with that broker epoch      -> STALE_BROKER_EPOCH
2. unknown topic id or partition                            -> UNKNOWN_TOPIC_OR_PARTITION
3. leader or partition epoch newer than the controller's    -> NOT_CONTROLLER (we are behind)
4. leader epoch older than the partition's                  -> FENCED_LEADER_EPOCH
5. sender is not the partition leader                       -> INVALID_REQUEST
6. partition epoch older than the partition's               -> INVALID_UPDATE_VERSION
7. ISR not a duplicate-free subset of the replicas, or the
   leader not in it                                         -> INVALID_REQUEST
8. RECOVERING with more than one ISR member, or going back
   from RECOVERED to RECOVERING (KIP-704)                   -> INVALID_REQUEST
9. a member unregistered, fenced, shutting down, or whose
   broker epoch is not the registered one (KIP-841, KIP-903) -> INELIGIBLE_REPLICA

After a successful validation the controller builds the change; if that change names another
leader, the response is NEW_LEADER_ELECTED (Kafka: only after a reassignment).
"""

from __future__ import annotations

from quorum.controller.messages import AlterPartitionRequest
from quorum.metadata.errors import Errors
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import LeaderRecoveryState, PartitionChange


def validate_alter_partition(req: AlterPartitionRequest, image: MetadataImage) -> Errors:
    """Errors.NONE if the request may change the partition, else the error to answer with."""
    sender = image.broker(req.broker_id)
    if sender is None or sender.broker_epoch != req.broker_epoch:
        return Errors.STALE_BROKER_EPOCH
    part = image.partition(req.topic_id, req.partition)
    if part is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    if req.leader_epoch > part.leader_epoch or req.partition_epoch > part.partition_epoch:
        return Errors.NOT_CONTROLLER
    if req.leader_epoch < part.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH  # KIP-320: a deposed leader
    if req.broker_id != part.leader:
        return Errors.INVALID_REQUEST
    if req.partition_epoch < part.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION  # KIP-497: built on a stale ISR
    new_isr = [s.broker_id for s in req.new_isr_with_epochs]
    if (
        len(set(new_isr)) != len(new_isr)
        or not set(new_isr) <= set(part.replicas)
        or part.leader not in new_isr
    ):
        return Errors.INVALID_REQUEST
    if req.leader_recovery_state not in (
        LeaderRecoveryState.RECOVERED,
        LeaderRecoveryState.RECOVERING,
    ):
        return Errors.INVALID_REQUEST
    if req.leader_recovery_state == LeaderRecoveryState.RECOVERING and (
        len(new_isr) > 1 or part.leader_recovery_state == LeaderRecoveryState.RECOVERED
    ):
        return Errors.INVALID_REQUEST  # KIP-704
    for member in req.new_isr_with_epochs:
        b = image.broker(member.broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown:
            return Errors.INELIGIBLE_REPLICA  # KIP-841
        if member.broker_epoch != -1 and member.broker_epoch != b.broker_epoch:
            return Errors.INELIGIBLE_REPLICA  # KIP-903: a member from an earlier incarnation
    return Errors.NONE


def alter_partition_outcome(change: PartitionChange | None, sender: int) -> Errors:
    """The error of a validated AlterPartition whose change is `change`: NEW_LEADER_ELECTED when
    the change names a leader other than the sender (Kafka answers so, and still writes it)."""
    if change is not None and change.leader is not None and change.leader != sender:
        return Errors.NEW_LEADER_ELECTED
    return Errors.NONE

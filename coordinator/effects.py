"""What the group coordinator asks its driver to do, and the one input that reports back.

Effects come as an ordered list; the driver executes them in order. The order is the durability
contract (as in partition/replica/effects.py): a response that depends on records is never in the
same list as their AppendRecords; it comes later, from the `AppendCompleted` of that append.

    AppendRecords(partition, leader_epoch, append_id, records)
        Append `records` to partition `partition` of `__consumer_offsets`, as ONE batch (all or
        none; Kafka's coordinator writes a request's records atomically), acks=all, as the
        leader at `leader_epoch` (refuse with NOT_LEADER_OR_FOLLOWER if no longer it). When the
        high watermark passes the batch (committed), or the append fails, feed back
        AppendCompleted(partition, append_id, error). Completions of one partition arrive in the
        order of the appends (a partition's HW only moves forward).
    SendResponse(response)
        Answer the request `response.request_id`: exactly once per request.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.messages import GroupResponse
from coordinator.records import CoordinatorRecord
from quorum.metadata.errors import Errors

__all__ = ["AppendCompleted", "AppendRecords", "Effect", "SendResponse"]


@dataclass(frozen=True, slots=True)
class AppendRecords:
    partition: int
    leader_epoch: int
    append_id: int
    records: tuple[CoordinatorRecord, ...]


@dataclass(frozen=True, slots=True)
class SendResponse:
    response: GroupResponse


Effect = AppendRecords | SendResponse


@dataclass(frozen=True, slots=True)
class AppendCompleted:
    """The append `append_id` is committed (error NONE) or failed (the partition's error:
    NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT...)."""

    partition: int
    append_id: int
    error: Errors = Errors.NONE

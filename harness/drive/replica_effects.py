"""Executing a replica core's effects (partition/replica/effects.py), in order, for a driver.

One function shared by every driver of ReplicaCore (the broker runtime's ReplicaManager, and
the simulator's Broker in harness/sim/actors/broker.py), so the effect semantics cannot drift apart
(one core, two drivers; one execute_effects, `assert_never` over the union):

- the six log effects go to `LocalReplicaLog.execute` (the PartitionLog, through LogManager so a
  truncation rewrites the checkpoints); an optional `on_high_watermark(before, after)` observes
  each HW move (the simulator's invariant checks);
- SendFetch / SendFetchResponse / SendAlterPartition / SendReplicaPosition / CompleteProduce /
  LeadershipChanged go to the env, which must only *queue* work (send buffers, future callbacks
  scheduled by the loop, simulated messages on the event queue):
  nothing here may feed an input back into the same core while its list is running (the core's
  contract: effects run synchronously, in order, before its next input).

Order is the durability contract: a CompleteProduce is reached only after the AppendAsLeader it
reports, a follower's next SendFetch only after the append or truncation before it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, assert_never

from partition.replica import (
    AppendAsFollower,
    AppendAsLeader,
    CompleteProduce,
    Effect,
    IncrementLogStartOffset,
    LeadershipChanged,
    LocalReplicaLog,
    SendAlterPartition,
    SendFetch,
    SendFetchResponse,
    SendReplicaPosition,
    TruncateFully,
    TruncateTo,
    UpdateHighWatermark,
)
from partition.replica.messages import FetchRequest, FetchResponse, ProduceResponse
from quorum.controller.messages import AlterPartitionRequest, ReportReplicaPositionRequest


class ReplicaEffectsEnv(Protocol):
    """What a driver provides for the non-log effects of one replica."""

    def send_fetch(self, to: int, request: FetchRequest) -> None: ...

    def send_fetch_response(self, to: int, response: FetchResponse) -> None:
        """`to` is a broker id, or -1 (CONSUMER_REPLICA_ID): route by `response.request_id`."""
        ...

    def send_alter_partition(self, request: AlterPartitionRequest) -> None: ...

    def send_replica_position(self, request: ReportReplicaPositionRequest) -> None:
        """replication.mode=quorum: to the active controller, best effort (the core re-sends)."""
        ...

    def complete_produce(self, response: ProduceResponse) -> None: ...

    def leadership_changed(self, effect: LeadershipChanged) -> None: ...


def execute_replica_effects(
    effects: list[Effect],
    log: LocalReplicaLog,
    env: ReplicaEffectsEnv,
    on_high_watermark: Callable[[int, int], None] | None = None,
) -> None:
    """Run `effects` in order. `on_high_watermark(before, after)`, if given, is called right
    after each UpdateHighWatermark is applied (the simulator checks its invariants there)."""
    for effect in effects:
        match effect:
            case UpdateHighWatermark(high_watermark=after):
                before = log.high_watermark
                log.execute(effect)
                if on_high_watermark is not None:
                    on_high_watermark(before, after)
            case (
                AppendAsLeader()
                | AppendAsFollower()
                | TruncateTo()
                | TruncateFully()
                | IncrementLogStartOffset()
            ):
                log.execute(effect)
            case SendFetch(to=to, request=request):
                env.send_fetch(to, request)
            case SendFetchResponse(to=to, response=response):
                env.send_fetch_response(to, response)
            case SendAlterPartition(request=request):
                env.send_alter_partition(request)
            case SendReplicaPosition(request=request):
                env.send_replica_position(request)
            case CompleteProduce(response=response):
                env.complete_produce(response)
            case LeadershipChanged():
                env.leadership_changed(effect)
            case _:
                assert_never(effect)

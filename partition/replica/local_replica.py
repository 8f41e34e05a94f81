"""LocalReplica: the explicit state of this broker's replica of one partition, owned by
partition.replica.core.ReplicaCore and passed to the leader and follower rules
(partition.replica.leader, partition.replica.follower), which are functions over it and over
the role they apply to.

It holds who the replica is (node, topic, partition, broker epoch), its config, what the
metadata says (the partition record, the eligible brokers, quorum mode's fenced epoch) and its
log as one call sees it: `leo`, `hw`, `log_start`, `latest_epoch` include what the call asked for
but the driver has not done yet, and `sync()` re-reads them from the log at the start of every
call (the log contract: read through ReplicaLog, write only through effects). The role is not
here: ReplicaCore owns it and every transition.

Invariants (checked by ReplicaCore after every call, InvariantViolation): HW <= LEO; a leader's
HW never decreases.
"""

from __future__ import annotations

from typing import Any

from partition.replica.config import ReplicaConfig
from partition.replica.local_log import ReplicaLog
from partition.replica.messages import ReplicaPosition
from partition.replica.state import FollowerReplica, Leader
from quorum.metadata.records import Partition


class LocalReplica:
    def __init__(self, node_id: int, topic_id: str, partition_id: int, log: ReplicaLog,
                 config: ReplicaConfig, broker_epoch: int, fenced_epoch: int,
                 logger: Any) -> None:  # fmt: skip
        self.node_id = node_id
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.log = log
        self.config = config
        self.broker_epoch = broker_epoch
        # Quorum mode: the highest fenced epoch this replica reported its position at (the
        # driver persists it before sending the report and passes it back after a restart).
        # Partition state of an earlier leader epoch is never acted on again (quorum_mode).
        self.fenced_epoch = fenced_epoch
        self.partition: Partition | None = None
        self.eligible_brokers: dict[int, int] = {}
        self.logger = logger
        self.now_ms = 0
        self.next_fetch_id = 1  # never reused, across leaders too
        self.sync()

    def sync(self) -> None:
        """Re-read the log: every effect of the previous call has been executed by now."""
        self.leo = self.log.log_end_offset
        self.hw = self.log.high_watermark
        self.log_start = self.log.log_start_offset
        self.latest_epoch = self.log.latest_epoch()

    def position(self) -> ReplicaPosition:
        """(last epoch, LEO) of this replica: what a quorum-mode election compares."""
        return ReplicaPosition(self.node_id, self.latest_epoch, self.leo)

    # ------------------------------------------------------------------ what the metadata says

    def isr(self) -> frozenset[int]:
        return frozenset(self.partition.isr) if self.partition is not None else frozenset()

    def maximal_isr(self, leader: Leader) -> frozenset[int]:
        """KIP-497: while a change is in flight, the ISR is current | proposed (for HW and acks)."""
        isr = self.isr()
        return isr | leader.in_flight.proposed_isr if leader.in_flight is not None else isr

    def effective_min_isr(self) -> int:
        replicas = len(self.partition.replicas) if self.partition is not None else 1
        return min(self.config.min_insync_replicas, replicas)

    def is_under_min_isr(self) -> bool:
        """ISR mode only: quorum mode has no ISR requirement (a majority of replicas commits)."""
        return not self.config.is_quorum_mode and len(self.isr()) < self.effective_min_isr()

    def leader_hint(self) -> tuple[int, int]:
        p = self.partition
        return (p.leader, p.leader_epoch) if p is not None else (-1, -1)

    def is_eligible(self, f: FollowerReplica) -> bool:
        """KIP-841/903: registered, unfenced, not shutting down, same broker epoch it fetched with."""
        registered = self.eligible_brokers.get(f.replica_id)
        return registered is not None and f.broker_epoch in (-1, registered)

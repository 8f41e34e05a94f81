"""What a controller reports of the quorum: docs/api.md /quorum/status and /quorum/replication, in
the shape kafka-metadata-quorum's `describe --status` / `--replication` print.

Only the leader knows every replica's log end offset and fetch times (DescribeQuorum is answered
by the leader in Kafka), so lag fields are -1 ("unknown") on other nodes, and /quorum/replication
is forwarded to the leader by the admin API. Timestamps are Unix epoch ms (KIP-836).

`partition_health` counts offline / under-replicated / under-min-ISR partitions from a metadata
image, the way Kafka defines each (`kraftlab cluster status`, GET /cluster, /metrics).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from harness.runtime.context import NodeContext
from quorum.metadata.configs import (
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    REPLICATION_MODE_QUORUM,
    REPLICATION_MODE_RAFT,
)
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER


def quorum_status(node: NodeContext) -> dict[str, Any]:
    """This node's view; the lag fields are filled in on the leader only."""
    status = node.raft_status()
    snapshot = status.latest_snapshot
    out: dict[str, Any] = {
        "cluster_id": node.cluster_id,
        "node_id": node.node_id,
        "role": status.role,
        "leader_id": status.leader_id,
        "leader_epoch": status.epoch,
        "voted_id": status.voted_id,  # whom this node voted for in leader_epoch (or null)
        "high_watermark": status.high_watermark,
        "log_end_offset": status.log_end_offset,
        "applied_offset": node.image.applied_offset,
        # The metadata log's start (above 0 once a snapshot replaced its prefix, KIP-630), the
        # newest snapshot, and a digest of the image's state without its applied position (the
        # idle no-ops move that): two nodes with equal digests hold the same metadata.
        "log_start_offset": status.log_start_offset,
        "latest_snapshot": None if snapshot is None else {
            "end_offset": snapshot.offset, "epoch": snapshot.epoch},
        "state_digest": state_digest(node.image),
        "max_follower_lag": -1,
        "max_follower_lag_time_ms": -1,
        "current_voters": list(status.voters),
        "current_observers": [r.node_id for r in status.replicas if not r.is_voter],
    }
    voters = [r for r in status.replicas if r.is_voter]
    if voters:
        # Kafka: MaxFollowerLag = leader LEO - lowest voter LEO; MaxFollowerLagTimeMs = how long
        # ago that laggard was last caught up (0 when nobody lags, -1 when never caught up).
        laggard = min(voters, key=lambda r: r.log_end_offset)
        lag = status.log_end_offset - laggard.log_end_offset
        out["max_follower_lag"] = lag
        if lag == 0:
            out["max_follower_lag_time_ms"] = 0
        elif laggard.last_caught_up_ms is not None:
            out["max_follower_lag_time_ms"] = max(0, node.now_ms() - laggard.last_caught_up_ms)
    return out


def state_digest(image: MetadataImage) -> str:
    state = image.copy()
    state.applied_offset, state.applied_epoch = -1, 0
    return hashlib.sha256(state.snapshot()).hexdigest()[:32]


def quorum_replication(node: NodeContext) -> list[dict[str, Any]]:
    """One row per voter, then per observer (leader only; elsewhere the list is empty)."""
    status = node.raft_status()
    now_ms = node.now_ms()

    def ts(value: int | None, own: bool) -> int:
        if own:
            value = now_ms  # the leader is always caught up with itself
        return -1 if value is None else node.wall_ms(value)

    rows = []
    for r in sorted(status.replicas, key=lambda r: (not r.is_voter, r.node_id)):
        own = r.node_id == node.node_id
        rows.append({
            "node_id": r.node_id,
            "log_end_offset": r.log_end_offset,
            "lag": max(0, status.log_end_offset - r.log_end_offset),
            "last_fetch_timestamp": ts(r.last_fetch_ms, own),
            "last_caught_up_timestamp": ts(r.last_caught_up_ms, own),
            "status": "Leader" if own else "Follower" if r.is_voter else "Observer",
        })
    return rows


# --- partition health from the metadata image (cluster status, /metrics) --------------------------

@dataclass(frozen=True, slots=True)
class PartitionHealth:
    """Counts over the metadata image, with Kafka's definitions:

    - offline: no leader (KRaft's ControllerMetadataMetrics OfflinePartitionsCount: NO_LEADER);
    - under_replicated: ISR smaller than the replica set (ReplicaManager UnderReplicatedPartitions,
      `kafka-topics --under-replicated-partitions`);
    - under_min_isr: no leader, or ISR smaller than the topic's min.insync.replicas (TopicCommand's
      `--under-min-isr-partitions`; the broker gauge UnderMinIsrPartitionCount counts only led
      partitions with a short ISR, which `led_by` gives);
    - at_min_isr: ISR exactly min.insync.replicas (AtMinIsrPartitionCount): one more loss and
      acks=all produce fails.
    replication.mode=quorum topics: an offset commits on a majority of the replicas and
    min.insync.replicas does not apply, so "min ISR" there is the majority (RF // 2 + 1):
    under_min_isr = no leader or fewer than a majority in the ISR (acks=all cannot commit),
    at_min_isr = exactly a majority. The ISR of a quorum-mode partition is the leader's set of
    caught-up replicas (the election's reporting majority, then grown and shrunk by the leader
    as in ISR mode), so under_replicated keeps its meaning: some replica is not caught up.
    replication.mode=raft topics likewise (acks=all waits for a majority of the voters): the
    leader and ISR are what the Raft leader last reported (harness/runtime/raft_leadership.py:
    the ISR is the voters that fetched from it within fetch.timeout.ms), and offline is a
    partition whose reported leader left (fenced, or no election yet).
    The lists name the partitions as `topic-partition`, sorted."""

    total: int
    offline: tuple[str, ...]
    under_replicated: tuple[str, ...]
    under_min_isr: tuple[str, ...]
    at_min_isr: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "offline": list(self.offline),
                "under_replicated": list(self.under_replicated),
                "under_min_isr": list(self.under_min_isr), "at_min_isr": list(self.at_min_isr)}


def partition_health(image: MetadataImage, led_by: int | None = None) -> PartitionHealth:
    """Health of every partition in `image` (or of those `led_by` leads, the broker's view)."""
    total = 0
    offline: list[str] = []
    under: list[str] = []
    under_min: list[str] = []
    at_min: list[str] = []
    min_isr_of: dict[str, int] = {}
    for topic, part in image.all_partitions():
        if led_by is not None and part.leader != led_by:
            continue
        total += 1
        name = f"{topic.name}-{part.partition}"
        if topic.name not in min_isr_of:
            configs = image.topic_configs(topic.name)
            if configs.get(REPLICATION_MODE) in (REPLICATION_MODE_QUORUM, REPLICATION_MODE_RAFT):
                min_isr_of[topic.name] = -1  # the majority of each partition's replicas
            else:
                try:
                    min_isr_of[topic.name] = int(configs[MIN_INSYNC_REPLICAS])
                except (KeyError, ValueError):
                    min_isr_of[topic.name] = 1
        min_isr = min_isr_of[topic.name]
        if min_isr < 0:
            min_isr = len(part.replicas) // 2 + 1
        has_leader = part.leader != NO_LEADER
        if not has_leader:
            offline.append(name)
        if len(part.isr) < len(part.replicas):
            under.append(name)
        if not has_leader or len(part.isr) < min_isr:
            under_min.append(name)
        if len(part.isr) == min_isr:
            at_min.append(name)
    return PartitionHealth(total, tuple(offline), tuple(under), tuple(under_min), tuple(at_min))

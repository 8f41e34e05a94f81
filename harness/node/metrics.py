"""Prometheus text exposition (format 0.0.4) for GET /metrics, and a small latency window.

Metric names mirror Kafka's JMX names where one exists (ActiveControllerCount, the raft-metrics
group: high-watermark, current-epoch, log-end-offset, commit-latency), in Prometheus style.
No client library: a handful of gauges and one summary do not need one.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.node.runtime import ControllerNode


class LatencyWindow:
    """The last `size` samples (ms) plus all-time count and sum, for a Prometheus summary."""

    def __init__(self, size: int = 4096) -> None:
        self.samples: deque[float] = deque(maxlen=size)
        self.count = 0
        self.total_ms = 0.0

    def add(self, value_ms: float) -> None:
        self.samples.append(value_ms)
        self.count += 1
        self.total_ms += value_ms

    def quantile(self, q: float) -> float:
        if not self.samples:
            return math.nan
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _line(name: str, value: float, help_text: str, kind: str = "gauge") -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n{name} {value}\n"


def render_metrics(node: ControllerNode) -> str:
    t = node.transport
    parts = [
        _line("kraftlab_controller_active_controller_count", 1 if node.is_leader else 0,
              "1 on the active controller (Kafka ActiveControllerCount)"),
        _line("kraftlab_raft_high_watermark", node.high_watermark, "Raft high watermark"),
        _line("kraftlab_raft_log_end_offset", node.log.end_offset, "metadata log end offset"),
        _line("kraftlab_raft_leader_epoch", node.epoch, "current leader epoch"),
        _line("kraftlab_raft_current_leader", -1 if node.leader_id is None else node.leader_id,
              "known leader id (-1: none)"),
        _line("kraftlab_metadata_applied_offset", node.image.applied_offset,
              "last offset applied to the metadata image"),
        _line("kraftlab_transport_bad_frames_total", t.bad_frames,
              "connections closed for a bad frame", "counter"),
        _line("kraftlab_transport_refused_handshakes_total", t.refused,
              "handshakes refused (other cluster)", "counter"),
        _line("kraftlab_transport_messages_sent_total", t.sent, "messages sent", "counter"),
        _line("kraftlab_transport_dropped_total", t.dropped_in + t.dropped_out,
              "messages dropped by the link filter or backpressure", "counter"),
    ]
    lat = node.commit_latency
    name = "kraftlab_raft_commit_latency_ms"
    summary = [f"# HELP {name} propose-to-apply latency on the leader (ms)",
               f"# TYPE {name} summary"]
    for q in (0.5, 0.99):
        summary.append(f'{name}{{quantile="{q}"}} {lat.quantile(q)}')
    summary.append(f"{name}_sum {lat.total_ms}")
    summary.append(f"{name}_count {lat.count}")
    parts.append("\n".join(summary) + "\n")
    if node.broker is not None:
        parts.append(_replica_metrics(node))
    return "".join(parts)


def _replica_metrics(node: ControllerNode) -> str:
    """Data replicas of a broker: Kafka's ReplicaManager gauges (LeaderCount, PartitionCount,
    UnderReplicatedPartitions) plus per-partition LEO/HW and the fetch batching counters."""
    assert node.broker is not None
    rm = node.broker.replicas
    statuses = [r.core.status() for r in rm.replicas.values()]
    leaders = [s for s in statuses if s.role == "leader"]
    out = [
        _line("kraftlab_replica_partition_count", len(statuses), "replicas hosted here"),
        _line("kraftlab_replica_leader_count", len(leaders), "partitions led here"),
        _line("kraftlab_replica_under_replicated_partitions",
              sum(1 for s in leaders if len(s.isr) < len(s.followers) + 1),
              "led partitions whose ISR is smaller than the replica set"),
        _line("kraftlab_replica_fetch_frames_sent_total", rm.fetch_frames_sent,
              "ReplicaFetchBatch frames sent (one per source broker per loop iteration)",
              "counter"),
        _line("kraftlab_replica_fetch_requests_sent_total", rm.fetch_requests_sent,
              "partition fetch requests carried by those frames", "counter"),
        _line("kraftlab_replica_produce_batches_total", rm.produced_batches,
              "produce requests handed to leader replicas", "counter"),
    ]
    for name, field in (("log_end_offset", "log_end_offset"), ("high_watermark", "high_watermark")):
        metric = f"kraftlab_replica_{name}"
        lines = [f"# HELP {metric} per partition replica", f"# TYPE {metric} gauge"]
        for (topic, partition), r in sorted(rm.by_name.items()):
            value = getattr(r.core, field)
            lines.append(f'{metric}{{topic="{topic}",partition="{partition}"}} {value}')
        out.append("\n".join(lines) + "\n")
    return "".join(out)

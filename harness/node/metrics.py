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
    return "".join(parts)

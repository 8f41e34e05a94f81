"""Replica agreement: do the replicas of a partition hold the same records below their high
watermarks? The check Kafka's ReplicaVerificationTool makes, as a pure function over the replicas'
logs as each broker holds them (GET .../replica-log on real processes).

Anomaly `replica-divergence`: two replicas hold different values at one offset below both their
high watermarks (KIP-101's scenario 2: committed data no longer agreed on; a consumer reads one
or the other depending on who leads). Offsets at or above a replica's high watermark are not
compared (a follower's uncommitted tail may still be truncated), nor offsets one replica does not
hold (below its log start, or above its log end).

Invariant: `check_replicas` is a pure function of its input; examples are capped per anomaly,
counts are exact (one per diverging offset per partition, however many replicas disagree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 8
ANOMALY = "replica-divergence"


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """One broker's replica of one partition: (offset, value) records and its high watermark."""

    broker: int
    records: Sequence[tuple[int, Any]]
    high_watermark: int


@dataclass(slots=True)
class ReplicaCheck:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    compared: dict[str, int] = field(default_factory=dict)  # partition -> offsets compared

    @property
    def valid(self) -> bool:
        return not self.anomalies


def check_replicas(partitions: Mapping[str, Sequence[ReplicaLog]]) -> ReplicaCheck:
    """`partitions`: topic-partition -> its replicas' logs."""
    out = ReplicaCheck()
    for tp in sorted(partitions):
        replicas = sorted(partitions[tp], key=lambda r: r.broker)
        by_offset: dict[int, dict[int, Any]] = {}
        for r in replicas:
            for offset, value in r.records:
                if offset < r.high_watermark:
                    by_offset.setdefault(offset, {})[r.broker] = value
        out.compared[tp] = sum(1 for held in by_offset.values() if len(held) > 1)
        for offset in sorted(by_offset):
            held = by_offset[offset]
            if len(set(map(repr, held.values()))) > 1:
                out.counts[ANOMALY] = out.counts.get(ANOMALY, 0) + 1
                examples = out.anomalies.setdefault(ANOMALY, [])
                if len(examples) < MAX_EXAMPLES:
                    examples.append({"partition": tp, "offset": offset,
                                     "values": {str(b): v for b, v in sorted(held.items())}})
    return out

"""Which `__consumer_offsets` partition holds a group: Kafka's
`Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions` (GroupCoordinatorService
.partitionFor), bit for bit, so a group lands on the same partition number as in Kafka.

Java's `String.hashCode` is `s[0]*31^(n-1) + ... + s[n-1]` over the string's UTF-16 code units
in 32-bit two's-complement arithmetic; a character outside the Basic Multilingual Plane counts as
its two surrogates. Kafka's `Utils.abs` maps Integer.MIN_VALUE to 0 (Math.abs would leave it
negative), so "polygenelubricants", whose hash is exactly -2^31, goes to partition 0.
"""

from __future__ import annotations

__all__ = ["java_string_hash", "kafka_abs", "partition_for"]

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode()` of `s`, as a signed 32-bit int."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: |n|, and 0 for Integer.MIN_VALUE."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of `group_id` (its coordinator is that partition's
    leader)."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions

"""Config names and defaults the metadata layer knows (Kafka's names and defaults).

Topic configs are stored as strings, like Kafka's ConfigRecord; `validate_topic_config` is the one
place that decides whether a (name, value) pair is acceptable, so the controller (INVALID_CONFIG)
and anything else that parses topic configs agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
REPLICATION_MODE = "replication.mode"
SEGMENT_BYTES = "segment.bytes"
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
# Log configs applied to each hosted partition log (partition/log/config.py LogConfig.from_topic_configs).
SEGMENT_MS = "segment.ms"
CLEANUP_POLICY = "cleanup.policy"
FLUSH_MESSAGES = "flush.messages"
FLUSH_MS = "flush.ms"
MAX_MESSAGE_BYTES = "max.message.bytes"

LONG_MAX = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" for flush.messages / flush.ms

REPLICATION_MODES = ("isr", "quorum")

TOPIC_CONFIG_DEFAULTS: Mapping[str, str] = {
    MIN_INSYNC_REPLICAS: "1",
    UNCLEAN_LEADER_ELECTION_ENABLE: "false",
    REPLICATION_MODE: "isr",
    SEGMENT_BYTES: str(1024 * 1024 * 1024),  # Kafka: 1 GiB
    RETENTION_MS: str(7 * 24 * 3600 * 1000),  # Kafka: 7 days
    RETENTION_BYTES: "-1",  # Kafka: unlimited
    SEGMENT_MS: str(7 * 24 * 3600 * 1000),  # Kafka: 7 days (log.roll.hours=168)
    CLEANUP_POLICY: "delete",  # Kafka's default; "compact" is refused (no log cleaner here)
    FLUSH_MESSAGES: str(LONG_MAX),  # Kafka: never; leave it to the OS and to replication
    FLUSH_MS: str(LONG_MAX),
    MAX_MESSAGE_BYTES: str(1024 * 1024 + 12),  # Kafka: 1048588 (1 MiB + the batch overhead)
}


def _is_int(minimum: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return int(value) >= minimum
        except ValueError:
            return False

    return check


def _is_long(minimum: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return minimum <= int(value) <= LONG_MAX
        except ValueError:
            return False

    return check


def _is_bool(value: str) -> bool:
    return value in ("true", "false")


_VALIDATORS: Mapping[str, Callable[[str], bool]] = {
    MIN_INSYNC_REPLICAS: _is_int(1),
    UNCLEAN_LEADER_ELECTION_ENABLE: _is_bool,
    REPLICATION_MODE: lambda v: v in REPLICATION_MODES,
    SEGMENT_BYTES: _is_int(14),  # Kafka's minimum segment size (LegacyRecord.RECORD_OVERHEAD_V0)
    RETENTION_MS: _is_int(-1),
    RETENTION_BYTES: _is_int(-1),
    SEGMENT_MS: _is_long(1),
    CLEANUP_POLICY: lambda v: v == "delete",
    FLUSH_MESSAGES: _is_long(1),  # Kafka: at least 1 (0 is refused)
    FLUSH_MS: _is_long(0),
    MAX_MESSAGE_BYTES: _is_int(0),
}


def validate_topic_config(name: str, value: str) -> str | None:
    """None if `name=value` is a valid topic config, else a message saying why not."""
    check = _VALIDATORS.get(name)
    if check is None:
        return f"unknown topic config {name!r}"
    if name == CLEANUP_POLICY and value != "delete" and set(value.split(",")) <= {"compact", "delete"}:
        return (f"invalid value {value!r} for topic config {name!r}: compaction is not "
                f"supported (kraftlab has no log cleaner); only 'delete' is")
    if not check(value):
        return f"invalid value {value!r} for topic config {name!r}"
    return None


def effective_topic_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Defaults overlaid with a topic's overrides."""
    merged = dict(TOPIC_CONFIG_DEFAULTS)
    merged.update(overrides)
    return merged

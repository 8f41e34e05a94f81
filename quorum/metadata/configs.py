"""Config names and defaults the metadata layer knows (Kafka's names and defaults).

Topic configs are stored as strings, like Kafka's ConfigRecord; `validate_topic_config` is the one
place that decides whether a (name, value) pair is acceptable, so the controller (INVALID_CONFIG)
and anything else that parses topic configs agree, and `canonical_topic_config` the form the
controller stores it in.

Invariant: an accepted integer config matches `-?[0-9]+` (ASCII), lies within Kafka's type (INT:
32-bit, LONG: 64-bit) and lower bound, and is stored as `str(int(value))`; so every reader's
int() gets a value in range, and the same setting is always the same string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

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
# kraftlab: "false" replays the pre-0.11 follower (truncate to its own HW, no leader-epoch
# divergence check; KIP-101). UNSAFE: loses acknowledged writes and lets replicas diverge below
# the HW (docs/replication.md). Only for replication.mode=isr.
LEADER_EPOCH_ENABLE = "leader.epoch.enable"

LONG_MAX = 2**63 - 1  # Kafka's Long.MAX_VALUE: "never" for flush.messages / flush.ms

# replication.mode values: Kafka's ISR, kraftlab's controller-run majority election, and a Raft
# group per partition whose replicas elect their own leader (partition/raft).
REPLICATION_MODE_ISR = "isr"
REPLICATION_MODE_QUORUM = "quorum"
REPLICATION_MODE_RAFT = "raft"
REPLICATION_MODES = (REPLICATION_MODE_ISR, REPLICATION_MODE_QUORUM, REPLICATION_MODE_RAFT)

# Kafka's internal topics: created by the brokers themselves (the group coordinator's offsets
# topic, docs/groups.md), with configs a user topic may not have here. `__consumer_offsets` is
# cleanup.policy=compact as in Kafka; kraftlab has no log cleaner, so the policy is stored and
# shown but only means "no retention deletes this log" (harness/runtime/log_configs.py).
OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
COMPACT_POLICIES = frozenset({"compact", "compact,delete", "delete,compact"})

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
    LEADER_EPOCH_ENABLE: "true",  # kraftlab (KIP-101 on); "false" is the unsafe pre-0.11 mode
}


# Kafka's ConfigDef types: INT is a Java int, LONG a Java long. A value outside them is refused
# (Kafka: "Not a number of type INT"), so nothing downstream sees, say, a segment.bytes past
# 2^31-1, which the offset index (">ii": 32-bit positions) cannot address.
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
# Integers are ASCII digits with an optional minus, nothing else: Python's int() would also take
# " 5 ", "+5", "1_000" and non-ASCII digits, which no Kafka client sends and the stored string
# would keep as typed. Accepted values are stored canonical (`canonical_topic_config`).
INTEGER_SYNTAX = re.compile(r"-?[0-9]+")


def parse_ascii_int(value: str) -> int:
    """int() of a `INTEGER_SYNTAX` match; any number of leading zeros, but past 20 significant digits
    (beyond every range here) a stand-in out of range, never int() over a huge string."""
    digits = value.lstrip("-").lstrip("0")
    if len(digits) > 20:
        return LONG_MIN - 1 if value.startswith("-") else LONG_MAX + 1
    return -int(digits or "0") if value.startswith("-") else int(digits or "0")


class _Integer(NamedTuple):
    """An INT or LONG topic config with Kafka's lower bound (atLeast) and the type's range."""

    kind: str  # "INT" or "LONG", as Kafka's ConfigDef.Type
    minimum: int
    maximum: int

    def problem(self, value: str) -> str | None:
        if not INTEGER_SYNTAX.fullmatch(value):
            return f"not an integer of type {self.kind} (ASCII digits with an optional '-')"
        if not self.minimum <= parse_ascii_int(value) <= self.maximum:
            return f"must be in [{self.minimum}, {self.maximum}] (type {self.kind})"
        return None


def _int(minimum: int) -> _Integer:
    return _Integer("INT", minimum, INT_MAX)


def _long(minimum: int) -> _Integer:
    return _Integer("LONG", minimum, LONG_MAX)


def _choice(*allowed: str) -> Callable[[str], str | None]:
    def problem(value: str) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return problem


# Types and bounds as Kafka's LogConfig / TopicConfig (atLeast(...)); kraftlab's own keys last.
_VALIDATORS: Mapping[str, _Integer | Callable[[str], str | None]] = {
    MIN_INSYNC_REPLICAS: _int(1),
    UNCLEAN_LEADER_ELECTION_ENABLE: _choice("true", "false"),
    REPLICATION_MODE: _choice(*REPLICATION_MODES),
    SEGMENT_BYTES: _int(14),  # Kafka's minimum segment size (LegacyRecord.RECORD_OVERHEAD_V0)
    RETENTION_MS: _long(-1),  # -1: unlimited
    RETENTION_BYTES: _long(LONG_MIN),  # Kafka: no bound; any negative value means unlimited
    SEGMENT_MS: _long(1),
    CLEANUP_POLICY: _choice("delete"),
    FLUSH_MESSAGES: _long(1),  # Kafka: at least 1 (0 is refused)
    FLUSH_MS: _long(0),
    MAX_MESSAGE_BYTES: _int(0),
    LEADER_EPOCH_ENABLE: _choice("true", "false"),
}


def validate_topic_config(name: str, value: str, *, internal: bool = False) -> str | None:
    """None if `name=value` is a valid topic config, else a message naming the key and why not.
    An `internal` topic (INTERNAL_TOPICS) may also be compacted."""
    if internal and name == CLEANUP_POLICY and value in COMPACT_POLICIES:
        return None
    check = _VALIDATORS.get(name)
    if check is None:
        return f"unknown topic config {name!r}"
    if name == CLEANUP_POLICY and value != "delete" and set(value.split(",")) <= {"compact", "delete"}:
        return (f"invalid value {value!r} for topic config {name!r}: compaction is not "
                f"supported (kraftlab has no log cleaner); only 'delete' is")
    problem = check.problem(value) if isinstance(check, _Integer) else check(value)
    if problem is not None:
        return f"invalid value {value!r} for topic config {name!r}: {problem}"
    return None


def topic_configs_problem(configs: Mapping[str, str]) -> str | None:
    """A problem with a topic's effective configs taken together (each one valid alone), or
    None: leader.epoch.enable=false exists only for replication.mode=isr (the other modes'
    safety rests on leader epochs)."""
    mode = configs.get(REPLICATION_MODE, REPLICATION_MODE_ISR)
    if configs.get(LEADER_EPOCH_ENABLE, "true") == "false" and mode != REPLICATION_MODE_ISR:
        return f"{LEADER_EPOCH_ENABLE}=false needs {REPLICATION_MODE}=isr, not {mode}"
    return None


def canonical_topic_config(name: str, value: str) -> str:
    """The form a valid value is stored in (ConfigRecord): integers as `str(int(value))` ("007"
    and "-0" become "7" and "0"), everything else as given. Call after validate_topic_config."""
    if isinstance(_VALIDATORS.get(name), _Integer):
        return str(parse_ascii_int(value))
    return value


def effective_topic_configs(overrides: Mapping[str, str]) -> dict[str, str]:
    """Defaults overlaid with a topic's overrides."""
    merged = dict(TOPIC_CONFIG_DEFAULTS)
    merged.update(overrides)
    return merged

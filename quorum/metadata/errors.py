"""Kafka-style error codes for metadata and controller outcomes.

Expected protocol outcomes are values of `Errors` carried in results and responses, never
exceptions. Codes and names are Kafka's (`org.apache.kafka.common.protocol.Errors`);
`retriable` follows whether Kafka's exception class is a `RetriableException`, so a client knows
whether trying again can help. KEY_NOT_FOUND and CAS_FAILED belong to kraftlab's cluster-config
key/value space (docs/api.md) and have no Kafka counterpart, so they live above 10000.
"""

from __future__ import annotations

from enum import Enum


class Errors(Enum):
    """An error code: the value is Kafka's number (`.code`); `.retriable`; `.name` is Kafka's name."""

    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10  # RecordTooLargeException: a batch over max.message.bytes
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21  # a produce's acks is not -1, 0 or 1
    # The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit).
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    MEMBER_ID_REQUIRED = 79  # KIP-394: a new member must rejoin with the id it was given
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82  # KIP-345: another member holds this group.instance.id
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    UNSTABLE_OFFSET_COMMIT = 88
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    # kraftlab's cluster-config key/value space (docs/api.md): not Kafka errors.
    KEY_NOT_FOUND = 10001
    CAS_FAILED = 10002

    @property
    def code(self) -> int:
        """Kafka's numeric error code."""
        return int(self.value)

    @property
    def retriable(self) -> bool:
        """True when the same request may succeed later (Kafka's RetriableException)."""
        return self in _RETRIABLE

    @classmethod
    def for_code(cls, code: int) -> Errors:
        """The error with Kafka code `code`; UNKNOWN_SERVER_ERROR for a code we do not know."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR

    @classmethod
    def for_name(cls, name: str) -> Errors:
        """The error named `name`; raises KeyError for an unknown name."""
        return cls[name]


_RETRIABLE = frozenset(
    {
        Errors.CORRUPT_MESSAGE,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.LEADER_NOT_AVAILABLE,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_COORDINATOR,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.NOT_CONTROLLER,
        Errors.KAFKA_STORAGE_ERROR,
        Errors.FENCED_LEADER_EPOCH,
        Errors.UNKNOWN_LEADER_EPOCH,
        Errors.PREFERRED_LEADER_NOT_AVAILABLE,
        Errors.UNKNOWN_TOPIC_ID,
        Errors.UNSTABLE_OFFSET_COMMIT,
    }
)

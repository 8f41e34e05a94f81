"""Typed errors of the log layer, named after the Kafka error codes they stand for (`error_name`),
so a driver can answer a request with the Kafka name without a lookup table of its own.

Misuse of the API (appending at the wrong offset, truncating below the log start) and bad input
(a corrupt batch, a sequence gap) raise; nothing is half-applied when they do: every check runs
before the first byte is written.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class. `error_name` is the Kafka error name; `retriable` as in Kafka's Errors enum."""

    error_name = "UNKNOWN_SERVER_ERROR"
    retriable = False


class CorruptRecordError(LogError):
    """A batch is torn, has a bad CRC, a wrong magic or impossible sizes (Kafka CORRUPT_MESSAGE)."""

    error_name = "CORRUPT_MESSAGE"
    retriable = True


class InvalidRecordError(LogError):
    """A well-formed batch we refuse (compressed, wrong attributes for this path)."""

    error_name = "INVALID_RECORD"


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes (Kafka's RecordTooLargeException, which the
    protocol carries as MESSAGE_TOO_LARGE, code 10)."""

    error_name = "MESSAGE_TOO_LARGE"


class OffsetOutOfRangeError(LogError):
    """A read or truncation outside [log_start_offset, log_end_offset]."""

    error_name = "OFFSET_OUT_OF_RANGE"


class UnexpectedAppendOffsetError(LogError):
    """A follower batch that does not continue the log end offset exactly."""

    error_name = "UNKNOWN_SERVER_ERROR"


class OutOfOrderSequenceError(LogError):
    """An idempotent batch whose sequence does not follow the last one (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    """A batch from a producer epoch older than the one seen (fenced; INVALID_PRODUCER_EPOCH)."""

    error_name = "INVALID_PRODUCER_EPOCH"


class CheckpointError(LogError):
    """A checkpoint file that does not parse (KAFKA_STORAGE_ERROR: the log dir needs a look)."""

    error_name = "KAFKA_STORAGE_ERROR"


class FencedLeaderEpochError(LogError):
    """An append stamped with a leader epoch older than the log's latest (FENCED_LEADER_EPOCH)."""

    error_name = "FENCED_LEADER_EPOCH"

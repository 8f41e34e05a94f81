"""Exceptions of the group coordinator core, and how a failed append becomes a response error.

Expected protocol outcomes are `Errors` values in responses (quorum.metadata.errors), never
exceptions. The exceptions here are for a record that does not decode, a broken
invariant and misuse of the core's API.
"""

from __future__ import annotations

from quorum.metadata.errors import Errors

__all__ = [
    "CoordinatorRecordError",
    "CoordinatorUsageError",
    "InvariantViolation",
    "append_error_to_response_error",
]


class CoordinatorRecordError(ValueError):
    """A `__consumer_offsets` record of a known type whose bytes do not decode."""


class CoordinatorUsageError(RuntimeError):
    """The caller misused the core (a request for a partition it does not own, an unknown input,
    an append completed twice)."""


class InvariantViolation(AssertionError):
    """A group invariant broke (an invalid state transition, a generation going backwards, two
    leaders in one generation). A failing seed in a simulation, a crash in a real node."""


# CoordinatorOperationExceptionHelper.handleOperationException: what a client is told when the
# append of the records its request wrote failed. The partition-level errors of the offsets
# topic mean "find the coordinator again" or "try again"; a too-large batch is the server's fault.
_APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.FENCED_LEADER_EPOCH: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.INVALID_FETCH_SIZE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.NETWORK_EXCEPTION: Errors.COORDINATOR_LOAD_IN_PROGRESS,
}


def append_error_to_response_error(error: Errors) -> Errors:
    """The error a client gets when the append its request depends on failed with `error`."""
    return _APPEND_ERRORS.get(error, error)

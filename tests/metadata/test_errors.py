"""The Kafka error enum: codes, names and retriability as Kafka has them."""

from __future__ import annotations

import pytest

from quorum import codec
from quorum.controller import BrokerHeartbeatResponse
from quorum.metadata import Errors


@pytest.mark.parametrize(
    ("error", "code", "retriable"),
    [
        (Errors.NONE, 0, False),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
        (Errors.NOT_ENOUGH_REPLICAS, 19, True),
        (Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, True),
        (Errors.TOPIC_ALREADY_EXISTS, 36, False),
        (Errors.INVALID_REPLICATION_FACTOR, 38, False),
        (Errors.NOT_CONTROLLER, 41, True),
        (Errors.FENCED_LEADER_EPOCH, 74, True),
        (Errors.STALE_BROKER_EPOCH, 77, False),
        (Errors.INVALID_UPDATE_VERSION, 95, False),
        (Errors.DUPLICATE_BROKER_REGISTRATION, 101, False),
        (Errors.INELIGIBLE_REPLICA, 107, False),
        (Errors.NEW_LEADER_ELECTED, 108, False),
        # The group coordinator's (clients/.../common/protocol/Errors.java, and whether the
        # exception class extends RetriableException).
        (Errors.OFFSET_METADATA_TOO_LARGE, 12, False),
        (Errors.COORDINATOR_LOAD_IN_PROGRESS, 14, True),
        (Errors.COORDINATOR_NOT_AVAILABLE, 15, True),
        (Errors.NOT_COORDINATOR, 16, True),
        (Errors.ILLEGAL_GENERATION, 22, False),
        (Errors.INCONSISTENT_GROUP_PROTOCOL, 23, False),
        (Errors.INVALID_GROUP_ID, 24, False),
        (Errors.UNKNOWN_MEMBER_ID, 25, False),
        (Errors.INVALID_SESSION_TIMEOUT, 26, False),
        (Errors.REBALANCE_IN_PROGRESS, 27, False),
        (Errors.INVALID_COMMIT_OFFSET_SIZE, 28, False),
        (Errors.NON_EMPTY_GROUP, 68, False),
        (Errors.GROUP_ID_NOT_FOUND, 69, False),
        (Errors.MEMBER_ID_REQUIRED, 79, False),
        (Errors.GROUP_MAX_SIZE_REACHED, 81, False),
        (Errors.FENCED_INSTANCE_ID, 82, False),
        (Errors.UNSTABLE_OFFSET_COMMIT, 88, True),
    ],
)
def test_codes_and_retriability_are_kafkas(error: Errors, code: int, retriable: bool) -> None:
    assert (error.code, error.retriable) == (code, retriable)
    assert Errors.for_code(code) is error
    assert Errors.for_name(error.name) is error


def test_unknown_code_and_name() -> None:
    assert Errors.for_code(9999) is Errors.UNKNOWN_SERVER_ERROR
    with pytest.raises(KeyError):
        Errors.for_name("NO_SUCH_ERROR")


def test_codes_are_unique_and_errors_travel_by_code() -> None:
    assert len({e.code for e in Errors}) == len(Errors)
    response = BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH)
    assert codec.decode(codec.encode(response)) == response

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

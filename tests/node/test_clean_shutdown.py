"""Clean shutdown detection (KAFKA-15586) on the broker side: the clean shutdown file
(harness/runtime/clean_shutdown.py) vouches for one start only, and the BrokerSession sends the
epoch it read in its first registration, -1 in any later one and after an unclean stop."""

from __future__ import annotations

from pathlib import Path

from harness.drive.broker_session import BrokerSession, BrokerTiming, Outgoing
from harness.runtime.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    take_previous_broker_epoch,
    write_clean_shutdown,
)
from quorum.controller import (
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Endpoint


def registration(out: Outgoing | None) -> BrokerRegistrationRequest:
    assert out is not None and isinstance(out.request, BrokerRegistrationRequest)
    return out.request


def test_the_file_vouches_for_one_start_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert take_previous_broker_epoch(data) == -1  # first start: no directory, no file
    write_clean_shutdown(data, 42)
    assert (data / CLEAN_SHUTDOWN_FILE).read_text() == '{"version": 0, "broker_epoch": 42}'
    assert take_previous_broker_epoch(data) == 42
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    assert take_previous_broker_epoch(data) == -1  # a crash after that start is unclean


def test_an_unreadable_file_counts_as_unclean_and_is_removed(tmp_path: Path) -> None:
    for junk in ('{"version": 0, "broker_epoch": "42"}', "{not json", '{"version": 0}', "[]"):
        (tmp_path / CLEAN_SHUTDOWN_FILE).write_text(junk)
        assert take_previous_broker_epoch(tmp_path) == -1, junk
        assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_the_session_sends_the_previous_epoch_in_its_first_registration_only() -> None:
    s = BrokerSession(101, "inc-2", (Endpoint("rpc", "127.0.0.1", 9101),), BrokerTiming(),
                      previous_broker_epoch=42)
    first = s.poll(0, 1, -1)
    assert registration(first).previous_broker_epoch == 42
    assert first is not None
    s.on_response(first.request_id, BrokerRegistrationResponse(Errors.NONE, 77), 10)
    heartbeat = s.poll(10, 1, 80)
    assert heartbeat is not None
    # The registration is lost (the controller no longer knows this epoch): register again,
    # this time vouching for nothing (the process did not stop in between).
    s.on_response(heartbeat.request_id, BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH), 20)
    assert registration(s.poll(1_000, 1, 80)).previous_broker_epoch == -1

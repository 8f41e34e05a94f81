"""BrokerSession (harness/drive/broker_session.py), the sans-IO broker lifecycle both drivers run:
registration, DUPLICATE_BROKER_REGISTRATION retries, heartbeats and unfencing, lost
registrations, timeouts and late answers, controlled shutdown. Time is driven explicitly."""

from __future__ import annotations

from harness.drive.broker_session import BrokerSession, BrokerTiming, Outgoing
from quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Endpoint

TIMING = BrokerTiming(heartbeat_interval_ms=2000, request_timeout_ms=1000, fast_heartbeat_ms=100,
                      retry_backoff_ms=50, duplicate_backoff_ms=500)


def session() -> BrokerSession:
    return BrokerSession(101, "inc-1", (Endpoint("rpc", "127.0.0.1", 9101),), TIMING)


def sent(out: Outgoing | None) -> Outgoing:
    assert out is not None
    return out


def test_register_then_heartbeat_fast_while_fenced_then_at_the_interval() -> None:
    s = session()
    assert s.poll(0, None, -1) is None  # no controller known yet: retry after the backoff
    assert s.next_deadline_ms() == 50
    reg = sent(s.poll(50, 2, -1))
    assert reg.to == 2 and isinstance(reg.request, BrokerRegistrationRequest)
    assert reg.request.incarnation_id == "inc-1"
    assert s.poll(60, 2, -1) is None  # one request outstanding
    events = s.on_response(reg.request_id, BrokerRegistrationResponse(Errors.NONE, 7), 80)
    assert [(e.event, e.broker_epoch) for e in events] == [("registered", 7)]
    hb = sent(s.poll(80, 2, 5)).request
    assert hb == BrokerHeartbeatRequest(101, 7, 5)
    s.on_response(2, BrokerHeartbeatResponse(Errors.NONE, is_fenced=True), 90)
    assert s.next_deadline_ms() == 190  # fenced: catch-up heartbeats
    sent(s.poll(190, 2, 7))
    events = s.on_response(3, BrokerHeartbeatResponse(Errors.NONE, is_fenced=False), 200)
    assert [e.event for e in events] == ["unfenced"] and not s.fenced
    assert s.next_deadline_ms() == 2200


def test_duplicate_registration_is_retried_after_the_backoff_with_the_same_incarnation() -> None:
    s = session()
    first = sent(s.poll(0, 1, -1))
    events = s.on_response(first.request_id,
                           BrokerRegistrationResponse(Errors.DUPLICATE_BROKER_REGISTRATION), 10)
    assert [(e.event, e.detail) for e in events] == [
        ("registration_retry", "DUPLICATE_BROKER_REGISTRATION")]
    assert s.poll(100, 1, -1) is None and s.next_deadline_ms() == 510
    again = sent(s.poll(510, 1, -1)).request
    assert isinstance(again, BrokerRegistrationRequest) and again.incarnation_id == "inc-1"


def test_lost_registration_registers_again_and_late_or_duplicate_answers_are_ignored() -> None:
    s = session()
    reg = sent(s.poll(0, 1, -1))
    s.on_response(reg.request_id, BrokerRegistrationResponse(Errors.NONE, 3), 0)
    hb = sent(s.poll(0, 1, 3))
    assert s.poll(999, 1, 3) is None
    retry = sent(s.poll(1000, 1, 3))  # no answer within request_timeout_ms: ask again
    assert retry.request_id != hb.request_id
    assert s.on_response(hb.request_id, BrokerHeartbeatResponse(Errors.NONE, is_fenced=False),
                         1001) == []  # the late answer to the given-up request
    events = s.on_response(retry.request_id,
                           BrokerHeartbeatResponse(Errors.STALE_BROKER_EPOCH), 1002)
    assert [(e.event, e.broker_epoch) for e in events] == [("registration_lost", 3)]
    assert isinstance(sent(s.poll(1002, 1, 3)).request, BrokerRegistrationRequest)


def test_controlled_shutdown_heartbeats_want_shut_down_until_granted() -> None:
    s = session()
    s.on_response(sent(s.poll(0, 1, -1)).request_id, BrokerRegistrationResponse(Errors.NONE, 3), 0)
    s.on_response(sent(s.poll(0, 1, 3)).request_id,
                  BrokerHeartbeatResponse(Errors.NONE, is_fenced=False), 0)
    s.request_shutdown(10)
    ask = sent(s.poll(10, 1, 3))
    assert isinstance(ask.request, BrokerHeartbeatRequest) and ask.request.want_shut_down
    s.on_response(ask.request_id, BrokerHeartbeatResponse(Errors.NONE, is_fenced=False), 20)
    assert s.next_deadline_ms() == 120 and not s.shut_down
    ask = sent(s.poll(120, 1, 3))
    events = s.on_response(ask.request_id, BrokerHeartbeatResponse(
        Errors.NONE, is_fenced=True, should_shut_down=True), 130)
    assert [e.event for e in events] == ["fenced", "shutdown_granted"]
    assert s.shut_down and s.poll(10_000, 1, 3) is None and s.next_deadline_ms() is None

"""ControllerService: one proposal in flight, every caller answered exactly once."""

from __future__ import annotations

from quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ControllerService,
    CreateTopicRequest,
    CreateTopicResponse,
    Propose,
    Respond,
)
from quorum.controller.service import error_response
from quorum.metadata import ApplyResult, Endpoint, Errors, MetadataImage, encode_record
from quorum.metadata.records import FenceBroker

EP = (Endpoint("rpc", "127.0.0.1", 9101),)


def commit(image: MetadataImage, propose: Propose) -> list[ApplyResult]:
    return [image.apply(image.applied_offset + 1, 1, encode_record(r)) for r in propose.records]


def test_operations_run_one_at_a_time_and_see_each_others_records() -> None:
    image = MetadataImage()
    service = ControllerService(image=image, now_ms=0)
    service.submit("a", BrokerRegistrationRequest(101, "i1", EP))
    service.submit("b", BrokerRegistrationRequest(102, "i2", EP))
    out = service.pump(image, 0)
    assert len(out) == 1 and isinstance(out[0], Propose) and service.busy
    assert service.pump(image, 0) == []  # nothing else while a proposal is outstanding
    answered = service.committed(commit(image, out[0]))
    assert answered == [Respond("a", BrokerRegistrationResponse(Errors.NONE, 0))]
    out = service.pump(image, 0)
    assert isinstance(out[0], Propose)
    assert service.committed(commit(image, out[0])) == [
        Respond("b", BrokerRegistrationResponse(Errors.NONE, 1))
    ]
    # A heartbeat that writes nothing is answered at once; one that unfences proposes.
    service.submit("c", BrokerHeartbeatRequest(101, 0, -1))
    service.submit("d", BrokerHeartbeatRequest(101, 0, 1))
    out = service.pump(image, 0)
    assert out[0] == Respond("c", BrokerHeartbeatResponse(Errors.NONE, False, True, False))
    assert isinstance(out[1], Propose)
    done = service.committed(commit(image, out[1]))
    assert done == [Respond("d", BrokerHeartbeatResponse(Errors.NONE, True, False, False))]
    assert image.is_broker_usable(101)


def test_ticks_are_serialized_too() -> None:
    image = MetadataImage()
    service = ControllerService(image=image, now_ms=0)
    service.submit("r", BrokerRegistrationRequest(101, "i1", EP))
    service.committed(commit(image, service.pump(image, 0)[0]))  # type: ignore[arg-type]
    service.submit("h", BrokerHeartbeatRequest(101, 0, 0))
    service.committed(commit(image, service.pump(image, 0)[0]))  # type: ignore[arg-type]
    assert service.next_deadline_ms() == 2000
    service.submit("late", CreateTopicRequest("t", 1, 1))
    out = service.pump(image, 9000)  # the session expired before the request is handled
    assert isinstance(out[0], Propose)  # the tick fences 101 first
    assert service.committed(commit(image, out[0])) == []
    out = service.pump(image, 9000)
    assert out == [
        Respond(
            "late",
            CreateTopicResponse(
                Errors.INVALID_REPLICATION_FACTOR,
                "replication factor 1 cannot be reached: 0 unfenced broker(s)",
            ),
        )
    ]


def test_failure_answers_everyone_not_controller() -> None:
    image = MetadataImage()
    service = ControllerService(image=image, now_ms=0)
    service.submit("a", BrokerRegistrationRequest(101, "i1", EP))
    service.submit("b", CreateTopicRequest("t", 1, 1))
    assert isinstance(service.pump(image, 0)[0], Propose)
    answers = service.failed()
    assert [a.token for a in answers] == ["a", "b"]
    assert all(a.response.error is Errors.NOT_CONTROLLER for a in answers)
    assert not service.busy and service.queued == 0


def test_error_response_has_the_request_type() -> None:
    r = error_response(CreateTopicRequest("t", 1, 1), Errors.NOT_CONTROLLER)
    assert r == CreateTopicResponse(Errors.NOT_CONTROLLER)


def _fences_after_a_queued_heartbeat(received_ms: int | None) -> bool:
    """Broker 101 last heard at 0 ms (session timeout 9 s); at 100 ms a CreateTopic proposal goes out
    and stays in flight; 101's next heartbeat arrives at 8.9 s and waits behind it; the commit
    ends at 9.05 s, and the pump runs the due tick before the queued heartbeat."""
    image = MetadataImage()
    service = ControllerService(image=image, now_ms=0)
    service.submit("r", BrokerRegistrationRequest(101, "i1", EP), 0)
    service.committed(commit(image, service.pump(image, 0)[0]))  # type: ignore[arg-type]
    service.submit("h", BrokerHeartbeatRequest(101, 0, 0), 0)
    service.committed(commit(image, service.pump(image, 0)[0]))  # type: ignore[arg-type]
    assert image.is_broker_usable(101)
    service.submit("t", CreateTopicRequest("t", 1, 1), 100)
    (propose,) = service.pump(image, 100)
    assert isinstance(propose, Propose)
    service.submit("late", BrokerHeartbeatRequest(101, 0, image.applied_offset), received_ms)
    service.committed(commit(image, propose))
    out = service.pump(image, 9_050)
    return any(isinstance(o, Propose) and any(isinstance(r, FenceBroker) for r in o.records)
               for o in out)  # fmt: skip


def test_a_heartbeat_counts_from_its_arrival_not_from_its_processing() -> None:
    """KAFKA-15019: a heartbeat that waited in the queue behind a proposal past the session
    deadline does not let the tick that runs first fence a live broker."""
    assert _fences_after_a_queued_heartbeat(None)  # receipt unknown: fenced, wrongly
    assert not _fences_after_a_queued_heartbeat(8_900)  # receipt counted: still alive

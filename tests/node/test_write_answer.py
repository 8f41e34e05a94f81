"""The native client's write answers (harness/runtime/client_requests.py): a write is answered
by a sink the node completes synchronously when the record is applied or fails, with the same
error mapping as a failed future (NOT_CONTROLLER with the hint, REQUEST_TIMED_OUT when the
outcome is unknown), exactly once."""

from __future__ import annotations

from typing import Any

from harness.net.client import KvRequest, KvResponse
from harness.runtime.client_requests import answer_client_request
from harness.runtime.context import NotLeaderError, OutcomeUnknownError
from quorum.metadata import KvPut
from quorum.metadata.image import ApplyResult, Errors


class Conn:
    def __init__(self) -> None:
        self.replies: list[Any] = []

    def reply(self, message: Any) -> None:
        self.replies.append(message)


class FakeNode:
    """Just what answer_client_request uses for a write."""

    leader_id = 1

    def __init__(self, leading: bool = True) -> None:
        self.leading = leading
        self.submitted: list[tuple[Any, Any]] = []

    def submit_to(self, record: Any, sink: Any) -> None:
        if not self.leading:
            raise NotLeaderError(2, 5)
        self.submitted.append((record, sink))


def put(rid: int) -> KvRequest:
    return KvRequest(rid, "put", "k", "v")


def test_a_put_is_answered_when_the_node_completes_its_sink() -> None:
    node, conn = FakeNode(), Conn()
    answer_client_request(node, conn, put(7))  # type: ignore[arg-type]
    [(record, sink)] = node.submitted
    assert record == KvPut("k", "v") and conn.replies == [] and not sink.done()
    sink.set_result(ApplyResult(41, record, Errors.NONE, 41))
    assert sink.done()
    assert conn.replies == [KvResponse(7, "NONE", 41)]


def test_failures_map_as_a_failed_future_does() -> None:
    node = FakeNode()
    conn = Conn()
    answer_client_request(node, conn, put(1))  # type: ignore[arg-type]
    answer_client_request(node, conn, put(2))  # type: ignore[arg-type]
    (_, lost), (_, moved) = node.submitted
    lost.set_exception(OutcomeUnknownError("leadership moved"))
    moved.set_exception(NotLeaderError(3, 9))
    assert conn.replies == [
        KvResponse(1, "REQUEST_TIMED_OUT", leader_id=1),
        KvResponse(2, "NOT_CONTROLLER", leader_id=3),
    ]
    assert lost.done() and moved.done()


def test_a_follower_answers_not_controller_at_once() -> None:
    conn = Conn()
    answer_client_request(FakeNode(leading=False), conn, put(4))  # type: ignore[arg-type]
    assert conn.replies == [KvResponse(4, "NOT_CONTROLLER", leader_id=2)]

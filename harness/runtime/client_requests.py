"""Serving the native client paths: key/value requests (harness/net/client.py) on a
controller, and the data protocol (harness/net/data_protocol.py: produce, fetch, metadata, producer
ids) on a broker, answered by its replica manager.

Requests are answered without a task per request, and replies are batched by the transport. A
write's answer is a `_WriteAnswer` sink (NodeContext.submit_to): it is written the moment the
record is applied, inside the delivery of the Fetch that committed it, so it leaves in that same
loop iteration (a future's done-callback would run one iteration later, its reply another). Semantics match the admin API: writes answer once
committed and applied; `get` is linearizable (read barrier, then the image); only the leader
serves, others answer NOT_CONTROLLER with the leader hint; an outcome lost to a leadership change
or timeout is REQUEST_TIMED_OUT (indeterminate).
"""

from __future__ import annotations

import asyncio
from typing import Any

from harness.net.client import KvRequest, KvResponse
from harness.net.data_protocol import DataCall
from harness.runtime.broker import BrokerNode
from harness.runtime.context import NotLeaderError
from harness.runtime.data_requests import answer_data_call
from quorum.metadata import KvCas, KvDelete, KvPut
from quorum.metadata.image import ApplyResult


def answer_client_request(node: BrokerNode, conn: Any, request: Any) -> None:
    if isinstance(request, DataCall):
        answer_data_call(node, conn, request)
        return
    if not isinstance(request, KvRequest):
        conn.reply(KvResponse(-1, "INVALID_REQUEST"))
        return
    rid = request.request_id
    try:
        match request.op:
            case "get":
                future: asyncio.Future[Any] = node.begin_read()
                future.add_done_callback(lambda f: conn.reply(_answer(node, request, f)))
                return
            case "put" if request.value is not None:
                record: Any = KvPut(request.key, request.value)
            case "cas" if request.value is not None:
                record = KvCas(request.key, request.expected, request.value)
            case "delete":
                record = KvDelete(request.key)
            case _:
                conn.reply(KvResponse(rid, "INVALID_REQUEST"))
                return
        node.submit_to(record, _WriteAnswer(node, conn, rid))
    except NotLeaderError as exc:
        conn.reply(KvResponse(rid, "NOT_CONTROLLER", leader_id=exc.leader_id))


class _WriteAnswer:
    """The answer to one write, written when the node completes it (a ResultSink): the
    image's result once applied; NOT_CONTROLLER or REQUEST_TIMED_OUT (indeterminate) as
    `_answer` maps a failed future."""

    __slots__ = ("_conn", "_done", "_node", "_rid")

    def __init__(self, node: BrokerNode, conn: Any, rid: int) -> None:
        self._node = node
        self._conn = conn
        self._rid = rid
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: ApplyResult, /) -> None:
        self._done = True
        # `_name_`: the member's name without the `name` property's two calls (every write)
        self._conn.reply(KvResponse(self._rid, result.error._name_, result.version))

    def set_exception(self, exception: BaseException, /) -> None:
        self._done = True
        if isinstance(exception, NotLeaderError):
            answer = KvResponse(self._rid, "NOT_CONTROLLER", leader_id=exception.leader_id)
        else:
            answer = KvResponse(self._rid, "REQUEST_TIMED_OUT", leader_id=self._node.leader_id)
        self._conn.reply(answer)


def _answer(node: BrokerNode, request: KvRequest, future: asyncio.Future[Any]) -> KvResponse:
    rid = request.request_id
    exc: BaseException | None = (
        asyncio.CancelledError() if future.cancelled() else future.exception()
    )
    if isinstance(exc, NotLeaderError):
        return KvResponse(rid, "NOT_CONTROLLER", leader_id=exc.leader_id)
    if exc is not None:
        return KvResponse(rid, "REQUEST_TIMED_OUT", leader_id=node.leader_id)
    if request.op == "get":
        found = node.image.get(request.key)
        if found is None:
            return KvResponse(rid, "KEY_NOT_FOUND")
        value, version = found
        return KvResponse(rid, "NONE", version, value if isinstance(value, str) else None)
    result = future.result()
    return KvResponse(rid, result.error.name, result.version)

"""Admin HTTP routes for data (docs/api.md): produce and consume records of one partition.

    POST /topics/{topic}/partitions/{p}/records?acks=0|1|all&timeout_ms=N
         {"records": [{"key"?, "value" | "value_b64", "headers"?}],
          "producer_id"?, "producer_epoch"?, "base_sequence"?}
         -> {"base_offset", "last_offset", "leader_epoch"}
    GET  /topics/{topic}/partitions/{p}/records?offset=N&max_records=M&max_wait_ms=W
         -> {"records": [{"offset", "key", "value", "leader_epoch", "timestamp"}],
             "high_watermark", "log_start_offset"}
    GET  /topics/{topic}/partitions/{p}/replica-log?offset=N&max_records=M
         -> {"broker", "records": [...], "high_watermark", "log_end_offset", "log_start_offset"}

The replica-log route is served by any broker hosting a replica: its OWN log, up to its log end
(above the high watermark too), as kafka-dump-log.sh reads a replica's segments, so replicas can
be compared (Kafka's ReplicaVerificationTool; harness/check/replicas.py). 404
UNKNOWN_TOPIC_OR_PARTITION on a broker without a replica of the partition.

Served by the partition's leader broker (its replica manager); anywhere else 421
NOT_LEADER_OR_FOLLOWER with the `leader` hint. The records become ONE RecordBatch v2 (idempotent
when producer_id is given: KIP-98 sequence checks in the leader's core), so the HTTP path and the
native path (harness/client) write the same bytes. Consumers read below the high watermark only.

Error mapping: 400 INVALID_REQUEST (bad input; never a 500), 404 UNKNOWN_TOPIC_OR_PARTITION,
409 OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH, 413 MESSAGE_TOO_LARGE (the batch is
over the topic's max.message.bytes: HTTP's Content Too Large, as the body is), 416
OFFSET_OUT_OF_RANGE, 421 NOT_LEADER_OR_FOLLOWER, 503 NOT_ENOUGH_REPLICAS / NOT_ENOUGH_REPLICAS_AFTER_APPEND,
504 REQUEST_TIMED_OUT (the append may still commit: `indeterminate`).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from aiohttp import web

from harness.admin.http import BadRequest, error_response, read_json_object, value_field
from harness.runtime.broker import BrokerNode
from partition.log import batch as rb
from partition.replica import ACKS_ALL, FetchResponse, ProduceResponse
from quorum.metadata.errors import Errors

STATUS: dict[Errors, int] = {
    Errors.INVALID_REQUEST: 400,
    Errors.CORRUPT_MESSAGE: 400,
    Errors.INVALID_REQUIRED_ACKS: 400,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: 404,
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: 409,
    Errors.INVALID_PRODUCER_EPOCH: 409,
    Errors.MESSAGE_TOO_LARGE: 413,
    Errors.OFFSET_OUT_OF_RANGE: 416,
    Errors.NOT_LEADER_OR_FOLLOWER: 421,
    Errors.FENCED_LEADER_EPOCH: 421,
    Errors.NOT_ENOUGH_REPLICAS: 503,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 503,
    Errors.LEADER_NOT_AVAILABLE: 503,
    Errors.REQUEST_TIMED_OUT: 504,
}
MAX_RECORDS_PER_REQUEST = 10_000
MAX_FETCH_RECORDS = 10_000
MAX_WAIT_MS = 30_000
INT32 = 2**31 - 1


def _int_query(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be in [{lo}, {hi}]")
    return value


def _partition_of(request: web.Request) -> tuple[str, int]:
    try:
        partition = int(request.match_info["partition"])
    except ValueError:
        raise BadRequest("partition must be an integer") from None
    if not 0 <= partition <= INT32:
        raise BadRequest("partition must be a non-negative 32-bit integer")
    return request.match_info["topic"], partition


def _bytes_field(record: dict[str, Any], name: str, *, required: bool) -> bytes | None:
    if name not in record and f"{name}_b64" not in record and not required:
        return None
    value = value_field(record, name, nullable=not required)
    return value.encode() if isinstance(value, str) else value


def parse_records(body: dict[str, Any], now_ms: int) -> list[rb.Record]:
    """The records of a produce body, stamped `now_ms` (the node's wall clock: its CreateTime,
    as a producer on this machine would stamp them; skewed with the node's clock)."""
    records = body.get("records")
    if not isinstance(records, list) or not records:
        raise BadRequest("'records' must be a non-empty list")
    if len(records) > MAX_RECORDS_PER_REQUEST:
        raise BadRequest(f"at most {MAX_RECORDS_PER_REQUEST} records per request")
    out = []
    for item in records:
        if not isinstance(item, dict):
            raise BadRequest("each record must be an object")
        value = _bytes_field(item, "value", required=True)
        key = _bytes_field(item, "key", required=False)
        headers_in = item.get("headers", {})  # absent: none; an explicit null is a wrong type
        if not isinstance(headers_in, dict) or not all(
            isinstance(k, str) and isinstance(v, str | None) for k, v in headers_in.items()
        ):
            raise BadRequest("'headers' must be an object of string values")
        headers = tuple((k, None if v is None else v.encode()) for k, v in headers_in.items())
        out.append(rb.Record(value, key, headers, now_ms))
    return out


def _producer_fields(body: dict[str, Any]) -> tuple[int, int, int]:
    names = ("producer_id", "producer_epoch", "base_sequence")
    fields = [body.get(n) for n in names]
    if not any(n in body for n in names):  # absent: not idempotent; null is a wrong type
        return rb.NO_PRODUCER_ID, rb.NO_PRODUCER_EPOCH, rb.NO_SEQUENCE
    limits = ((0, 2**63 - 1), (0, 2**15 - 1), (0, INT32))
    for name, value, (lo, hi) in zip(("producer_id", "producer_epoch", "base_sequence"), fields,
                                     limits, strict=True):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise BadRequest(f"'{name}' must be an integer in [{lo}, {hi}] (all three or none)")
    return fields[0], fields[1], fields[2]  # type: ignore[return-value]


def _decode_text(data: bytes | None, name: str) -> dict[str, Any]:
    if data is None:
        return {name: None}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{name}_b64": base64.b64encode(data).decode()}


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


class RecordRoutes:
    def __init__(self, node: BrokerNode) -> None:
        self.node = node

    def _error(self, error: Errors, message: str = "", **hints: Any) -> web.Response:
        if error is Errors.REQUEST_TIMED_OUT:
            hints["indeterminate"] = True
        return error_response(STATUS.get(error, 400), error.name, message or error.name, **hints)

    def _not_here(self, topic: str, partition: int) -> web.Response:
        image = self.node.image
        t = image.topic(topic)
        part = None if t is None else image.partition(t.topic_id, partition)
        if part is None:
            return self._error(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                               f"unknown topic-partition {topic}-{partition}")  # fmt: skip
        return self._error(Errors.NOT_LEADER_OR_FOLLOWER, f"node {self.node.node_id} does not "
                           "host this partition", leader=part.leader if part.leader >= 0 else None,
                           leader_epoch=part.leader_epoch)  # fmt: skip

    async def produce(self, request: web.Request) -> web.Response:
        topic, partition = _partition_of(request)
        acks_raw = request.query.get("acks", "all")
        acks = {"0": 0, "1": 1, "all": ACKS_ALL, "-1": ACKS_ALL}.get(acks_raw)
        if acks is None:
            raise BadRequest("acks must be 0, 1 or all")
        timeout_ms = _int_query(request, "timeout_ms", 30_000, 0, 300_000)
        body = await read_json_object(request)
        records = parse_records(body, self.node.clock.wall_now_ms())
        pid, epoch, seq = _producer_fields(body)
        data = rb.encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        broker = self.node.broker
        if broker is None:
            return self._not_here(topic, partition)
        future: asyncio.Future[ProduceResponse] = self.node.loop.create_future()
        broker.replicas.produce(topic, partition, data, acks, timeout_ms,
                                lambda r: _resolve(future, r))  # fmt: skip
        try:
            r = await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000 + 5)
        except TimeoutError:
            return self._error(Errors.REQUEST_TIMED_OUT, "no answer from the replica")
        if r.error is not Errors.NONE:
            hints: dict[str, Any] = {}
            if r.leader_id >= 0 or r.error is Errors.NOT_LEADER_OR_FOLLOWER:
                hints = {"leader": r.leader_id if r.leader_id >= 0 else None,
                         "leader_epoch": r.leader_epoch}  # fmt: skip
            return self._error(r.error, r.message, **hints)
        return web.json_response({"base_offset": r.base_offset, "last_offset": r.last_offset,
                                  "leader_epoch": r.leader_epoch})  # fmt: skip

    async def consume(self, request: web.Request) -> web.Response:
        topic, partition = _partition_of(request)
        offset = _int_query(request, "offset", 0, 0, 2**63 - 1)
        max_records = _int_query(request, "max_records", 500, 1, MAX_FETCH_RECORDS)
        max_wait_ms = _int_query(request, "max_wait_ms", 0, 0, MAX_WAIT_MS)
        max_bytes = _int_query(request, "max_bytes", 1 << 20, 1, 16 << 20)
        broker = self.node.broker
        if broker is None:
            return self._not_here(topic, partition)
        future: asyncio.Future[FetchResponse] = self.node.loop.create_future()
        broker.replicas.fetch(topic, partition, offset, max_bytes, max_wait_ms,
                              lambda r: _resolve(future, r))  # fmt: skip
        try:
            r = await asyncio.wait_for(asyncio.shield(future), max_wait_ms / 1000 + 10)
        except TimeoutError:
            return self._error(Errors.REQUEST_TIMED_OUT, "no answer from the replica")
        if r.error is not Errors.NONE:
            hints: dict[str, Any] = {"high_watermark": r.high_watermark,
                                     "log_start_offset": r.log_start_offset}  # fmt: skip
            if r.error is Errors.NOT_LEADER_OR_FOLLOWER:
                hints = {"leader": r.leader_id if r.leader_id >= 0 else None,
                         "leader_epoch": r.leader_epoch}  # fmt: skip
            return self._error(r.error, **hints)
        out: list[dict[str, Any]] = []
        for header in rb.iter_headers(r.records, check_crc=False):
            if header.is_control:
                continue
            for rec in rb.decode_records(r.records, header):
                if rec.offset < offset or len(out) >= max_records:
                    continue
                out.append({"offset": rec.offset, **_decode_text(rec.key, "key"),
                            **_decode_text(rec.value, "value"),
                            "leader_epoch": header.partition_leader_epoch,
                            "timestamp": rec.timestamp_ms})  # fmt: skip
        return web.json_response({"records": out, "high_watermark": r.high_watermark,
                                  "log_start_offset": r.log_start_offset})  # fmt: skip

    async def replica_log(self, request: web.Request) -> web.Response:
        """This broker's own replica of the partition, read from its log up to the log end."""
        topic, partition = _partition_of(request)
        offset = _int_query(request, "offset", 0, 0, 2**63 - 1)
        max_records = _int_query(request, "max_records", 500, 1, MAX_FETCH_RECORDS)
        broker = self.node.broker
        hosted = None if broker is None else broker.replicas.by_name.get((topic, partition))
        if hosted is None:
            return self._error(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                               f"no replica of {topic}-{partition} on this node")
        log = hosted.log
        start, end = log.log_start_offset, log.log_end_offset
        out: list[dict[str, Any]] = []
        position = max(offset, start)
        while position < end and len(out) < max_records:
            data = log.read(position, 1 << 20)
            if not data:
                break
            last = position
            for header in rb.iter_headers(data, check_crc=False):
                last = header.base_offset + header.last_offset_delta + 1
                if header.is_control:
                    continue
                for rec in rb.decode_records(data, header):
                    if rec.offset >= offset and len(out) < max_records:
                        out.append({"offset": rec.offset, **_decode_text(rec.value, "value"),
                                    "leader_epoch": header.partition_leader_epoch})
            if last <= position:
                break
            position = last
        return web.json_response({"broker": self.node.node_id, "records": out,
                                  "high_watermark": log.high_watermark, "log_end_offset": end,
                                  "log_start_offset": start})


def add_routes(app: web.Application, node: BrokerNode) -> None:
    routes = RecordRoutes(node)
    app.router.add_post("/topics/{topic}/partitions/{partition}/records", routes.produce)
    app.router.add_get("/topics/{topic}/partitions/{partition}/records", routes.consume)
    app.router.add_get("/topics/{topic}/partitions/{partition}/replica-log", routes.replica_log)

"""Writes within a delivery (Transport.hold / release, harness/net/transport.py): what the frames
of one chunk, or one step of the node, cause is written when the delivery ends, synchronously,
one write per buffer, after the `on_delivered` hook; outside a delivery, at the end of the loop
iteration as before. Real loopback sockets, one process; the kernel writes are counted on a
recording wrapper of the asyncio transport."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack
import pytest

from harness.net.transport import Transport, frame
from quorum import codec
from quorum.raft.messages import VoteRequest
from tests.integration.test_transport import Node, free_port, reraise, until

pytestmark = pytest.mark.integration


class RecordingWrites:
    """Wraps an asyncio transport: counts `write` calls, passes everything through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    def write(self, data: bytes | bytearray) -> None:
        self.writes.append(bytes(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def vote(i: int) -> VoteRequest:
    return VoteRequest(candidate_epoch=i, candidate_id=1, last_offset_epoch=0, last_offset=0)


async def connected_pair() -> tuple[Node, Node, RecordingWrites]:
    ports = {1: free_port(), 2: free_port()}
    a, b = Node(1, ports), Node(2, ports)
    await a.transport.start()
    await b.transport.start()
    a.transport.send(2, vote(0))
    await until(lambda: len(b.received) == 1)
    proto = a.transport._peers[2].protocol
    assert proto is not None and proto.transport is not None
    recorder = RecordingWrites(proto.transport)
    proto.transport = recorder  # type: ignore[assignment]
    return a, b, recorder


def test_sends_in_a_delivery_leave_at_its_release_in_one_write() -> None:
    async def main() -> None:
        a, b, recorder = await connected_pair()
        t = a.transport
        t.hold()
        t.send(2, vote(1))
        t.hold()  # nested (a node step inside a chunk's delivery)
        t.send(2, vote(2))
        t.release()
        assert recorder.writes == [] and t.is_held  # the inner release writes nothing
        t.release()
        # Written synchronously by the outermost release, both frames in one write.
        assert not t.is_held
        assert recorder.writes == [frame(codec.encode(vote(1))) + frame(codec.encode(vote(2)))]
        await until(lambda: len(b.received) == 3)
        assert [m.candidate_epoch for _, m in b.received] == [0, 1, 2]
        await a.transport.close()
        await b.transport.close()

    asyncio.run(main())


def test_the_delivered_hook_runs_before_the_writes_and_joins_them() -> None:
    async def main() -> None:
        a, b, recorder = await connected_pair()
        t = a.transport
        seen: list[tuple[bool, int]] = []

        def hook() -> None:
            seen.append((t.is_held, len(recorder.writes)))
            t.send(2, vote(9))  # e.g. the records of the proposals this delivery submitted

        t.on_delivered = hook
        t.hold()
        t.send(2, vote(8))
        t.release()
        assert seen == [(True, 0)]  # held while it runs, nothing written yet
        assert recorder.writes == [frame(codec.encode(vote(8))) + frame(codec.encode(vote(9)))]
        await until(lambda: len(b.received) == 3)
        await a.transport.close()
        await b.transport.close()

    asyncio.run(main())


def test_outside_a_delivery_a_send_waits_for_the_end_of_the_loop_iteration() -> None:
    async def main() -> None:
        a, b, recorder = await connected_pair()
        a.transport.send(2, vote(1))
        a.transport.send(2, vote(2))
        assert recorder.writes == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(recorder.writes) == 1
        await until(lambda: len(b.received) == 3)
        await a.transport.close()
        await b.transport.close()

    asyncio.run(main())


def test_client_answers_to_one_chunk_of_requests_leave_in_one_write_before_it_returns() -> None:
    async def main() -> None:
        port = free_port()
        conns: list[Any] = []
        writes_after_chunk: list[int] = []

        def on_request(conn: Any, request: Any) -> None:
            if not conns:
                conn.transport = RecordingWrites(conn.transport)
                conns.append(conn)
            conn.reply(request)  # an echo, answered synchronously

        server = Transport(
            cluster_id="c1", node_id=1, host="127.0.0.1", port=port, peers={},
            on_message=lambda src, msg: None, on_unreachable=lambda peer: None,
            encode=codec.encode, decode=codec.decode, decode_errors=(codec.DecodeError,),
            on_error=reraise,
            on_client_request=on_request,
        )  # fmt: skip
        await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        hello = msgpack.packb({"kraftlab": 1, "cluster_id": "c1", "client": True})
        writer.write(struct.pack(">I", len(hello)) + hello)
        await reader.readexactly(struct.unpack(">I", await reader.readexactly(4))[0])
        server.on_delivered = lambda: writes_after_chunk.append(
            len(conns[0].transport.writes) if conns else -1
        )
        writer.write(b"".join(frame(codec.encode(vote(i))) for i in range(3)))
        answers = []
        for _ in range(3):
            (length,) = struct.unpack(">I", await reader.readexactly(4))
            answers.append(codec.decode(await reader.readexactly(length)))
        assert [m.candidate_epoch for m in answers] == [0, 1, 2]
        # The hook ran once for the chunk, before any answer was written; then one write.
        assert writes_after_chunk == [0]
        assert len(conns[0].transport.writes) == 1
        writer.close()
        await server.close()

    asyncio.run(main())

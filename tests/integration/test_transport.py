"""The asyncio transport on real loopback sockets, in one process: framing, the cluster-id
handshake, bad frames closing one connection only, the link filter, refused peers reported."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import msgpack
import pytest

from harness.net.transport import LinkFilter, Transport
from quorum import codec
from quorum.raft.messages import VoteRequest

pytestmark = pytest.mark.integration


def reraise(exc: Exception) -> None:
    """The transport's on_error here: its deferred work failing is a failed test, not a crash."""
    raise exc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, node_id: int, ports: dict[int, int], cluster_id: str = "c1") -> None:
        self.received: list[tuple[int, Any]] = []
        self.unreachable: list[int] = []
        self.transport = Transport(
            cluster_id=cluster_id,
            node_id=node_id,
            host="127.0.0.1",
            port=ports[node_id],
            peers={i: ("127.0.0.1", p) for i, p in ports.items()},
            on_message=lambda src, msg: self.received.append((src, msg)),
            on_unreachable=self.unreachable.append,
            encode=codec.encode,
            decode=codec.decode,
            decode_errors=(codec.DecodeError,),
            on_error=reraise,
        )


async def until(predicate: Any, timeout_s: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.005)


def vote(i: int) -> VoteRequest:
    return VoteRequest(candidate_epoch=i, candidate_id=1, last_offset_epoch=0, last_offset=0)


async def raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, return everything the server sends before closing."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    got = await asyncio.wait_for(reader.read(), 3)  # EOF: the server closed the connection
    writer.close()
    return got


def hello(cluster_id: str, node_id: int) -> bytes:
    payload = msgpack.packb({"kraftlab": 1, "cluster_id": cluster_id, "node_id": node_id})
    return struct.pack(">I", len(payload)) + payload


def test_messages_flow_in_order_and_bad_input_closes_only_that_connection() -> None:
    async def main() -> None:
        ports = {1: free_port(), 2: free_port()}
        a, b = Node(1, ports), Node(2, ports)
        await a.transport.start()
        await b.transport.start()
        for i in range(100):
            a.transport.send(2, vote(i))
        await until(lambda: len(b.received) == 100)
        assert [m.candidate_epoch for _, m in b.received] == list(range(100))
        assert {src for src, _ in b.received} == {1}

        # Wrong cluster id: refused with INCONSISTENT_CLUSTER_ID, connection closed.
        answer = await raw_exchange(ports[2], hello("other-cluster", 9))
        assert b"INCONSISTENT_CLUSTER_ID" in answer
        assert b.transport.refused == 1
        # Random bytes as the first frame / an oversized length / garbage after a good handshake.
        await raw_exchange(ports[2], b"\x00\x00\x00\x05hello")
        await raw_exchange(ports[2], b"\xff\xff\xff\xff" + b"x" * 10)
        await raw_exchange(ports[2], hello("c1", 1) + struct.pack(">I", 3) + b"\xc1\xc1\xc1")
        assert b.transport.bad_frames == 3
        # The node keeps serving its real peer.
        a.transport.send(2, vote(1000))
        await until(lambda: b.received[-1][1].candidate_epoch == 1000)

        # Link filter: drop traffic from 1 at node 2, then heal.
        b.transport.set_links(LinkFilter(drop=frozenset({1})))
        a.transport.send(2, vote(2000))
        b.transport.send(1, vote(2001))
        await until(lambda: b.transport.dropped_in == 1)
        assert b.transport.dropped_out == 1
        b.transport.set_links(LinkFilter())
        a.transport.send(2, vote(3000))
        b.transport.send(1, vote(3001))
        await until(lambda: b.received[-1][1].candidate_epoch == 3000 and len(a.received) == 1)
        assert [m.candidate_epoch for _, m in b.received[-2:]] == [1000, 3000]
        assert [m.candidate_epoch for _, m in a.received] == [3001]

        # A peer that is gone: its connection is refused and reported.
        await b.transport.close()
        await until(lambda: 2 in a.unreachable)
        await a.transport.close()

    asyncio.run(main())

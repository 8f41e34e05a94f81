"""The asyncio transport against a side that stops reading (loopback, one process): memory per
connection stays bounded.

- A peer that takes the handshake and then never reads: what waits for it (our pending buffer
  plus the asyncio transport's write buffer) never passes MAX_PENDING_BYTES (+ one frame);
  frames beyond are dropped and counted; once the peer reads again the link flushes and carries
  new frames.
- A native client that sends requests and never reads the answers is disconnected once its
  unread answers pass MAX_CLIENT_PENDING_BYTES, never buffered without bound.
Limits are lowered (monkeypatch) so a few MB are enough; every loop is bounded in count.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack
import pytest

import harness.net.transport as tr
from harness.net.transport import Transport
from tests.integration.test_transport import free_port, reraise, until

pytestmark = pytest.mark.integration

FRAME = 64 * 1024
LIMIT = 1024 * 1024


def framed(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


class StalledPeer(asyncio.Protocol):
    """Answers the handshake as node 2, then stops reading until `resume()`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.data = bytearray()
        self.acked = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.data += data
        if not self.acked and len(self.data) >= 4:
            (n,) = struct.unpack_from(">I", self.data)
            if len(self.data) >= 4 + n:
                self.acked = True
                assert self.transport is not None
                self.transport.write(framed(msgpack.packb({"ok": True, "node_id": 2})))
                self.transport.pause_reading()  # and never reads again, until resume()

    def resume(self) -> None:
        assert self.transport is not None
        self.transport.resume_reading()


def transport(node_id: int, port: int, peers: dict[int, tuple[str, int]], **kw: Any) -> Transport:
    return Transport(cluster_id="c1", node_id=node_id, host="127.0.0.1", port=port, peers=peers,
                     on_message=lambda src, msg: None, on_unreachable=lambda peer: None,
                     encode=lambda m: m, decode=lambda b: b, decode_errors=(ValueError,),
                     on_error=reraise, **kw)


def test_a_peer_that_stops_reading_gets_frames_dropped_not_unbounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tr, "MAX_PENDING_BYTES", LIMIT)
    # the marks keep their ratio to the limit (1 and 16 MiB in production): the transport pauses
    monkeypatch.setattr(tr, "WRITE_BUFFER_HIGH", LIMIT // 4)
    monkeypatch.setattr(tr, "WRITE_BUFFER_LOW", LIMIT // 16)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        peers: list[StalledPeer] = []
        server = await loop.create_server(lambda: peers.append(StalledPeer()) or peers[-1],
                                          "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        a = transport(1, free_port(), {2: ("127.0.0.1", port)})
        await a.start()
        link = a._peers[2]
        a.send(2, b"hello")
        await until(lambda: link.protocol is not None and peers and peers[0].acked)
        proto = link.protocol
        assert proto is not None and proto.transport is not None
        most = 0
        for _ in range(200):  # at most 200 x 16 x 64 KiB = 200 MiB offered
            for _ in range(16):
                a.send(2, b"x" * FRAME)
            await asyncio.sleep(0)  # one loop turn: the flush runs (yield, not a timed wait)
            held = len(link.pending) + proto.transport.get_write_buffer_size()
            most = max(most, held)
            assert held <= LIMIT + FRAME + 4, held
            if a.dropped_out > 0 and proto.write_paused:
                break
        assert a.dropped_out > 0 and proto.write_paused, (a.dropped_out, most)

        # the peer reads again: the backlog drains and new frames get through
        peers[0].resume()
        await until(lambda: not proto.write_paused and not link.pending, timeout_s=10.0)
        a.send(2, b"MARK-after-the-stall")
        await until(lambda: bytes(peers[0].data).endswith(framed(b"MARK-after-the-stall")),
                    timeout_s=10.0)
        await a.close()
        server.close()

    asyncio.run(main())


def test_a_client_that_never_reads_its_answers_is_disconnected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tr, "MAX_CLIENT_PENDING_BYTES", LIMIT)

    async def main() -> None:
        port = free_port()
        answered = 0

        def on_request(proto: Any, request: Any) -> None:
            nonlocal answered
            answered += 1
            proto.reply(b"y" * FRAME)

        node = transport(1, port, {}, on_client_request=on_request)
        await node.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(framed(msgpack.packb({"kraftlab": 1, "cluster_id": "c1", "client": True})))
        requests = 0
        # never read `reader`: its buffer fills, it pauses the socket, the server's buffer grows
        while node.slow_clients_closed == 0 and requests < 3000:  # at most ~190 MiB of answers
            writer.write(framed(b"req"))
            requests += 1
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except (ConnectionError, TimeoutError):
                break
        await until(lambda: node.slow_clients_closed == 1, timeout_s=10.0)
        assert answered * FRAME > LIMIT  # the limit, not the request count, ended it
        inbound = list(node._inbound)
        assert all(p.closed for p in inbound)
        writer.close()
        await node.close()

    asyncio.run(main())

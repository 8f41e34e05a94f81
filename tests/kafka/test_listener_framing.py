"""The Kafka listener's framing (harness/kafka/server.py `_Connection`), without sockets: a stream
of request frames cut into chunks at every possible place (inside a size prefix, inside a body,
several frames in one chunk) yields exactly the frames that were sent, in order; a bad size closes
the connection. The request handling behind the framing is stubbed."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest

from harness.kafka.server import MAX_REQUEST_BYTES, _Connection


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def connection() -> tuple[_Connection, list[bytes]]:
    listener: Any = SimpleNamespace(
        node=SimpleNamespace(transport=SimpleNamespace(links=SimpleNamespace(drop_clients=False))),
        requests=0, closed_bad_requests=0, _connections=set())  # fmt: skip
    conn = _Connection(listener)
    conn.transport = _Transport()  # type: ignore[assignment]
    seen: list[bytes] = []
    conn._dispatch = lambda payload: seen.append(bytes(payload))  # type: ignore[method-assign]
    return conn, seen


def frames(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


BODIES = [b"abcd", bytes(range(200)), b"wxyz" * 3]


@pytest.mark.parametrize("cut", range(1, len(frames(*BODIES))))
def test_two_chunks_cut_anywhere_give_the_same_frames(cut: int) -> None:
    stream = frames(*BODIES)
    conn, seen = connection()
    conn.data_received(stream[:cut])
    conn.data_received(stream[cut:])
    assert seen == BODIES and not conn.closed


def test_one_byte_at_a_time() -> None:
    stream = frames(*BODIES) * 2
    conn, seen = connection()
    for i in range(len(stream)):
        conn.data_received(stream[i : i + 1])
    assert seen == BODIES * 2 and not conn.closed


@pytest.mark.parametrize("size", [-1, 0, 3, MAX_REQUEST_BYTES + 1])
def test_a_bad_size_closes_the_connection(size: int) -> None:
    conn, seen = connection()
    conn.data_received(frames(b"abcd") + struct.pack(">i", size) + b"rest")
    assert seen == [b"abcd"]
    assert conn.closed and conn.transport.closed  # type: ignore[union-attr]
    assert conn.listener.closed_bad_requests == 1
    conn.data_received(frames(b"more"))  # nothing is read after the close
    assert seen == [b"abcd"]

"""FrameProtocol's framing without sockets: a stream of frames cut into arbitrary chunks yields
exactly the payloads sent, in order, as independent `bytes` (one copy each, never a view into a
buffer that is later reused); an oversized length or a protocol failure raised from inside
`on_frame` (while a frame is being cut from the buffer) closes the connection without a
BufferError; a frame cut short at EOF is reported as truncated."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.net.transport import MAX_FRAME_BYTES, FrameError, FrameProtocol, frame

pytestmark = pytest.mark.integration


class FakeTransport:
    def __init__(self) -> None:
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True

    def write(self, data: Any) -> None:  # pragma: no cover - not used by these tests
        raise AssertionError("no writes expected")


class Collect(FrameProtocol):
    def __init__(self, fail_on: bytes | None = None, raise_on: bytes | None = None) -> None:
        super().__init__()
        self.transport = FakeTransport()  # type: ignore[assignment]
        self.frames: list[bytes] = []
        self.failures: list[str] = []
        self.fail_on = fail_on
        self.raise_on = raise_on

    def on_frame(self, payload: bytes) -> None:
        assert type(payload) is bytes  # an owned copy, safe to keep after the buffer moves on
        self.frames.append(payload)
        if payload == self.fail_on:
            self.fail("refused by on_frame")  # as a handshake refusal or a codec error would
        if payload == self.raise_on:
            raise FrameError("undecodable")

    def on_failed(self, reason: str) -> None:
        self.failures.append(reason)


def feed(proto: Collect, stream: bytes, cuts: list[int]) -> None:
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        proto.data_received(stream[a:b])
        if proto.closed:
            return


@settings(max_examples=300, deadline=None)
@given(payloads=st.lists(st.binary(max_size=300), max_size=12),
       cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_any_chunking_yields_the_frames_in_order(payloads: list[bytes], cuts: list[int]) -> None:
    proto = Collect()
    feed(proto, b"".join(frame(p) for p in payloads), cuts)
    assert proto.frames == payloads
    assert not proto.failures and not proto.closed
    assert proto._buffer == b""  # nothing left over once every frame is complete


@settings(max_examples=200, deadline=None)
@given(before=st.lists(st.binary(max_size=50), max_size=4),
       after=st.lists(st.binary(max_size=50), max_size=4),
       cuts=st.lists(st.integers(0, 1000), max_size=8),
       how=st.sampled_from(["fail", "raise"]))
def test_a_failure_inside_on_frame_closes_the_connection_cleanly(
    before: list[bytes], after: list[bytes], cuts: list[int], how: str
) -> None:
    bad = b"\xffBAD\xff"
    proto = Collect(fail_on=bad if how == "fail" else None,
                    raise_on=bad if how == "raise" else None)
    feed(proto, b"".join(frame(p) for p in [*before, bad, *after]), cuts)
    assert proto.frames == [*before, bad]  # nothing after the bad frame is delivered
    assert proto.closed and proto.transport.aborted  # type: ignore[union-attr]
    assert len(proto.failures) == 1
    proto.data_received(frame(b"late"))  # a late chunk on a failed connection does no harm


def test_an_oversized_length_fails_before_buffering_the_frame() -> None:
    proto = Collect()
    proto.data_received(frame(b"ok") + (MAX_FRAME_BYTES + 1).to_bytes(4, "big") + b"xx")
    assert proto.frames == [b"ok"]
    assert proto.failures == [f"frame of {MAX_FRAME_BYTES + 1} bytes exceeds {MAX_FRAME_BYTES}"]


def test_a_truncated_frame_at_eof_is_reported() -> None:
    proto = Collect()
    proto.data_received(frame(b"whole") + frame(b"cut short")[:7])
    proto.eof_received()
    assert proto.frames == [b"whole"]
    assert proto.failures == ["truncated frame: connection closed with 7 bytes pending"]


def test_a_large_frame_in_many_chunks_is_one_payload() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = frame(payload) + frame(b"next")
    proto = Collect()
    for i in range(0, len(stream), 65_536):
        proto.data_received(stream[i : i + 65_536])
    assert proto.frames == [payload, b"next"]

"""Codec cost of the frames of one sequential metadata commit (quorum.codec, one process).

The frames are those `kraftlab bench quorum --client native` sends on its sequential phase, with
the same shapes and sizes (a 100-byte value under a `seq-N` key, one record per Fetch answer, the
max_bytes the controllers ask for). Per commit the leader decodes the client's KvRequest and the
two followers' FetchRequests and encodes the KvPut record it appends, the two FetchResponses that
carry it and the client's KvResponse (it applies the record it proposed without decoding it);
each follower encodes a FetchRequest, decodes the FetchResponse and the KvPut it applies; the
client encodes the KvRequest and decodes the KvResponse.

Method: each operation runs `--loops` times in a row, `--repeats` times; the figure is the
fastest repeat's time per operation in CPU time of this process (`time.process_time_ns`), which
is what other work on the machine disturbs least. The per-commit lines sum the frames each
process handles. A measurement, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import harness.net.client  # noqa: F401 - registers the client.* frames
from harness.net.client import KvRequest, KvResponse
from quorum import codec
from quorum.metadata.records import KvPut
from quorum.raft.log import Entry
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse

VALUE = "x" * 100
MAX_BYTES = 8 * 1024 * 1024  # what the controllers' fetchers ask for


def commit_frames(offset: int = 3001) -> dict[str, Any]:
    """The frames of one sequential commit, named by what they are."""
    record = KvPut(f"seq-{offset % 64}", VALUE)
    entry = Entry(offset, 1, codec.encode(record))
    return {
        "KvRequest": KvRequest(offset, "put", record.key, VALUE),
        "KvPut": record,
        "FetchRequest": FetchRequest(3, 1, offset, 1, 500, MAX_BYTES, 0),
        "FetchResponse": FetchResponse(ErrorCode.NONE, 2, 1, offset, offset, 0, (entry,),
                                       last_fetched_epoch=1),  # fmt: skip
        "KvResponse": KvResponse(offset, "NONE", offset),
    }


# What each process does with which frame, per sequential commit: (frame, "encode" | "decode", n).
PER_COMMIT: dict[str, tuple[tuple[str, str, int], ...]] = {
    "leader": (("KvRequest", "decode", 1), ("FetchRequest", "decode", 2), ("KvPut", "encode", 1),
               ("FetchResponse", "encode", 2), ("KvResponse", "encode", 1)),
    "follower": (("FetchRequest", "encode", 1), ("FetchResponse", "decode", 1),
                 ("KvPut", "decode", 1)),
    "client": (("KvRequest", "encode", 1), ("KvResponse", "decode", 1)),
}  # fmt: skip


def time_per_call_us(fn: Callable[[], Any], loops: int, repeats: int) -> float:
    best = None
    for _ in range(repeats):
        t0 = time.process_time_ns()
        for _ in range(loops):
            fn()
        elapsed = time.process_time_ns() - t0
        best = elapsed if best is None else min(best, elapsed)
    assert best is not None
    return best / loops / 1000


def measure(loops: int, repeats: int) -> dict[str, Any]:
    frames = commit_frames()
    per_frame: dict[str, dict[str, float]] = {}
    for name, message in frames.items():
        data = codec.encode(message)
        assert codec.decode(data) == message
        encode_us = time_per_call_us(lambda m=message: codec.encode(m), loops, repeats)
        decode_us = time_per_call_us(lambda d=data: codec.decode(d), loops, repeats)
        per_frame[name] = {"bytes": len(data), "encode_us": round(encode_us, 2),
                           "decode_us": round(decode_us, 2)}  # fmt: skip
    per_commit = {
        role: round(sum(per_frame[f][f"{op}_us"] * n for f, op, n in ops), 2)
        for role, ops in PER_COMMIT.items()
    }
    return {"loops": loops, "repeats": repeats, "frames": per_frame, "per_commit_us": per_commit}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--loops", type=int, default=20_000, help="calls per timed repeat")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (the min is kept)")


def run(args: argparse.Namespace) -> int:
    result = measure(args.loops, args.repeats)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'frame':<14} {'bytes':>6} {'encode us':>10} {'decode us':>10}")
    for name, row in result["frames"].items():
        print(f"{name:<14} {row['bytes']:>6} {row['encode_us']:>10.2f} {row['decode_us']:>10.2f}")
    for role, ops in PER_COMMIT.items():
        what = ", ".join(f"{op} {f}" + (f" x{n}" if n > 1 else "") for f, op, n in ops)
        print(f"per commit, {role}: {result['per_commit_us'][role]:.2f} us ({what})")
    return 0

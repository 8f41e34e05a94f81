"""The snapshot file format (KIP-630), as bytes: a checksummed envelope around the state
machine's payload, carrying the voter set the snapshot was taken under (KIP-853 keeps a
VotersRecord in every snapshot, so a replica that installs one knows the quorum without the log
prefix the snapshot replaced).

    magic "KLSN" | crc32 (4 bytes, big endian) over the rest | body length (8 bytes) | body
    body = codec-encoded SnapshotEnvelope(voters, payload)

Invariants: `decode_snapshot(encode_snapshot(v, p)) == (v, p)`; any other input (torn, cut
short, one flipped bit, trailing bytes, a file of another format) raises `CorruptSnapshot`,
never returns a wrong payload. Pure bytes: drivers read and write the files, fetchers move the
envelope unchanged (FetchSnapshot chunks are slices of it), so the checksum is verified again
after a transfer.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from quorum import codec
from quorum.raft.voters import VotersRecord

__all__ = ["MAGIC", "CorruptSnapshot", "SnapshotEnvelope", "decode_snapshot", "encode_snapshot"]

MAGIC = b"KLSN"
_HEAD = struct.Struct(">4sIQ")


class CorruptSnapshot(ValueError):
    """A snapshot file that is not a whole, intact envelope (says what is wrong)."""


@codec.register("raft.SnapshotEnvelope")
@dataclass(frozen=True, slots=True)
class SnapshotEnvelope:
    voters: VotersRecord | None
    payload: bytes


def encode_snapshot(voters: VotersRecord | None, payload: bytes) -> bytes:
    body = codec.encode(SnapshotEnvelope(voters, bytes(payload)))
    return _HEAD.pack(MAGIC, zlib.crc32(body), len(body)) + body


def has_envelope(data: bytes) -> bool:
    """Whether `data` claims to be an envelope (a payload written raw, by an older driver or a
    test, does not)."""
    return data[: len(MAGIC)] == MAGIC


def decode_snapshot(data: bytes) -> SnapshotEnvelope:
    if len(data) < _HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes: shorter than the {_HEAD.size}-byte header")
    magic, crc, length = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise CorruptSnapshot(f"bad magic {magic!r}")
    body = data[_HEAD.size :]
    if len(body) != length:
        raise CorruptSnapshot(f"body is {len(body)} bytes, header says {length} (torn?)")
    if zlib.crc32(body) != crc:
        raise CorruptSnapshot("checksum mismatch")
    try:
        return codec.decode(body, SnapshotEnvelope)
    except codec.DecodeError as exc:
        raise CorruptSnapshot(f"undecodable body: {exc}") from None

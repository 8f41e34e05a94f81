"""The records of the internal `__consumer_offsets` topic: keys and values as Kafka lays them out
(group-coordinator/src/main/resources/common/message/{OffsetCommit,GroupMetadata}{Key,Value}.json),
so a log written here reads like Kafka's and the other way round.

Every key and every value starts with an int16 schema version; the key's version says what the
record is:

    key version 0, 1   OffsetCommitKey     group string, topic string, partition int32
    key version 2      GroupMetadataKey    group string
    other versions     a record type this coordinator does not know (Kafka's consumer, share and
                       streams group records): the loader skips them, as Kafka's skips
                       UnknownRecordTypeException "left over from an aborted upgrade"

    OffsetCommitValue  v0: offset int64, metadata string, commitTimestamp int64
                       v1: + expireTimestamp int64 (after commitTimestamp; v1 only)
                       v2: as v0
                       v3: + leaderEpoch int32 (after offset)            <- written here
                       v4: as v3, flexible (compact strings, tagged fields)
    GroupMetadataValue protocolType string, generation int32, protocol nullable string,
                       leader nullable string, currentStateTimestamp int64 (v2+),
                       members [memberId string, groupInstanceId nullable string (v3+),
                       clientId string, clientHost string, rebalanceTimeout int32 (v1+),
                       sessionTimeout int32, subscription bytes, assignment bytes]
                       v3 is written here; v4 is v3 flexible.

A null value is a tombstone: the offset, or the whole group's metadata, is deleted (compaction
keeps the last record per key, so the log stays a complete picture of the live state).

Non-flexible encoding: string = int16 length + UTF-8 (-1 = null); bytes = int32 length + data;
array = int32 count. Flexible (v4): compact string/bytes = unsigned varint length+1 (0 = null),
compact array = unsigned varint count+1, and a tagged-field section (unsigned varint count, then
tag, size, data each) after every struct.

Only this module knows bytes: the rest of the coordinator sees these dataclasses.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from coordinator.errors import CoordinatorRecordError

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_key",
    "decode_value",
    "group_metadata_record",
    "group_metadata_tombstone",
    "offset_commit_record",
    "offset_commit_tombstone",
]

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
_FLEXIBLE_VALUE_VERSION = 4

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp_ms: int
    leader_epoch: int = -1  # -1: the committer did not say (OffsetCommit before v6)
    expire_timestamp_ms: int = -1  # only in v1 records (retention chosen by the client)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int  # -1 in v0 records: the loader uses the session timeout
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's chosen protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


RecordKey = OffsetCommitKey | GroupMetadataKey
RecordValue = OffsetCommitValue | GroupMetadataValue


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record of `__consumer_offsets`: key bytes and value bytes (None: a tombstone)."""

    key: bytes
    value: bytes | None


# ------------------------------------------------------------------------------- encoding


class _Writer:
    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i32(self, n: int) -> None:
        self.out += _I32.pack(n)

    def i64(self, n: int) -> None:
        self.out += _I64.pack(n)

    def string(self, s: str | None) -> None:
        if s is None:
            self.out += _I16.pack(-1)
            return
        data = s.encode()
        if len(data) > 0x7FFF:
            raise CoordinatorRecordError(f"string of {len(data)} bytes exceeds int16 length")
        self.out += _I16.pack(len(data)) + data

    def bytes_(self, b: bytes) -> None:
        self.out += _I32.pack(len(b)) + b


def _encode_offset_key(key: OffsetCommitKey) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return bytes(w.out)


def _encode_offset_value(value: OffsetCommitValue) -> bytes:
    w = _Writer(OFFSET_COMMIT_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp_ms)
    return bytes(w.out)


def _encode_group_key(key: GroupMetadataKey) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.out)


def _encode_group_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp_ms)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


def offset_commit_record(key: OffsetCommitKey, value: OffsetCommitValue) -> CoordinatorRecord:
    return CoordinatorRecord(_encode_offset_key(key), _encode_offset_value(value))


def offset_commit_tombstone(key: OffsetCommitKey) -> CoordinatorRecord:
    return CoordinatorRecord(_encode_offset_key(key), None)


def group_metadata_record(key: GroupMetadataKey, value: GroupMetadataValue) -> CoordinatorRecord:
    return CoordinatorRecord(_encode_group_key(key), _encode_group_value(value))


def group_metadata_tombstone(key: GroupMetadataKey) -> CoordinatorRecord:
    return CoordinatorRecord(_encode_group_key(key), None)


# ------------------------------------------------------------------------------- decoding


class _Reader:
    """Reads one key or value; `flexible` switches strings, bytes and arrays to compact form."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what
        self.flexible = False

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CoordinatorRecordError(f"{self.what}: truncated at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise CoordinatorRecordError(f"{self.what}: varint too long at byte {self.pos}")

    def _length(self, nullable_int16: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i16() if nullable_int16 else self.i32()

    def nullable_string(self) -> str | None:
        n = self._length(nullable_int16=True)
        if n < -1:
            raise CoordinatorRecordError(f"{self.what}: string length {n}")
        if n == -1:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise CoordinatorRecordError(f"{self.what}: string is not UTF-8") from exc

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CoordinatorRecordError(f"{self.what}: null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self._length(nullable_int16=False)
        if n < 0:
            raise CoordinatorRecordError(f"{self.what}: null or negative bytes length {n}")
        return self._take(n)

    def array_length(self) -> int:
        n = self._length(nullable_int16=False)
        if n < 0:
            raise CoordinatorRecordError(f"{self.what}: null or negative array length {n}")
        return n

    def tagged_fields(self) -> None:
        """Skip a tagged-field section (flexible versions only; none of them is ours)."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CoordinatorRecordError(
                f"{self.what}: {len(self.data) - self.pos} bytes left after the last field"
            )


def decode_key(data: bytes) -> RecordKey | None:
    """The key of one record, or None for a record type this coordinator does not know."""
    r = _Reader(data, "record key")
    version = r.i16()
    key: RecordKey
    if version in (0, 1):
        key = OffsetCommitKey(r.string(), r.string(), r.i32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    else:
        return None
    r.done()
    return key


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    """The value that goes with `key`; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_value(data)
    return _decode_group_value(data)


def _versioned_reader(data: bytes, what: str) -> tuple[_Reader, int]:
    r = _Reader(data, what)
    version = r.i16()
    if not 0 <= version <= _FLEXIBLE_VALUE_VERSION:
        raise CoordinatorRecordError(f"{what}: unsupported version {version}")
    r.flexible = version >= _FLEXIBLE_VALUE_VERSION
    return r, version


def _decode_offset_value(data: bytes) -> OffsetCommitValue:
    r, version = _versioned_reader(data, "OffsetCommitValue")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp_ms = r.i64()
    expire_timestamp_ms = r.i64() if version == 1 else -1
    r.tagged_fields()
    r.done()
    return OffsetCommitValue(offset, metadata, commit_timestamp_ms, leader_epoch,
                             expire_timestamp_ms)  # fmt: skip


def _decode_group_value(data: bytes) -> GroupMetadataValue:
    r, version = _versioned_reader(data, "GroupMetadataValue")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp_ms = r.i64() if version >= 2 else -1
    members = tuple(_decode_member(r, version) for _ in range(r.array_length()))
    r.tagged_fields()
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp_ms, members)


def _decode_member(r: _Reader, version: int) -> MemberMetadata:
    member_id = r.string()
    group_instance_id = r.nullable_string() if version >= 3 else None
    client_id = r.string()
    client_host = r.string()
    rebalance_timeout_ms = r.i32() if version >= 1 else -1
    session_timeout_ms = r.i32()
    subscription = r.bytes_()
    assignment = r.bytes_()
    r.tagged_fields()
    return MemberMetadata(member_id, group_instance_id, client_id, client_host,
                          rebalance_timeout_ms, session_timeout_ms, subscription, assignment)  # fmt: skip

"""Metadata records: what the controller writes to the Raft log and every replica applies.

One record per Raft entry. The bytes are quorum.codec's msgpack encoding of the record (tag
`metadata.<ClassName>`); inside, records are frozen slotted dataclasses. Decoding checks every
field against its annotation, so garbage (bad msgpack, an unknown tag, a missing or ill-typed
field, a codec frame that is not a metadata record) raises `DecodeError` and never yields a
half-built record.

Families:
- cluster-config key/value space (docs/api.md): KvPut, KvDelete, KvCas. A cas has an expected value;
  the outcome is decided by `MetadataImage.apply`, from the image alone, so every replica that
  applies the same log decides the same way.
- KIP-631 cluster metadata: RegisterBroker (broker epoch = the log offset of the record, assigned
  at apply time), FenceBroker, UnfenceBroker, BrokerRegistrationChange, Topic, Partition,
  PartitionChange (changed fields only, None = unchanged; partition_epoch+1 on every change,
  leader_epoch+1 only when `leader` is set, as in Kafka's PartitionChangeRecord), RemoveTopic,
  Config, ProducerIds, NoOp.
- FeatureLevel (Kafka's FeatureLevelRecord): a finalized cluster feature, such as KIP-966's
  `eligible.leader.replicas.version`; level 0 removes it.
- LeaderChange, a control record (KIP-595), accepted so a replica can decode whatever it reads.

Invariant: `decode_record(encode_record(r)) == r` for every record (tests/metadata/test_records.py).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Union

from quorum import codec
from quorum.codec import DecodeError as DecodeError  # re-exported: the one decode error

NO_LEADER = -1
"""Partition leader id when no replica leads (offline)."""


class LeaderRecoveryState:
    """KIP-704: a leader chosen by unclean election is RECOVERING until its ISR can grow again."""

    RECOVERED = 0
    RECOVERING = 1


# --- key/value space -------------------------------------------------------------------------

KvValue = str | bytes


@dataclass(frozen=True, slots=True)
class KvPut:
    """Set `key` to `value`; the new version is the offset of this record."""

    key: str
    value: KvValue


@dataclass(frozen=True, slots=True)
class KvDelete:
    """Remove `key`; KEY_NOT_FOUND at apply time if it does not exist."""

    key: str


@dataclass(frozen=True, slots=True)
class KvCas:
    """Set `key` to `value` iff its current value equals `expected` (None: the key must be absent);
    otherwise CAS_FAILED. Decided at apply time."""

    key: str
    expected: KvValue | None
    value: KvValue


# --- brokers (KIP-631) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener of a broker: name ("rpc", "admin", "kafka"), host and port."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A broker (re-)registers. Its broker epoch is the offset of this record; it starts fenced."""

    broker_id: int
    incarnation_id: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class FenceBroker:
    """The broker's session expired (broker.session.timeout.ms) or it asked to be fenced."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBroker:
    """The broker caught up with the metadata log up to its registration offset."""

    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChange:
    """KIP-841: change fenced / in_controlled_shutdown of a registration (None = unchanged)."""

    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


# --- topics and partitions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic. `configs` are its overrides as sorted (name, value) pairs."""

    name: str
    topic_id: str
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Partition:
    """The full state of a partition (KIP-631 PartitionRecord; ELR fields from KIP-966)."""

    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """Changed fields of a partition; None = unchanged. Applying bumps partition_epoch by one, and
    leader_epoch by one iff `leader` is set (Kafka since MV 3.6, KAFKA-15021).

    `expected_partition_epoch` (kraftlab's addition; -1 = unconditional) makes the change
    conditional: it applies only to the partition state it was computed from, so a change built
    on a stale image is refused (INVALID_UPDATE_VERSION) identically on every replica.

    `leader_epoch` (kraftlab's addition, replication.mode=raft): the leader epoch to record
    instead of the bump. A raft partition's epoch is its Raft group's (partition/raft), which
    the controller learns from the elected leader rather than decides; a value below the current
    epoch is refused (FENCED_LEADER_EPOCH) identically on every replica."""

    topic_id: str
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    leader_recovery_state: int | None = None
    replicas: tuple[int, ...] | None = None
    expected_partition_epoch: int = -1
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopic:
    """Delete a topic and all its partitions."""

    topic_id: str


@dataclass(frozen=True, slots=True)
class Config:
    """Set (value) or delete (value None) config `name` of a resource ("topic", "broker",
    "cluster"); for topics `resource_name` is the topic name."""

    resource_type: str
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class ProducerIds:
    """A block of producer ids [next_producer_id - block_size, next_producer_id) handed to a broker;
    the next block starts at `next_producer_id`."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


# KIP-966: the feature that switches Eligible Leader Replicas on (Kafka 4.x's name; level 1 = on).
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"


@dataclass(frozen=True, slots=True)
class FeatureLevel:
    """A finalized feature level (Kafka's FeatureLevelRecord); 0 means the feature is off."""

    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class NoOp:
    """Keeps the high watermark and liveness moving while idle (metadata.max.idle.interval.ms)."""


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """Control record a new Raft leader writes first in its epoch (KIP-595)."""

    leader_id: int
    epoch: int
    voters: tuple[int, ...] = ()


Record = Union[  # noqa: UP007 - a runtime union used with match/assert_never
    KvPut,
    KvDelete,
    KvCas,
    RegisterBroker,
    FenceBroker,
    UnfenceBroker,
    BrokerRegistrationChange,
    Topic,
    Partition,
    PartitionChange,
    RemoveTopic,
    Config,
    ProducerIds,
    NoOp,
    LeaderChange,
    FeatureLevel,
]

_RECORD_TYPES: tuple[type[Any], ...] = typing.get_args(Record)

# Codec tags are on disk (the metadata log and snapshots): never rename or reuse one.
_REGISTERED: tuple[type[Any], ...] = (Endpoint, *_RECORD_TYPES)
for _cls in _REGISTERED:
    codec.register(f"metadata.{_cls.__name__}")(_cls)


def encode_record(record: Record) -> bytes:
    """The msgpack bytes of `record` (quorum.codec)."""
    if type(record) not in _RECORD_TYPES:
        raise TypeError(f"not a metadata record: {type(record).__name__}")
    return codec.encode(record)


def decode_record(data: bytes) -> Record:
    """The record encoded in `data`; raises DecodeError for anything else (including a valid
    codec frame of a non-record type)."""
    obj: Any = codec.decode(data)
    if type(obj) not in _RECORD_TYPES:
        raise DecodeError(f"not a metadata record: {type(obj).__name__}")
    record: Record = obj
    return record

"""MetadataImage: the cluster state every node reads, built by applying committed records.

The image is a pure, deterministic state machine over the metadata log (KIP-631): replicas that
apply the same records at the same offsets hold equal images and produce byte-identical
snapshots. It is the single place controllers and brokers read cluster state from.

Invariants:
- offsets applied strictly increase (`applied_offset`); re-applying an offset raises ImageError;
- a kv version is the offset of the record that last wrote the key; a cas is decided here, from
  the image alone (docs/api.md), so every replica computes the same outcome;
- a broker's epoch is the offset of its RegisterBroker record (KIP-631);
- a record that does not fit the image (unknown topic, stale broker epoch) changes nothing and
  yields an error result, identically on every replica: a committed record never crashes apply;
- `MetadataImage.restore(img.snapshot()) == img`, and equal images have equal snapshots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import assert_never

from quorum import codec
from quorum.metadata.configs import effective_topic_configs
from quorum.metadata.errors import Errors
from quorum.metadata.records import (
    NO_LEADER,
    BrokerRegistrationChange,
    Config,
    DecodeError,
    Endpoint,
    FeatureLevel,
    FenceBroker,
    KvCas,
    KvDelete,
    KvPut,
    KvValue,
    LeaderChange,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    Record,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    decode_record,
)
from quorum.raft.log import Entry

SNAPSHOT_VERSION = 1


class ImageError(Exception):
    """Misuse of the image: an offset applied out of order."""


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """Outcome of applying one record. `version` is the kv version written (the offset) for a
    successful put/cas; for a failed cas, the key's current version (None if absent)."""

    offset: int
    record: Record
    error: Errors = Errors.NONE
    version: int | None = None


@dataclass(frozen=True, slots=True)
class KvEntry:
    key: str
    value: KvValue
    version: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker as the image knows it. `broker_epoch` = offset of its registration."""

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    def endpoint(self, name: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.name == name), None)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    resource_type: str
    resource_name: str
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The on-disk form of an image (all sequences sorted, so equal images give equal bytes)."""

    version: int
    applied_offset: int
    applied_epoch: int
    kv: tuple[KvEntry, ...]
    brokers: tuple[BrokerRegistration, ...]
    topics: tuple[Topic, ...]
    partitions: tuple[Partition, ...]
    configs: tuple[ConfigEntry, ...]
    next_producer_id: int
    controller_id: int
    controller_epoch: int
    # Finalized features (FeatureLevel records), sorted by name; appended with a default so
    # snapshots written before features existed still decode (quorum.codec's evolution rule).
    features: tuple[tuple[str, int], ...] = ()


for _cls in (KvEntry, BrokerRegistration, ConfigEntry, _Snapshot):
    codec.register(f"metadata.image.{_cls.__name__.lstrip('_')}")(_cls)


class MetadataImage:
    """Cluster metadata applied from the log. Pure: no I/O, no clock."""

    def __init__(self) -> None:
        self.applied_offset = -1
        self.applied_epoch = 0
        self._kv: dict[str, KvEntry] = {}
        self._brokers: dict[int, BrokerRegistration] = {}
        self._topics: dict[str, Topic] = {}  # by topic_id
        self._topic_ids: dict[str, str] = {}  # name -> topic_id
        self._partitions: dict[str, dict[int, Partition]] = {}  # topic_id -> index -> state
        self._configs: dict[tuple[str, str], dict[str, str]] = {}
        self.next_producer_id = 0
        # Raft leadership as recorded by LeaderChange control records (-1: none seen yet).
        self.controller_id = -1
        self.controller_epoch = 0
        self._features: dict[str, int] = {}

    # --- applying ------------------------------------------------------------------------

    def apply(self, offset: int, epoch: int, record_bytes: bytes) -> ApplyResult:
        """Decode and apply the record committed at `offset` in Raft epoch `epoch`. Raises
        DecodeError (nothing changes) for bytes that are not a record."""
        return self.apply_record(offset, epoch, decode_record(record_bytes))

    def apply_entry(self, entry: Entry) -> ApplyResult | None:
        """Apply a committed Raft entry: a data entry is decoded and applied; a control entry
        (the Raft layer's own LeaderChange/no-op) consumes its offset, records the leader a
        LeaderChange names (`controller_id`/`controller_epoch`), and returns None."""
        if entry.control:
            self.apply_control(entry.offset, entry.epoch)
            self._note_control(entry.data)
            return None
        return self.apply(entry.offset, entry.epoch, entry.data)

    def _note_control(self, data: bytes) -> None:
        try:
            obj: object = codec.decode(data)
        except DecodeError:
            return  # a control record the image has no use for
        # quorum.raft's LeaderChangeRecord (duck-typed: the Raft layer owns its control records).
        leader_id = getattr(obj, "leader_id", None)
        epoch = getattr(obj, "leader_epoch", None)
        if (
            type(obj).__name__ == "LeaderChangeRecord"
            and type(leader_id) is int
            and type(epoch) is int
        ):
            self.controller_id = leader_id
            self.controller_epoch = epoch

    def apply_control(self, offset: int, epoch: int) -> None:
        """Note a control entry the image does not interpret (its offset is consumed)."""
        self._advance(offset, epoch)

    def apply_record(self, offset: int, epoch: int, record: Record) -> ApplyResult:
        """Apply an already decoded record at `offset`."""
        self._advance(offset, epoch)
        error, version = self._dispatch(offset, record)
        return ApplyResult(offset=offset, record=record, error=error, version=version)

    def _advance(self, offset: int, epoch: int) -> None:
        if offset <= self.applied_offset:
            raise ImageError(
                f"offset {offset} already applied (applied_offset={self.applied_offset})"
            )
        if epoch < self.applied_epoch:
            raise ImageError(
                f"epoch {epoch} at offset {offset} < applied epoch {self.applied_epoch}"
            )
        self.applied_offset = offset
        self.applied_epoch = epoch

    def _dispatch(self, offset: int, record: Record) -> tuple[Errors, int | None]:
        match record:
            case KvPut() | KvDelete() | KvCas():
                return self._apply_kv(offset, record)
            case RegisterBroker():
                self._brokers[record.broker_id] = BrokerRegistration(
                    broker_id=record.broker_id,
                    incarnation_id=record.incarnation_id,
                    broker_epoch=offset,  # KIP-631: the broker epoch is the record's offset
                    endpoints=record.endpoints,
                    rack=record.rack,
                    fenced=record.fenced,
                    in_controlled_shutdown=record.in_controlled_shutdown,
                )
            case FenceBroker() | UnfenceBroker() | BrokerRegistrationChange():
                return self._apply_broker_change(record), None
            case Topic():
                if record.name in self._topic_ids or record.topic_id in self._topics:
                    return Errors.TOPIC_ALREADY_EXISTS, None
                self._topics[record.topic_id] = record
                self._topic_ids[record.name] = record.topic_id
                self._partitions[record.topic_id] = {}
                self._configs[("topic", record.name)] = dict(record.configs)
            case Partition():
                parts = self._partitions.get(record.topic_id)
                if parts is None:
                    return Errors.UNKNOWN_TOPIC_ID, None
                parts[record.partition] = record
            case PartitionChange():
                return self._apply_partition_change(record), None
            case RemoveTopic():
                topic = self._topics.pop(record.topic_id, None)
                if topic is None:
                    return Errors.UNKNOWN_TOPIC_ID, None
                del self._topic_ids[topic.name]
                del self._partitions[record.topic_id]
                self._configs.pop(("topic", topic.name), None)
            case Config():
                values = self._configs.setdefault((record.resource_type, record.resource_name), {})
                if record.value is None:
                    values.pop(record.name, None)
                else:
                    values[record.name] = record.value
            case ProducerIds():
                if record.next_producer_id <= self.next_producer_id:
                    return Errors.INVALID_REQUEST, None  # blocks only move forward
                self.next_producer_id = record.next_producer_id
            case LeaderChange():
                self.controller_id = record.leader_id
                self.controller_epoch = record.epoch
            case FeatureLevel():
                if record.feature_level < 0:
                    return Errors.INVALID_REQUEST, None
                if record.feature_level == 0:
                    self._features.pop(record.name, None)
                else:
                    self._features[record.name] = record.feature_level
            case NoOp():
                pass
            case _:
                assert_never(record)
        return Errors.NONE, None

    def _apply_kv(self, offset: int, record: KvPut | KvDelete | KvCas) -> tuple[Errors, int | None]:
        current = self._kv.get(record.key)
        match record:
            case KvPut():
                self._kv[record.key] = KvEntry(record.key, record.value, offset)
                return Errors.NONE, offset
            case KvDelete():
                if current is None:
                    return Errors.KEY_NOT_FOUND, None
                del self._kv[record.key]
                return Errors.NONE, current.version
            case KvCas():
                current_value = None if current is None else current.value
                if current_value != record.expected:
                    return Errors.CAS_FAILED, None if current is None else current.version
                self._kv[record.key] = KvEntry(record.key, record.value, offset)
                return Errors.NONE, offset
            case _:
                assert_never(record)

    def _apply_broker_change(
        self, record: FenceBroker | UnfenceBroker | BrokerRegistrationChange
    ) -> Errors:
        broker = self._brokers.get(record.broker_id)
        if broker is None:
            return Errors.BROKER_ID_NOT_REGISTERED
        if broker.broker_epoch != record.broker_epoch:
            return Errors.STALE_BROKER_EPOCH  # meant for an earlier registration
        match record:
            case FenceBroker():
                broker = dataclasses.replace(broker, fenced=True)
            case UnfenceBroker():
                broker = dataclasses.replace(broker, fenced=False)
            case BrokerRegistrationChange():
                if record.fenced is not None:
                    broker = dataclasses.replace(broker, fenced=record.fenced)
                if record.in_controlled_shutdown is not None:
                    broker = dataclasses.replace(
                        broker, in_controlled_shutdown=record.in_controlled_shutdown
                    )
            case _:
                assert_never(record)
        self._brokers[record.broker_id] = broker
        return Errors.NONE

    def _apply_partition_change(self, change: PartitionChange) -> Errors:
        part = self.partition(change.topic_id, change.partition)
        if part is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        expected = change.expected_partition_epoch
        if expected != -1 and expected != part.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION  # built on a stale image: changes nothing
        if change.leader_epoch is not None and change.leader_epoch < part.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH  # epochs never go back: changes nothing
        updates: dict[str, object] = {"partition_epoch": part.partition_epoch + 1}
        if change.leader is not None:
            updates["leader"] = change.leader
            updates["leader_epoch"] = part.leader_epoch + 1
        if change.leader_epoch is not None:
            updates["leader_epoch"] = change.leader_epoch  # raft mode: the Raft group's epoch
        for name in ("isr", "elr", "last_known_elr", "leader_recovery_state", "replicas"):
            value = getattr(change, name)
            if value is not None:
                updates[name] = value
        self._partitions[change.topic_id][change.partition] = dataclasses.replace(part, **updates)  # type: ignore[arg-type]
        return Errors.NONE

    # --- key/value -------------------------------------------------------------------------

    def get(self, key: str) -> tuple[KvValue, int] | None:
        """(value, version) of `key`, or None if absent."""
        entry = self._kv.get(key)
        return None if entry is None else (entry.value, entry.version)

    def kv_keys(self) -> list[str]:
        return sorted(self._kv)

    # --- brokers ---------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def registered_sender(self, broker_id: int, broker_epoch: int) -> BrokerRegistration | Errors:
        """The registration of `broker_id` when it is registered at `broker_epoch` (the
        incarnation a broker's request to the controller must come from), else the error to
        answer: BROKER_ID_NOT_REGISTERED, or STALE_BROKER_EPOCH (another incarnation's request)."""
        b = self._brokers.get(broker_id)
        if b is None:
            return Errors.BROKER_ID_NOT_REGISTERED
        if b.broker_epoch != broker_epoch:
            return Errors.STALE_BROKER_EPOCH
        return b

    def brokers(self) -> list[BrokerRegistration]:
        """All registered brokers, by id."""
        return [self._brokers[b] for b in sorted(self._brokers)]

    def is_broker_usable(self, broker_id: int) -> bool:
        """Registered, unfenced and not in controlled shutdown: may lead or join an ISR (KIP-841)."""
        b = self._brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    # --- features --------------------------------------------------------------------------

    def feature_level(self, name: str) -> int:
        """The finalized level of feature `name` (0: off or never set)."""
        return self._features.get(name, 0)

    def features(self) -> dict[str, int]:
        """Every finalized feature with a level above 0, by name."""
        return dict(sorted(self._features.items()))

    # --- topics and partitions -------------------------------------------------------------

    def topic(self, name: str) -> Topic | None:
        topic_id = self._topic_ids.get(name)
        return None if topic_id is None else self._topics[topic_id]

    def topic_by_id(self, topic_id: str) -> Topic | None:
        return self._topics.get(topic_id)

    def topics(self) -> list[Topic]:
        """All topics, by name."""
        return [self._topics[self._topic_ids[n]] for n in sorted(self._topic_ids)]

    def topic_configs(self, name: str) -> dict[str, str]:
        """Effective configs of topic `name`: Kafka defaults overlaid with its overrides."""
        return effective_topic_configs(self._configs.get(("topic", name), {}))

    def topic_config_overrides(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(("topic", name), {}))

    def configs(self, resource_type: str, resource_name: str) -> dict[str, str]:
        return dict(self._configs.get((resource_type, resource_name), {}))

    def partition(self, topic_id: str, partition: int) -> Partition | None:
        return self._partitions.get(topic_id, {}).get(partition)

    def partitions(self, topic_id: str) -> list[Partition]:
        """Partitions of a topic (by topic id), by index; [] for an unknown topic."""
        parts = self._partitions.get(topic_id, {})
        return [parts[p] for p in sorted(parts)]

    def all_partitions(self) -> Iterator[tuple[Topic, Partition]]:
        """Every partition with its topic, topics by name, partitions by index."""
        for topic in self.topics():
            for part in self.partitions(topic.topic_id):
                yield topic, part

    def partitions_led_by(self, broker_id: int) -> list[tuple[Topic, Partition]]:
        return [(t, p) for t, p in self.all_partitions() if p.leader == broker_id]

    def partitions_hosted_by(self, broker_id: int) -> list[tuple[Topic, Partition]]:
        return [(t, p) for t, p in self.all_partitions() if broker_id in p.replicas]

    def offline_partitions(self) -> list[tuple[Topic, Partition]]:
        return [(t, p) for t, p in self.all_partitions() if p.leader == NO_LEADER]

    # --- snapshots -------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Canonical msgpack bytes of the whole image (KIP-630 snapshot payload)."""
        state = _Snapshot(
            version=SNAPSHOT_VERSION,
            applied_offset=self.applied_offset,
            applied_epoch=self.applied_epoch,
            kv=tuple(self._kv[k] for k in sorted(self._kv)),
            brokers=tuple(self.brokers()),
            topics=tuple(sorted(self._topics.values(), key=lambda t: t.topic_id)),
            partitions=tuple(
                self._partitions[t][p]
                for t in sorted(self._partitions)
                for p in sorted(self._partitions[t])
            ),
            configs=tuple(
                ConfigEntry(rt, rn, name, value)
                for (rt, rn) in sorted(self._configs)
                for name, value in sorted(self._configs[(rt, rn)].items())
            ),
            next_producer_id=self.next_producer_id,
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            features=tuple(sorted(self._features.items())),
        )
        return codec.encode(state)

    @classmethod
    def restore(cls, data: bytes) -> MetadataImage:
        """The image a snapshot was taken of; raises DecodeError for anything else."""
        state = codec.decode(data, _Snapshot)
        if state.version != SNAPSHOT_VERSION:
            raise DecodeError(f"unsupported snapshot version {state.version}")
        image = cls()
        image.applied_offset = state.applied_offset
        image.applied_epoch = state.applied_epoch
        image._kv = {e.key: e for e in state.kv}
        image._brokers = {b.broker_id: b for b in state.brokers}
        for topic in state.topics:
            image._topics[topic.topic_id] = topic
            image._topic_ids[topic.name] = topic.topic_id
            image._partitions[topic.topic_id] = {}
        for part in state.partitions:
            if part.topic_id not in image._partitions:
                raise DecodeError(f"snapshot partition of unknown topic {part.topic_id}")
            image._partitions[part.topic_id][part.partition] = part
        for c in state.configs:
            image._configs.setdefault((c.resource_type, c.resource_name), {})[c.name] = c.value
        image.next_producer_id = state.next_producer_id
        image.controller_id = state.controller_id
        image.controller_epoch = state.controller_epoch
        image._features = dict(state.features)
        return image

    def copy(self) -> MetadataImage:
        """An independent image with the same state (values are immutable; only maps copied)."""
        image = MetadataImage()
        image.applied_offset = self.applied_offset
        image.applied_epoch = self.applied_epoch
        image._kv = dict(self._kv)
        image._brokers = dict(self._brokers)
        image._topics = dict(self._topics)
        image._topic_ids = dict(self._topic_ids)
        image._partitions = {t: dict(ps) for t, ps in self._partitions.items()}
        image._configs = {k: dict(v) for k, v in self._configs.items()}
        image.next_producer_id = self.next_producer_id
        image.controller_id = self.controller_id
        image.controller_epoch = self.controller_epoch
        image._features = dict(self._features)
        return image

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return self.snapshot() == other.snapshot()

    __hash__ = None  # type: ignore[assignment]  # mutable

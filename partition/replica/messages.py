"""Data-plane wire types of a partition replica (partition/ owns the data RPCs):
Fetch (followers and consumers, KIP-320/KIP-595 shape), Produce, and the replica's inputs from
the metadata image. Frozen slotted dataclasses registered with quorum.codec under `replica.*`
tags (tags are wire format: never rename or reuse one).

Conventions, as in Kafka's FetchRequest v12+:
- `replica_id` is the fetching broker, or CONSUMER_REPLICA_ID (-1) for a consumer;
- `current_leader_epoch` fences (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), -1 skips the check;
- `last_fetched_epoch` is the epoch of the follower's last batch; -1 skips the divergence check
  (a consumer, or `leader.epoch.enable=false`);
- `broker_epoch` is the fetching broker's registration epoch (KIP-903), -1 when unknown.
Responses echo `request_id`, `fetch_offset` and the leader epoch they were answered in, so a
follower matches them to its one fetch in flight without extra state, and drops stale ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum import codec
from quorum.controller.messages import BrokerState
from quorum.metadata.errors import Errors
from quorum.metadata.records import Partition

CONSUMER_REPLICA_ID = -1
NO_EPOCH = -1
ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """KIP-320 DivergingEpoch: the largest epoch <= the follower's last fetched epoch that the
    leader knows, and where it ends on the leader (-1, -1: none known)."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    topic_id: str
    partition: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int = NO_EPOCH
    current_leader_epoch: int = NO_EPOCH
    broker_epoch: int = -1
    max_bytes: int = 1 << 20
    max_wait_ms: int = 0
    request_id: int = 0
    # KIP-392: a consumer fetch that carries client metadata (Kafka Fetch v11+), which any
    # replica serves up to its own high watermark (partition/replica/follower_reads.py); without
    # it only the leader answers (Kafka's FetchParams.fetchOnlyLeader).
    follower_read: bool = False


@dataclass(frozen=True, slots=True)
class FetchResponse:
    topic_id: str
    partition: int
    error: Errors
    fetch_offset: int
    request_id: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes = b""
    diverging_epoch: EpochEndOffset | None = None
    leader_id: int = -1  # KIP-951: the leader hint with NOT_LEADER_OR_FOLLOWER / fencing errors
    leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """One partition's part of a Produce: RecordBatch v2 bytes (one batch if idempotent)."""

    topic_id: str
    partition: int
    request_id: int
    records: bytes
    acks: int = ACKS_ALL
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    request_id: int
    error: Errors
    base_offset: int = -1
    last_offset: int = -1
    log_start_offset: int = -1
    leader_id: int = -1  # KIP-951 hint
    leader_epoch: int = NO_EPOCH
    message: str = ""


@dataclass(frozen=True, slots=True)
class MetadataUpdated:
    """The partition as the local metadata image now has it, and the brokers that may join an
    ISR (registered, unfenced, not in controlled shutdown; KIP-841) with their broker epochs
    (KIP-903). Built from a MetadataImage by `metadata_update_from_image`."""

    partition: Partition
    eligible_brokers: tuple[BrokerState, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaPosition:
    """(last epoch, LEO) of one replica: what a quorum-mode election compares."""

    replica_id: int
    last_epoch: int
    log_end_offset: int


for _cls in (EpochEndOffset, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse,
             MetadataUpdated, ReplicaPosition):  # fmt: skip
    codec.register(f"replica.{_cls.__name__}")(_cls)

"""Metadata records and the MetadataImage every node reads cluster state from (KIP-631).

The image is a pure state machine over the committed metadata log; see image.py for its
invariants and records.py for the record types and their encoding.
"""

from quorum.metadata.errors import Errors
from quorum.metadata.image import (
    ApplyResult,
    BrokerRegistration,
    ImageError,
    KvEntry,
    MetadataImage,
)
from quorum.metadata.records import (
    NO_LEADER,
    BrokerRegistrationChange,
    Config,
    DecodeError,
    Endpoint,
    FenceBroker,
    KvCas,
    KvDelete,
    KvPut,
    LeaderChange,
    LeaderRecoveryState,
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
    encode_record,
)

__all__ = [
    "NO_LEADER",
    "ApplyResult",
    "BrokerRegistration",
    "BrokerRegistrationChange",
    "Config",
    "DecodeError",
    "Endpoint",
    "Errors",
    "FenceBroker",
    "ImageError",
    "KvCas",
    "KvDelete",
    "KvEntry",
    "KvPut",
    "LeaderChange",
    "LeaderRecoveryState",
    "MetadataImage",
    "NoOp",
    "Partition",
    "PartitionChange",
    "ProducerIds",
    "Record",
    "RegisterBroker",
    "RemoveTopic",
    "Topic",
    "UnfenceBroker",
    "decode_record",
    "encode_record",
]

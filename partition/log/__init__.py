"""partition.log: Kafka-format log storage for data partitions and the Raft metadata log.

- `storage`: the Storage seam every byte goes through, and SimStorage (the real files:
  harness/runtime/file_storage.py FileStorage);
- `batch`: the RecordBatch v2 codec (header view, validate, patch, encode, decode);
- `segment`, `index`: segment files with sparse offset and time indexes;
- `log`: PartitionLog (append as leader/follower, read, truncate, retention, flush, recovery);
- `epoch_cache`, `producer_state`, `checkpoint`: leader epochs, idempotence, checkpoint files;
- `config`: LogConfig, Kafka's topic log configs (`from_topic_configs` over broker defaults);
- `manager`: LogManager, the logs of one log dir, its per-dir checkpoint files, config changes on
  open logs and deleted topics' `-delete` directories.

docs/storage.md describes the file layout, formats, recovery rules and guarantees.
"""

from partition.log.batch import (
    BatchHeader,
    Record,
    decode_records,
    encode_batch,
    read_header,
    validate,
)
from partition.log.config import LogConfig
from partition.log.epoch_cache import LeaderEpochCache
from partition.log.errors import (
    CheckpointError,
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidProducerEpochError,
    InvalidRecordError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from partition.log.log import LogAppendInfo, PartitionLog
from partition.log.manager import LogManager
from partition.log.producer_state import ProducerState, SequenceCheck
from partition.log.storage import SimStorage, Storage, StorageFile

__all__ = [
    "BatchHeader",
    "CheckpointError",
    "CorruptRecordError",
    "FencedLeaderEpochError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "LeaderEpochCache",
    "LogAppendInfo",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "ProducerState",
    "Record",
    "SequenceCheck",
    "SimStorage",
    "Storage",
    "StorageFile",
    "UnexpectedAppendOffsetError",
    "decode_records",
    "encode_batch",
    "read_header",
    "validate",
]

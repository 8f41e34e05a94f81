"""Reading an Apache Kafka broker's partition logs from its log directory
(harness/peers/kafka/logs.py) and comparing the replicas of a Kafka run below their checkpointed
high watermarks (harness/jepsen/replica_logs.py `check_kafka_topic_replicas`).

The segment files here are written in Kafka's own format (RecordBatch v2, built with
kafka-python's builder); tests/peers/test_kafka_peer.py reads the files of a real Kafka broker."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from harness.jepsen.replica_logs import check_kafka_topic_replicas
from harness.peers.kafka import logs

TOPIC = "t"


def batch(base_offset: int, values: list[str], leader_epoch: int = 0) -> bytes:
    """One RecordBatch v2 at `base_offset`: the base offset and the partition leader epoch are
    outside the CRC (DefaultRecordBatch.java), so they are set after the build."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    for i, v in enumerate(values):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=v.encode(), headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)
    return bytes(data)


def segment(log_dir: Path, base_offset: int, *batches: bytes, partition: int = 0,
            suffix: str = ".log") -> None:
    folder = log_dir / f"{TOPIC}-{partition}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{base_offset:020d}{suffix}").write_bytes(b"".join(batches))


def checkpoint(log_dir: Path, *rows: tuple[str, int, int], version: str = "0") -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    lines = [version, str(len(rows)), *(f"{t} {p} {o}" for t, p, o in rows)]
    (log_dir / logs.HW_CHECKPOINT).write_text("\n".join(lines) + "\n")


def test_a_replica_is_its_segments_in_offset_order(tmp_path: Path) -> None:
    segment(tmp_path, 3, batch(3, ["d"], leader_epoch=2), batch(4, ["e", "f"], leader_epoch=2))
    segment(tmp_path, 0, batch(0, ["a", "b"]), batch(2, ["c"], leader_epoch=1))
    segment(tmp_path, 0, batch(0, ["stale"]), suffix=".log.deleted")  # being deleted
    log = logs.read_partition(tmp_path, TOPIC, 0)
    assert log.records == [(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f")]
    assert log.log_end_offset == 6
    assert log.leader_epochs == (0, 1, 2)


def test_the_read_stops_at_a_torn_or_corrupt_batch(tmp_path: Path) -> None:
    whole, next_one = batch(0, ["a", "b"]), batch(2, ["c"])
    segment(tmp_path, 0, whole, next_one[: len(next_one) // 2])  # a write under way
    assert logs.read_partition(tmp_path, TOPIC, 0).records == [(0, "a"), (1, "b")]

    corrupt = bytearray(next_one)
    corrupt[-1] ^= 0xFF  # a flipped bit in the last record: the CRC no longer holds
    segment(tmp_path, 0, whole, bytes(corrupt), batch(3, ["d"]))
    log = logs.read_partition(tmp_path, TOPIC, 0)
    assert (log.records, log.log_end_offset) == ([(0, "a"), (1, "b")], 2)


def test_a_missing_replica_or_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    log = logs.read_partition(tmp_path, TOPIC, 7)
    assert (log.records, log.log_end_offset, log.leader_epochs) == ([], 0, ())
    assert logs.read_hw_checkpoint(tmp_path) == {}
    checkpoint(tmp_path, (TOPIC, 0, 5), version="1")  # a format this reader does not know
    assert logs.read_hw_checkpoint(tmp_path) == {}


def test_the_checkpoint_names_each_partitions_high_watermark(tmp_path: Path) -> None:
    checkpoint(tmp_path, (TOPIC, 0, 5), (TOPIC, 1, 0), ("__consumer_offsets", 3, 12))
    assert logs.read_hw_checkpoint(tmp_path) == {
        (TOPIC, 0): 5, (TOPIC, 1): 0, ("__consumer_offsets", 3): 12}


def three_replicas(root: Path, values: dict[int, list[str]],
                   hws: dict[int, int]) -> dict[int, Path]:
    dirs = {}
    for broker, vs in values.items():
        d = root / f"broker-{broker}"
        segment(d, 0, batch(0, vs))
        checkpoint(d, (TOPIC, 0, hws[broker]))
        dirs[broker] = d
    return dirs


def compare(dirs: dict[int, Path]):  # noqa: ANN201 - ReplicaCheck
    # deadline now: one read, no convergence wait
    return asyncio.run(check_kafka_topic_replicas(dirs, TOPIC, {0: sorted(dirs)},
                                                  time.monotonic()))


def test_replicas_that_agree_below_their_high_watermarks_are_valid(tmp_path: Path) -> None:
    dirs = three_replicas(tmp_path, {101: ["a", "b", "c"], 102: ["a", "b", "c"],
                                     103: ["a", "b"]}, {101: 3, 102: 3, 103: 2})
    result = compare(dirs)
    assert result.valid and result.compared == {f"{TOPIC}-0": 3}


def test_a_different_record_below_both_high_watermarks_is_divergence(tmp_path: Path) -> None:
    # KIP-101's scenario 2: offset 1 committed as "b" on two replicas, "x" on the third
    dirs = three_replicas(tmp_path, {101: ["a", "b", "c"], 102: ["a", "b", "c"],
                                     103: ["a", "x", "c"]}, {101: 3, 102: 3, 103: 3})
    result = compare(dirs)
    assert result.counts == {"replica-divergence": 1}
    [example] = result.anomalies["replica-divergence"]
    assert example == {"partition": f"{TOPIC}-0", "offset": 1,
                       "values": {"101": "b", "102": "b", "103": "x"}}


def test_a_tail_above_a_replicas_checkpoint_is_not_compared(tmp_path: Path) -> None:
    # 103's offset 2 differs, but its checkpoint says its high watermark is 2: an uncommitted
    # tail a follower may still truncate, not divergence; a checkpoint above the log end is
    # capped at the log end.
    dirs = three_replicas(tmp_path, {101: ["a", "b", "c"], 102: ["a", "b", "c"],
                                     103: ["a", "b", "x"]}, {101: 3, 102: 9, 103: 2})
    result = compare(dirs)
    assert result.valid and result.compared == {f"{TOPIC}-0": 3}

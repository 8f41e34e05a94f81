"""The consumer: explicit partition assignment, positions, long-poll fetches from each partition's
leader, reading below the high watermark only (the broker enforces it).

    consumer = Consumer(client, ConsumerConfig(max_wait_ms=500))
    await consumer.assign("orders", 0, offset=None)     # None: auto.offset.reset decides
    records = await consumer.poll()                     # list[ConsumerRecord], positions advance
    consumer.position("orders", 0)                      # next offset to read
    consumer.seek("orders", 0, 42)                      # read from offset 42 next

Rules:
- One fetch per assigned partition per `poll`, all concurrent; each long-polls up to max_wait_ms
  at the leader when nothing is committed beyond the position.
- A fetch returns whole batches; records below the position (the head of the first batch) are
  skipped, and the position moves to the end of the last batch returned.
- NOT_LEADER_OR_FOLLOWER, fencing, unknown partition or a lost connection: metadata is refreshed
  and the partition is fetched again on the next poll (nothing is returned for it this time).
- OFFSET_OUT_OF_RANGE (the position is outside [log_start_offset, high_watermark]):
  auto.offset.reset = earliest (the log start) or latest (the HW), or "none" to raise.
- `poll_raw` returns the batches as bytes (no per-record work; benchmarks and copy tools).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from harness.client.connection import ClientError, ClusterClient
from harness.client.records import decode_records
from harness.net.data_protocol import RETRIABLE, FetchResult
from partition.log import batch as rb

# An offset no log reaches: asking for it returns OFFSET_OUT_OF_RANGE with the log start and the
# HW, which is how a position is reset (kraftlab has no ListOffsets request).
_PROBE_OFFSET = 1 << 62


class OffsetOutOfRange(ClientError):
    """OFFSET_OUT_OF_RANGE with auto.offset.reset=none: the position of `topic`-`partition`
    is outside [log_start_offset, high_watermark] at its leader (which one: the attributes)."""

    def __init__(self, topic: str, partition: int, position: int | None, log_start_offset: int,
                 high_watermark: int) -> None:  # fmt: skip
        self.topic = topic
        self.partition = partition
        self.position = position
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark
        super().__init__("OFFSET_OUT_OF_RANGE", f"{topic}-{partition} at {position} (log start "
                         f"{log_start_offset}, high watermark {high_watermark})")


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    max_wait_ms: int = 500  # fetch.max.wait.ms
    max_bytes: int = 1 << 20  # max.partition.fetch.bytes
    auto_offset_reset: str = "earliest"  # earliest | latest | none
    request_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class RawBatches:
    topic: str
    partition: int
    records: bytes  # whole RecordBatch v2 batches
    record_count: int
    high_watermark: int


class Consumer:
    def __init__(self, client: ClusterClient, config: ConsumerConfig | None = None) -> None:
        self.client = client
        self.config = config or ConsumerConfig()
        self._positions: dict[tuple[str, int], int | None] = {}
        self.high_watermarks: dict[tuple[str, int], int] = {}

    async def assign(self, topic: str, partition: int | None = None,
                     offset: int | None = None) -> None:  # fmt: skip
        """Read `partition` (every partition of the topic if None) from `offset` (None: reset
        by auto.offset.reset on the first poll)."""
        if partition is None:
            count = await self.client.partition_count(topic)
            for p in range(count):
                self._positions[(topic, p)] = offset
        else:
            self._positions[(topic, partition)] = offset

    def seek(self, topic: str, partition: int, offset: int | None) -> None:
        """Read `partition` from `offset` next (None: auto.offset.reset on the next poll)."""
        self._positions[(topic, partition)] = offset

    def position(self, topic: str, partition: int) -> int | None:
        return self._positions.get((topic, partition))

    def assignment(self) -> list[tuple[str, int]]:
        return sorted(self._positions)

    async def _reset(self, tp: tuple[str, int], policy: str) -> None:
        result = await self.client.fetch(tp[0], tp[1], _PROBE_OFFSET, 1, 0)
        if result.error != "OFFSET_OUT_OF_RANGE":
            raise ClientError(result.error, f"resetting the position of {tp[0]}-{tp[1]}")
        self._positions[tp] = (result.log_start_offset if policy == "earliest"
                               else result.high_watermark)  # fmt: skip

    async def _fetch_one(self, tp: tuple[str, int]) -> FetchResult | None:
        config = self.config
        try:
            if self._positions[tp] is None:
                await self._reset(tp, config.auto_offset_reset)
            position = self._positions[tp]
            assert position is not None
            result = await self.client.fetch(tp[0], tp[1], position, config.max_bytes,
                                              config.max_wait_ms)  # fmt: skip
        except (OSError, TimeoutError):
            await self._refresh(tp)
            return None
        except ClientError as exc:
            if exc.error not in RETRIABLE:
                raise
            await self._refresh(tp)
            return None
        if result.error == "NONE":
            self.high_watermarks[tp] = result.high_watermark
            return result
        if result.error == "OFFSET_OUT_OF_RANGE":
            if config.auto_offset_reset == "none":
                raise OffsetOutOfRange(tp[0], tp[1], self._positions[tp],
                                       result.log_start_offset, result.high_watermark)
            self._positions[tp] = (result.log_start_offset if config.auto_offset_reset == "earliest"
                                   else result.high_watermark)  # fmt: skip
            return None
        if result.error in RETRIABLE:
            await self._refresh(tp)
            return None
        raise ClientError(result.error, f"fetch {tp[0]}-{tp[1]}")

    async def _refresh(self, tp: tuple[str, int]) -> None:
        self.client.partitions.pop(tp, None)
        try:
            await self.client.refresh_metadata([tp[0]])
        except (ClientError, OSError, TimeoutError):
            await asyncio.sleep(0.1)  # retry.backoff.ms before the next poll tries again

    async def poll_raw(self) -> list[RawBatches]:
        """One fetch per assigned partition; whole batches, positions moved past them."""
        tps = list(self._positions)
        results = await asyncio.gather(*(self._fetch_one(tp) for tp in tps))
        out = []
        for tp, result in zip(tps, results, strict=True):
            if result is None or not result.records:
                continue
            position = self._positions[tp]
            assert position is not None
            count = 0
            end = position
            for header in rb.iter_headers(result.records, check_crc=False):
                end = header.next_offset
                if not header.is_control:
                    count += header.record_count
            self._positions[tp] = end
            out.append(RawBatches(tp[0], tp[1], result.records, count, result.high_watermark))
        return out

    async def poll(self) -> list[ConsumerRecord]:
        """One fetch per assigned partition, decoded; records in offset order per partition."""
        out: list[ConsumerRecord] = []
        tps = list(self._positions)
        results = await asyncio.gather(*(self._fetch_one(tp) for tp in tps))
        for tp, result in zip(tps, results, strict=True):
            if result is None or not result.records:
                continue
            position = self._positions[tp]
            assert position is not None
            end = position
            for header in rb.iter_headers(result.records):
                end = header.next_offset
                if header.is_control:
                    continue
                epoch = header.partition_leader_epoch
                for offset, ts, key, value, headers in decode_records(result.records, header):
                    if offset >= position:
                        out.append(ConsumerRecord(tp[0], tp[1], offset, key, value, headers, ts,
                                                  epoch))  # fmt: skip
            self._positions[tp] = end
        return out

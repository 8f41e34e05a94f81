"""Read every replica of the queue workload's partitions at the end of a run, through each
broker's GET /topics/{topic}/partitions/{p}/replica-log (its own log up to its log end), and
judge them with harness/check/replicas.py (`replica-divergence`: replicas that disagree below
their high watermarks, KIP-101's scenario 2).

The read waits, bounded, until the replicas of a partition report one log end offset (the
followers have caught up after the heal); whatever they hold then is compared. A broker that
does not answer is left out (fewer replicas compared, never a false anomaly).

On Apache Kafka (`check_kafka_topic_replicas`) there is no such API: each broker's replica is
read from its log directory (harness/peers/kafka/logs.py: the segment files and the
`replication-offset-checkpoint`), the high watermark compared below being the broker's last
checkpoint of it (a lower bound, every 5 s: fewer offsets compared, never a false anomaly).
The wait is the same, until the replicas hold one log end and each checkpoint has reached it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from harness.check.replicas import ReplicaCheck, ReplicaLog, check_replicas
from harness.peers.kafka import logs as kafka_logs

CONVERGE_WAIT_S = 10.0
PAGE = 10_000


async def _page(session: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=5.0)) as resp:
            data = await resp.json(content_type=None)
            return data if resp.status == 200 and isinstance(data, dict) else None
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def read_replica(session: aiohttp.ClientSession, admin_url: str, topic: str,
                       partition: int) -> ReplicaLog | None:
    """One broker's whole replica of topic-partition, or None if it does not answer."""
    base = f"{admin_url}/topics/{topic}/partitions/{partition}/replica-log"
    records: list[tuple[int, Any]] = []
    offset, broker, hw = 0, -1, 0
    while True:
        page = await _page(session, f"{base}?offset={offset}&max_records={PAGE}")
        if page is None:
            return None
        broker, hw = int(page["broker"]), int(page["high_watermark"])
        rows = page["records"]
        records += [(int(r["offset"]), r.get("value")) for r in rows]
        if not rows or records[-1][0] + 1 >= int(page["log_end_offset"]):
            return ReplicaLog(broker, records, hw)
        offset = records[-1][0] + 1


async def _log_ends(session: aiohttp.ClientSession, urls: list[str], topic: str,
                    partition: int) -> set[int | None]:
    pages = await asyncio.gather(*(_page(
        session, f"{u}/topics/{topic}/partitions/{partition}/replica-log?max_records=1")
        for u in urls))  # fmt: skip
    return {None if p is None else int(p["log_end_offset"]) for p in pages}


async def check_topic_replicas(session: aiohttp.ClientSession, broker_urls: dict[int, str],
                               topic: str, assignment: dict[int, list[int]],
                               deadline: float) -> ReplicaCheck:
    """`assignment`: partition -> its replicas (broker ids). Bounded by `deadline`."""
    logs: dict[str, list[ReplicaLog]] = {}
    for partition, replicas in sorted(assignment.items()):
        urls = [broker_urls[b] for b in replicas if b in broker_urls]
        until = min(deadline, time.monotonic() + CONVERGE_WAIT_S)
        while time.monotonic() < until:
            ends = await _log_ends(session, urls, topic, partition)
            if len(ends) == 1 and None not in ends:
                break
            await asyncio.sleep(0.1)  # poll interval
        read = await asyncio.gather(*(read_replica(session, u, topic, partition) for u in urls))
        logs[f"{topic}-{partition}"] = [r for r in read if r is not None]
    return check_replicas(logs)


def read_kafka_replica(broker: int, log_dir: Path, topic: str, partition: int) -> ReplicaLog:
    """One Kafka broker's replica of topic-partition, from its log directory; its high
    watermark the broker's last checkpoint of it, capped at its log end."""
    log = kafka_logs.read_partition(log_dir, topic, partition)
    checkpointed = kafka_logs.read_hw_checkpoint(log_dir).get((topic, partition), 0)
    return ReplicaLog(broker, log.records, min(checkpointed, log.log_end_offset))


async def check_kafka_topic_replicas(log_dirs: Mapping[int, Path], topic: str,
                                     assignment: dict[int, list[int]],
                                     deadline: float) -> ReplicaCheck:
    """`log_dirs`: broker id -> its `log.dirs`; `assignment`: partition -> its replicas.
    Bounded by `deadline` (at most CONVERGE_WAIT_S per partition)."""
    logs: dict[str, list[ReplicaLog]] = {}
    for partition, replicas in sorted(assignment.items()):
        held = [b for b in replicas if b in log_dirs]

        def read(held: list[int] = held, partition: int = partition) -> list[ReplicaLog]:
            return [read_kafka_replica(b, log_dirs[b], topic, partition) for b in held]

        until = min(deadline, time.monotonic() + CONVERGE_WAIT_S)
        read_now = await asyncio.to_thread(read)
        while time.monotonic() < until:
            ends = {max((o for o, _ in r.records), default=-1) for r in read_now}
            if len(ends) == 1 and all(r.high_watermark > max(ends) for r in read_now):
                break
            await asyncio.sleep(0.2)  # poll interval (the checkpoint is every 5 s)
            read_now = await asyncio.to_thread(read)
        logs[f"{topic}-{partition}"] = read_now
    return check_replicas(logs)

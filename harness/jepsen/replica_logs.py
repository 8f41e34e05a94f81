"""Read every replica of the queue workload's partitions at the end of a run, through each
broker's GET /topics/{topic}/partitions/{p}/replica-log (its own log up to its log end), and
judge them with harness/check/replicas.py (`replica-divergence`: replicas that disagree below
their high watermarks, KIP-101's scenario 2).

The read waits, bounded, until the replicas of a partition report one log end offset (the
followers have caught up after the heal); whatever they hold then is compared. A broker that
does not answer is left out (fewer replicas compared, never a false anomaly).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from harness.check.replicas import ReplicaCheck, ReplicaLog, check_replicas

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

"""Figures for docs/benchmarks.md (metadata image and controller). Not a test (no test_ prefix):
    PYTHONPATH=. .venv/bin/python tests/metadata/bench_image.py
Best of 3 where repeated; single process, CPU-bound, no I/O."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import structlog

from quorum.metadata import KvPut, MetadataImage, decode_record, encode_record
from tests.controller.driver import Driver


def best_seconds(run: Callable[[], object], repeat: int = 3) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    data = [encode_record(KvPut(f"k{i % 1000}", "x" * 100)) for i in range(50_000)]

    def apply_all() -> None:
        image = MetadataImage()
        for offset, record in enumerate(data):
            image.apply(offset, 1, record)

    print(f"image.apply KvPut (100-byte values): {50_000 / best_seconds(apply_all):,.0f} records/s")
    record = KvPut("k", "x" * 100)
    encoded = encode_record(record)
    encode_s = best_seconds(lambda: [encode_record(record) for _ in range(20_000)])
    decode_s = best_seconds(lambda: [decode_record(encoded) for _ in range(20_000)])
    print(f"encode_record: {20_000 / encode_s:,.0f} records/s")
    print(f"decode_record: {20_000 / decode_s:,.0f} records/s")

    d = Driver()
    d.start_brokers(*range(101, 107))
    start = time.perf_counter()
    for i in range(30):
        d.create(f"t{i}", 100, 3)
    per_topic_ms = (time.perf_counter() - start) * 1000 / 30
    print(f"CreateTopic, 100 partitions RF 3 (handle + apply): {per_topic_ms:.1f} ms")
    start = time.perf_counter()
    d.heartbeat(101, want_fence=True)
    fence_ms = (time.perf_counter() - start) * 1000
    print(f"fence a broker in 1,500 of 3,000 partitions (handle + apply): {fence_ms:.0f} ms")
    d.now_ms = 2000
    start = time.perf_counter()
    d.tick()
    print(
        f"tick (repair pass over 3,000 partitions): {(time.perf_counter() - start) * 1000:.1f} ms"
    )
    snapshot = d.image.snapshot()
    snap_ms = best_seconds(d.image.snapshot) * 1000
    restore_ms = best_seconds(lambda: MetadataImage.restore(snapshot)) * 1000
    print(
        f"snapshot of 3,000 partitions: {snap_ms:.1f} ms, restore {restore_ms:.1f} ms, "
        f"{len(snapshot):,} bytes"
    )


if __name__ == "__main__":
    main()

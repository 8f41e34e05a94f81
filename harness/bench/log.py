"""partition log: append and read throughput against raw file writes on the same disk

For 100-byte records in batches of 1, 100 and 1,000: one pre-encoded RecordBatch v2 is appended
as leader over and over (offsets and leader epoch patched in place, CRC validated, index kept),
then the log is read back sequentially as raw batches through the index. In the same run, the
same bytes in the same chunk sizes are written to a plain file in the same directory with
os.write, interleaved with the log appends in 16 slices so both see the same machine load, and
read back with os.pread; `append_to_raw_ratio` is log MB/s over raw MB/s (median of the
rounds). Writes go to the page cache (no fsync) unless --fsync, which fsyncs both at the end.
`append_to_raw_ratio_cpu` is the same ratio in this thread's CPU time (time.thread_time), which
time spent waiting for a core does not inflate: on a shared machine under load the wall-clock
ratio swings with whoever else runs, the CPU-time one much less (equal on an idle machine, where
nothing takes the core away; writeback by kernel threads is in neither).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from harness.runtime.file_storage import FileStorage
from partition.log import batch as rb
from partition.log.config import LogConfig
from partition.log.log import PartitionLog

RECORD_BYTES = 100
BATCH_SIZES = (1, 100, 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=None, help="directory to write in (default: a temp dir)")
    parser.add_argument("--mb", type=float, default=64.0, help="MB appended per batch size")
    parser.add_argument("--max-appends", type=int, default=200_000, help="cap on appends per batch size")
    parser.add_argument("--fsync", action="store_true", help="fsync log and raw file at the end")
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    parser.add_argument("--repeats", type=int, default=5, help="rounds per batch size")


def _encode(records: int) -> bytes:
    value = bytes((i * 7) % 251 for i in range(RECORD_BYTES))
    return rb.encode_batch([rb.Record(value, timestamp_ms=1_700_000_000_000) for _ in range(records)],
                           producer_id=-1)  # fmt: skip


def _round(root: str, batch: bytes, appends: int, fsync: bool) -> dict[str, float]:
    """One round on fresh files: raw os.write and log appends interleaved in 16 slices, so both
    see the same load from whatever else runs on the machine; then both read back in full."""
    raw_path = os.path.join(root, "raw.bin")
    fd = os.open(raw_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
    log_dir = os.path.join(root, "log")
    log = PartitionLog.open(FileStorage(), log_dir, "bench", 0, LogConfig())
    try:
        write, append, clock, cpu = os.write, log.append_as_leader, time.perf_counter, time.thread_time
        write(fd, batch)  # warm-up: file creation is not what we measure, nor the log's first
        append(batch, 1)  # leader-epoch-checkpoint write
        raw_s = log_s = raw_cpu = log_cpu = 0.0
        slice_ = max(1, appends // 16)
        done = 0
        while done < appends:
            n = min(slice_, appends - done)
            c0, t0 = cpu(), clock()
            for _ in range(n):
                write(fd, batch)
            t1, c1 = clock(), cpu()
            for _ in range(n):
                append(batch, 1)
            t2, c2 = clock(), cpu()
            raw_s, log_s, done = raw_s + (t1 - t0), log_s + (t2 - t1), done + n
            raw_cpu, log_cpu = raw_cpu + (c1 - c0), log_cpu + (c2 - c1)
        if fsync:
            t0 = clock()
            os.fsync(fd)
            t1 = clock()
            log.flush()
            raw_s, log_s = raw_s + (t1 - t0), log_s + (clock() - t1)
        total = len(batch) * (appends + 1)
        t0 = clock()
        position = 0
        while position < total:
            position += len(os.pread(fd, 1 << 20, position))
        t1 = clock()
        offset, read_bytes, read = 0, 0, log.read_slice
        while offset < log.log_end_offset:  # like a fetch loop forwarding bytes: nothing parsed
            data, offset = read(offset, 1 << 20)
            read_bytes += len(data)
        t2 = clock()
        assert read_bytes == total, (read_bytes, total)
        return {"raw_write": raw_s, "log_write": log_s, "raw_read": t1 - t0, "log_read": t2 - t1,
                "raw_write_cpu": raw_cpu, "log_write_cpu": log_cpu}
    finally:
        os.close(fd)
        log.close()
        os.remove(raw_path)
        shutil.rmtree(log_dir)


def _measure(root: str, records: int, mb: float, max_appends: int, fsync: bool, repeats: int) -> dict[str, Any]:
    """MB/s from the best of `repeats` rounds; ratios are the median of the rounds' ratios."""
    batch = _encode(records)
    appends = max(1, min(max_appends, int(mb * 1e6 / len(batch))))
    rounds = [_round(root, batch, appends, fsync) for _ in range(repeats)]
    best = {k: min(r[k] for r in rounds) for k in rounds[0]}
    mb_total = len(batch) * appends / 1e6
    return {
        "records_per_batch": records,
        "record_bytes": RECORD_BYTES,
        "batch_bytes": len(batch),
        "appends": appends,
        "mb": round(mb_total, 2),
        "append_mb_per_s": round(mb_total / best["log_write"], 1),
        "append_records_per_s": round(records * appends / best["log_write"]),
        "raw_write_mb_per_s": round(mb_total / best["raw_write"], 1),
        "append_to_raw_ratio": round(statistics.median(r["raw_write"] / r["log_write"] for r in rounds), 3),
        "append_to_raw_ratio_cpu": round(statistics.median(r["raw_write_cpu"] / r["log_write_cpu"] for r in rounds), 3),
        "read_mb_per_s": round(mb_total / best["log_read"], 1),
        "read_records_per_s": round(records * appends / best["log_read"]),
        "raw_read_mb_per_s": round(mb_total / best["raw_read"], 1),
        "read_to_raw_ratio": round(statistics.median(r["raw_read"] / r["log_read"] for r in rounds), 3),
    }


def measure_append(records_per_batch: int, mb: float = 32.0, repeats: int = 5,
                   fsync: bool = False) -> dict[str, Any]:  # fmt: skip
    """One row for a table of figures: append and read against raw writes for one batch size
    (`append_to_raw_ratio` is the figure), in a temp dir."""
    root = tempfile.mkdtemp(prefix="kraftlab-bench-log-")
    try:
        return _measure(root, records_per_batch, mb, 200_000, fsync, repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    root = tempfile.mkdtemp(prefix="kraftlab-bench-log-", dir=args.dir)
    try:
        sizes = [int(s) for s in args.batch_sizes.split(",")]
        results = [_measure(root, n, args.mb, args.max_appends, args.fsync, args.repeats) for n in sizes]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {"bench": "log", "fsync": args.fsync, "repeats": args.repeats, "dir": args.dir or tempfile.gettempdir(), "results": results}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{'batch':>6} {'append MB/s':>12} {'records/s':>12} {'raw MB/s':>10} {'ratio':>6} {'cpu':>6} "
          f"{'read MB/s':>10} {'read rec/s':>12} {'raw read':>10}")  # fmt: skip
    for r in results:
        print(f"{r['records_per_batch']:>6} {r['append_mb_per_s']:>12} {r['append_records_per_s']:>12} "
              f"{r['raw_write_mb_per_s']:>10} {r['append_to_raw_ratio']:>6} {r['append_to_raw_ratio_cpu']:>6} "
              f"{r['read_mb_per_s']:>10} {r['read_records_per_s']:>12} {r['raw_read_mb_per_s']:>10}")  # fmt: skip
    return 0

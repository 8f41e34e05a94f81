"""fsync: the latency distribution of append + fdatasync by batch size, preallocated or not

Each case is one file in the chosen directory (default: a temp directory, so the disk under
it): an append of `batch_bytes` (os.write, to the page cache) and then os.fdatasync, timed
around the fdatasync alone, `--samples` times. Not preallocated is Kafka's default on Linux
(`file.preallocate`=false: a segment grows with each append, so fdatasync also writes the new
size); preallocated files are extended with posix_fallocate and made durable once before the
first sample, so each fdatasync writes data only. Cases take turns sample by sample, so each
sees the same load from whatever else runs on the machine; the first WARMUP samples of each are
dropped. `--write PATH` writes the distribution (harness/results/fsync.py) with the machine,
the command and the date; the repository's default, harness/results/fsync_default.json, is one
such file, and the simulator's disk model draws fsync times from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.results.fsync import FsyncCase, FsyncProfile

# A produce batch of a few records, Kafka's batch.size default (16 KiB), a large batch, and
# the 1 MiB cap of a fetch or message (message.max.bytes).
BATCH_BYTES = (512, 16_384, 262_144, 1_048_576)
WARMUP = 5
FILE_CAP_BYTES = 256 << 20  # a case starts a fresh file past this (a segment roll)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=None, help="directory on the disk to measure "
                                                    "(default: a temp dir)")
    parser.add_argument("--batch-bytes", default=",".join(map(str, BATCH_BYTES)),
                        help="comma-separated append sizes")
    parser.add_argument("--samples", type=int, default=1000, help="fdatasyncs per case")
    parser.add_argument("--preallocated", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--write", default=None, metavar="PATH",
                        help="write the distribution JSON here (the simulator's format)")


class _File:
    """One case's file: appends at the end, a fresh file past FILE_CAP_BYTES."""

    def __init__(self, root: str, name: str, batch_bytes: int, preallocated: bool,
                 samples: int) -> None:
        self.path = os.path.join(root, name)
        self.batch = bytes((i * 31) % 251 for i in range(batch_bytes))
        self.preallocated = preallocated
        self.size = min(FILE_CAP_BYTES, batch_bytes * (samples + WARMUP))
        self.fd = -1
        self._open()

    def _open(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | (0 if self.preallocated else os.O_APPEND)
        self.fd = os.open(self.path, flags, 0o644)
        self.position = 0
        if self.preallocated:
            os.posix_fallocate(self.fd, 0, self.size)
            os.fsync(self.fd)  # the allocation itself is not what is measured

    def sample_us(self) -> tuple[float, float]:
        """(write µs, fdatasync µs) of one append."""
        if self.position + len(self.batch) > self.size:
            self._open()
        t0 = time.perf_counter()
        if self.preallocated:
            os.pwrite(self.fd, self.batch, self.position)
        else:
            os.write(self.fd, self.batch)
        t1 = time.perf_counter()
        os.fdatasync(self.fd)
        t2 = time.perf_counter()
        self.position += len(self.batch)
        return (t1 - t0) * 1e6, (t2 - t1) * 1e6

    def close(self) -> None:
        os.close(self.fd)
        os.remove(self.path)


def measure(root: str, sizes: list[int], preallocated: list[bool],
            samples: int) -> tuple[list[FsyncCase], dict[tuple[int, bool], float]]:
    """The cases, interleaved sample by sample; also each case's mean write (page cache) µs."""
    keys = [(size, pre) for size in sizes for pre in preallocated]
    files = {k: _File(root, f"case-{k[0]}-{int(k[1])}.bin", k[0], k[1], samples) for k in keys}
    fsyncs: dict[tuple[int, bool], list[float]] = {k: [] for k in keys}
    writes: dict[tuple[int, bool], list[float]] = {k: [] for k in keys}
    try:
        for i in range(samples + WARMUP):
            for k in keys:
                write_us, fsync_us = files[k].sample_us()
                if i >= WARMUP:
                    writes[k].append(write_us)
                    fsyncs[k].append(fsync_us)
    finally:
        for f in files.values():
            f.close()
    cases = [FsyncCase.from_samples(size, pre, fsyncs[(size, pre)]) for size, pre in keys]
    return cases, {k: round(sum(v) / len(v), 1) for k, v in writes.items()}


def _mount(path: str) -> dict[str, str]:
    """The filesystem under `path` from /proc/mounts (Linux), else {}."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return {}
    real = os.path.realpath(path)
    best: dict[str, str] = {}
    for line in lines:
        device, point, fstype, options, *_ = line.split()
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best.get("mount_point", "")):
            best = {"device": device, "mount_point": point, "fs_type": fstype,
                    "mount_options": options}
    return best


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine(root: str) -> dict[str, Any]:
    return {"system": platform.system(), "kernel": platform.release(),
            "architecture": platform.machine(), "cpus": os.cpu_count(), "cpu": _cpu_model(),
            "python": platform.python_version(), **_mount(root)}


def command(args: argparse.Namespace) -> str:
    parts = ["kraftlab bench fsync", f"--batch-bytes {args.batch_bytes}",
             f"--samples {args.samples}", f"--preallocated {args.preallocated}"]
    if args.dir:
        parts.append(f"--dir {args.dir}")
    if args.write:
        parts.append(f"--write {Path(args.write).name}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.batch_bytes.split(",")]
    preallocated = {"both": [False, True], "yes": [True], "no": [False]}[args.preallocated]
    if args.samples < 1 or min(sizes) < 1:
        print("error: --samples and every --batch-bytes must be >= 1", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="kraftlab-bench-fsync-", dir=args.dir)
    load_before = os.getloadavg()
    started = datetime.now(UTC)
    try:
        info = machine(root)
        cases, write_means = measure(root, sizes, preallocated, args.samples)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()
    measured = {
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((datetime.now(UTC) - started).total_seconds(), 1),
        "command": command(args), "machine": info,
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "method": "os.write (or os.pwrite into a posix_fallocate'd file) of batch_bytes, then "
                  "os.fdatasync, timed around the fdatasync; cases interleaved sample by "
                  f"sample; first {WARMUP} samples per case dropped",
        "write_mean_us": {f"{size}/{'preallocated' if pre else 'appended'}": v
                          for (size, pre), v in write_means.items()},
    }
    profile = FsyncProfile(measured, tuple(cases))
    if args.write:
        Path(args.write).write_text(profile.dumps())
    if args.json:
        print(json.dumps(profile.to_json()))
        return 0
    print(f"{measured['date']} {info.get('fs_type', '?')} on {info.get('device', '?')}, "
          f"load {measured['load_average_1m']}")
    print(f"{'batch':>9} {'prealloc':>8} {'n':>5} {'p50 µs':>9} {'p90':>9} {'p99':>9} "
          f"{'p99.9':>9} {'max':>9} {'mean':>9}")
    for c in cases:
        p = c.to_json()["percentiles_us"]
        print(f"{c.batch_bytes:>9} {str(c.preallocated).lower():>8} {c.samples:>5} "
              f"{p['p50']:>9} {p['p90']:>9} {p['p99']:>9} {p['p99.9']:>9} {p['p100']:>9} "
              f"{c.mean_us:>9}")
    if args.write:
        print(f"written: {args.write}")
    return 0

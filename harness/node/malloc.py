"""Keep large buffers in the process's heap instead of fresh mmap'ed memory (glibc only).

A broker copies whole record batches (up to 1 MiB from a Kafka client, 1 MiB fetch answers to
its followers) a few times per request. With glibc's defaults an allocation that large is a fresh
`mmap`, returned to the kernel on `free`, so every copy into it also pays a page fault per 4 KiB
and the zeroing of the page: a 1 MiB msgpack encode of a fetch answer took 3.8-4.3 ms instead of
0.35-0.38 ms (docs/benchmarks.md, "Kafka listener and replication path"). Raising
M_MMAP_THRESHOLD (32 MiB: glibc's ceiling on 64-bit) and M_TRIM_THRESHOLD keeps freed buffers
for reuse, at the price of up to M_TRIM_THRESHOLD bytes of freed heap held per process.

`KRAFTLAB_MALLOC_TUNE=0` leaves glibc's defaults (to measure the difference).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit glibc
TRIM_THRESHOLD_BYTES = 128 << 20


def tune_malloc() -> bool:
    """Apply the thresholds; False where there is no glibc `mallopt` or it refused them."""
    if os.environ.get("KRAFTLAB_MALLOC_TUNE", "1") == "0":
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )

"""One Kafka node's clock, skewed at run time: libfaketime preloaded into its JVM, steered
through a control file the clock nemesis rewrites (`kraftlab jepsen run --system kafka
--nemesis clock`, docs/kafka-peer.md "Clock faults").

A JVM reads the machine's clocks (System.currentTimeMillis: CLOCK_REALTIME; System.nanoTime:
CLOCK_MONOTONIC), so skewing one node's clock needs its clock calls answered by someone else.
libfaketime (Debian's `libfaketime`, 0.9.10 in bookworm; README "Changing the 'x' modifier
during run-time") is an LD_PRELOAD library that does that for one process tree:
- `FAKETIME_TIMESTAMP_FILE` names the node's control file (`<data dir>/faketime.rc`), read on
  every clock call (`FAKETIME_NO_CACHE=1`: a change takes effect at the next call, not up to
  10 s later); its one line is an offset and a rate, "+1.500 x1" (1.5 s ahead) or
  "-0.250 x2" (250 ms behind and running twice as fast), written by `set_clock` with a rename
  (a reader never sees half a line). The rate is always written: libfaketime keeps the rate
  of the previous line when a line has none (seen: "+0" after "x0.5" left a JVM 8 s behind);
- both clocks are moved, CLOCK_MONOTONIC as CLOCK_REALTIME (libfaketime's default): with
  `FAKETIME_DONT_FAKE_MONOTONIC=1` a JVM's timed waits spin (measured: 7.6 s of CPU for 3 s
  of Thread.sleep, against 0.05 s with both faked). So a jump back also moves the JVM's
  nanoTime back, where kraftlab's node clock (harness/runtime/clock.py) holds its reading; a
  Kafka timer (org.apache.kafka.common.utils.Timer#update) keeps the later time and so waits
  the jump out, as kraftlab's do;
- libfaketime applies a rate to the time elapsed since the process started ("+OFF xR" reads
  start + OFF + R x elapsed), so a rate set mid-run would also jump the clock by (R - 1) x the
  process's age. `set_clock` takes that out of the offset, the process's start read from
  /proc/PID/stat (clock ticks, 10 ms): a drift begins within about 10 ms x |R - 1| of
  continuous.

A new JVM of the node starts in step (its control file is reset by `prepare`); the nemesis's
heal writes "+0.000 x1", which steps the clock back in step as kraftlab's heal does.
Overhead: idle, six JVMs took 20.2% of a core plain and 23.8% preloaded (20 s each, one run;
docs/kafka-peer.md), so only a peer started for clock faults preloads it (`PeerFile.faketime`).
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

CONTROL_FILE = "faketime.rc"
LIBRARY_GLOB = "/usr/lib/*/faketime/libfaketime.so.1"


class FaketimeError(RuntimeError):
    """libfaketime is missing, or a node's clock cannot be set."""


def library() -> str:
    """The path of libfaketime.so.1 (Debian's multiarch folder), or FaketimeError saying how
    to install it."""
    found = sorted(glob.glob(LIBRARY_GLOB))
    if not found:
        raise FaketimeError("clock faults on Apache Kafka need libfaketime "
                            f"({LIBRARY_GLOB} not found): run `bash .ci/install`, which "
                            "installs Debian's libfaketime")
    return found[0]


def control_file(node_dir: Path) -> Path:
    return node_dir / CONTROL_FILE


def _write(path: Path, line: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(line + "\n")
    os.replace(tmp, path)


def prepare(node_dir: Path) -> dict[str, str]:
    """Reset the node's control file to "in step" and return the environment its JVM starts
    with (module docstring)."""
    path = control_file(node_dir)
    _write(path, "+0.000 x1")
    return {"LD_PRELOAD": library(), "FAKETIME_TIMESTAMP_FILE": str(path),
            "FAKETIME_NO_CACHE": "1"}


def process_age_s(pid: int) -> float:
    """Seconds since the process started (its start in /proc/PID/stat, clock ticks since
    boot, against CLOCK_BOOTTIME now)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError as exc:
        raise FaketimeError(f"process {pid} is gone: {exc}") from exc
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


def control_line(skew_ms: float, rate: float, age_s: float) -> str:
    """The control file's line for a clock `skew_ms` ahead now and running at `rate` from now
    on, in a process `age_s` old (the rate's jump taken out: module docstring)."""
    if not (rate > 0 and rate == rate and rate != float("inf")):
        raise FaketimeError(f"a clock rate must be positive and finite, not {rate}")
    offset_s = skew_ms / 1000.0 - (rate - 1.0) * age_s
    # always with its rate: a line without one keeps the rate of the line before
    return f"{offset_s:+.3f} x{rate:g}"


def set_clock(node_dir: Path, pid: int, skew_ms: float, rate: float = 1.0) -> str:
    """Move the node's clock to `skew_ms` ahead of the machine's, running at `rate`; returns
    the line written. FaketimeError if the node was not started with libfaketime."""
    path = control_file(node_dir)
    if not path.exists():
        raise FaketimeError(f"{node_dir} was not started with libfaketime (no {CONTROL_FILE})")
    line = control_line(skew_ms, rate, process_age_s(pid) if rate != 1.0 else 0.0)
    _write(path, line)
    return line

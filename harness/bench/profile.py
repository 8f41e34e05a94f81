"""Profiling node processes from outside during a bench phase (`kraftlab bench quorum --profile`).

Two samplers, both attached by PID to processes this bench started, both stopped with SIGINT at
the end of the phase (they write their files then):
- py-spy (`py-spy record --nonblocking --gil --format raw`): Python stacks sampled while the
  thread holds the GIL, i.e. the process's Python CPU, never pausing the target;
- strace (`strace -c -f`), optional: system calls counted per kind (writes, reads, epoll waits,
  fsyncs, preads), which is what "wakeups and copies per commit" come down to. strace slows the
  target a lot: its counts are meaningful, the phase's latencies then are not.

`summarize` turns a py-spy raw file into milliseconds of CPU per commit, by function (self and
inclusive), which is how docs/benchmarks.md states where a commit's CPU goes.
"""

from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_RATE_HZ = 500
_FRAME = re.compile(r"(.*) \((.*):(\d+)\)")


def _short(frame: str) -> str:
    """`fn (path/to/module.py:line)` -> `fn (module path inside the project or library)`."""
    m = _FRAME.match(frame)
    if not m:
        return frame
    fn, path, _ = m.groups()
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        parts = Path(path).parts
        for root in ("harness", "quorum", "partition", "coordinator"):
            if root in parts:
                path = "/".join(parts[parts.index(root):])
                break
    return f"{fn} ({path})"


@dataclass
class Profilers:
    """The samplers attached to one phase; `stop()` ends them and waits for their files."""

    out_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()  # our own sampler, by its handle
                proc.wait()


def py_spy_path() -> str | None:
    """py-spy from the running interpreter's environment first (the dev extra installs it)."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def start(out_dir: Path, pids: dict[str, int], syscalls: bool) -> Profilers:
    """Attach py-spy (and strace when `syscalls`) to each `name -> pid`; files in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spy = py_spy_path()
    if spy is None:
        raise RuntimeError("py-spy not found: pip install py-spy (the project's dev extra has it)")
    profilers = Profilers(out_dir)
    for name, pid in pids.items():
        raw = out_dir / f"{name}.pyspy.txt"
        profilers.procs.append(subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--nonblocking", "--gil", "--rate",
             str(SAMPLE_RATE_HZ), "--format", "raw", "--output", str(raw)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        profilers.files[f"{name}.pyspy"] = raw
        if syscalls and shutil.which("strace"):
            counts = out_dir / f"{name}.strace.txt"
            profilers.procs.append(subprocess.Popen(
                ["strace", "-c", "-f", "-p", str(pid), "-o", str(counts)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
            profilers.files[f"{name}.strace"] = counts
    return profilers


def summarize(raw: Path, commits: int, top: int = 20) -> dict[str, list[tuple[str, float]]]:
    """CPU ms per commit by function from a py-spy raw file: `self` (where the time is spent)
    and `inclusive` (what it is spent under), the `top` largest of each."""
    self_samples: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    if raw.exists():
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [_short(f) for f in stack.split(";")]
            self_samples[frames[-1]] += int(count)
            for frame in set(frames):
                inclusive[frame] += int(count)
    per_commit = 1000 / SAMPLE_RATE_HZ / max(1, commits)

    def rows(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(n * per_commit, 4)) for name, n in counter.most_common(top)]

    return {"self": rows(self_samples), "inclusive": rows(inclusive)}


def syscall_counts(strace_file: Path, commits: int) -> dict[str, float]:
    """System calls per commit by name, from an `strace -c` summary."""
    out: dict[str, float] = {}
    if not strace_file.exists():
        return out
    for line in strace_file.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            calls = parts[3]
            if calls.isdigit():
                out[parts[-1]] = round(int(calls) / max(1, commits), 2)
    return out

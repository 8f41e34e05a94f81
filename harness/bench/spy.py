"""py-spy on the broker processes during a data-plane benchmark (`--py-spy DIR` of `bench produce`
and `bench kafka-produce`): where the brokers' time goes, docs/benchmarks.md.

When the measured phase starts, one `py-spy record --format raw` per broker process samples it
for `--py-spy-seconds` at 400 Hz (`--nonblocking`: the broker is never stopped); the raw stacks go
to DIR/<label>-<broker id>.txt and the top frames by own samples are printed. py-spy is not a
project dependency (`pip install py-spy`); without it the option fails before the cluster starts.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from harness.launcher import cluster as cl

RATE_HZ = 400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--py-spy", metavar="DIR", help="sample every broker with py-spy during the "
                        "measured phase, raw stacks to DIR (docs/benchmarks.md)")  # fmt: skip
    parser.add_argument("--py-spy-seconds", type=int, default=6)


def executable() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # the virtualenv's, if installed there
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("error: --py-spy needs py-spy on the PATH (pip install py-spy)")
    return found


def start(cluster: cl.ClusterFile, args: argparse.Namespace, label: str) -> list[subprocess.Popen[bytes]]:
    """One sampler per broker, or none without --py-spy."""
    if not getattr(args, "py_spy", None):
        return []
    out = Path(args.py_spy)
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for b in cluster.brokers:
        if b.pid is None:
            continue
        procs.append(subprocess.Popen(
            [executable(), "record", "--pid", str(b.pid), "-d", str(args.py_spy_seconds),
             "-r", str(RATE_HZ), "--nonblocking", "--format", "raw",
             "-o", str(out / f"{label}-{b.id}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))  # fmt: skip
    return procs


def finish(procs: list[subprocess.Popen[bytes]], args: argparse.Namespace, label: str) -> None:
    """Wait for the samplers; print each broker's top frames by own samples."""
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            print(f"py-spy failed ({p.returncode}): {err.decode(errors='replace').strip()[-300:]}")
    if not procs:
        return
    for path in sorted(Path(args.py_spy).glob(f"{label}-*.txt")):
        total, top = own_samples(path)
        print(f"py-spy {path.name}: {total} samples")
        for frame, n in top.most_common(8):
            print(f"  {100 * n / max(total, 1):5.1f}%  {frame}")


def own_samples(path: Path) -> tuple[int, Counter[str]]:
    """(samples, samples per innermost frame) of a py-spy raw file (`stack;stack;frame count`)."""
    total = 0
    own: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        own[stack.rsplit(";", 1)[-1]] += int(count)
    return total, own

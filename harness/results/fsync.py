"""A measured fsync latency distribution: what `kraftlab bench fsync` writes and what the
simulator's disk model draws fsync times from.

The file is JSON (`fsync_default.json` beside this module is the one measured for the repo;
docs/benchmarks.md says how). It names the machine, the command and the date, and holds one
case per (batch size, preallocated or not): an append of `batch_bytes` followed by
`os.fdatasync`, timed around the fdatasync alone, `samples` times. Each case keeps its quantile
table (QUANTILES, microseconds), a log-spaced histogram for reading, and the mean.

Drawing: `FsyncCase.draw_us(u)` maps a uniform `u` in [0, 1) onto the quantile table by linear
interpolation (inverse CDF), so a simulator with its own seeded RNG draws deterministically and
the draws follow the measured distribution up to the table's resolution (every percentile, then
p99.5, p99.9, p99.99 and the maximum).

Standard library only: a Spark executor runs the simulator without pyarrow or numpy, and reads
the default through importlib.resources (it may be imported from a zip).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

FORMAT = "kraftlab-fsync-latency"
FORMAT_VERSION = 1
DEFAULT_FILE = "fsync_default.json"
QUANTILES: tuple[float, ...] = tuple(i / 100 for i in range(100)) + (0.995, 0.999, 0.9999, 1.0)


class FsyncFileError(ValueError):
    """A distribution file is not in FORMAT (says which field)."""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The `q` quantile of sorted values, linear interpolation between closest ranks."""
    if not sorted_values:
        raise ValueError("no values")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def log_histogram(sorted_values: Sequence[float], bins_per_decade: int = 5) -> dict[str, list[Any]]:
    """Counts in log-spaced bins covering the values: `edges_us` has one more entry than
    `counts`; bin i holds edges[i] <= v < edges[i + 1] (the last bin includes its top edge)."""
    low = max(min(sorted_values), 1.0)
    high = max(max(sorted_values), low * 1.0001)
    first = math.floor(math.log10(low) * bins_per_decade)
    last = math.ceil(math.log10(high) * bins_per_decade)
    edges = [round(10 ** (k / bins_per_decade), 1) for k in range(first, last + 1)]
    counts = [0] * (len(edges) - 1)
    for v in sorted_values:
        i = min(max(bisect.bisect_right(edges, v) - 1, 0), len(counts) - 1)
        counts[i] += 1
    return {"edges_us": edges, "counts": counts}


@dataclass(frozen=True, slots=True)
class FsyncCase:
    batch_bytes: int
    preallocated: bool
    samples: int
    quantiles_us: tuple[tuple[float, float], ...]  # (q, microseconds), q increasing 0 .. 1
    mean_us: float
    histogram: dict[str, list[Any]]

    @classmethod
    def from_samples(cls, batch_bytes: int, preallocated: bool,
                     samples_us: Sequence[float]) -> FsyncCase:
        values = sorted(samples_us)
        table = tuple((q, round(quantile(values, q), 1)) for q in QUANTILES)
        return cls(batch_bytes, preallocated, len(values), table,
                   round(sum(values) / len(values), 1), log_histogram(values))

    def percentile_us(self, q: float) -> float:
        """The q quantile (0 <= q <= 1) interpolated from the table."""
        return self.draw_us(q)

    def draw_us(self, u: float) -> float:
        """Inverse CDF: the fsync time for a uniform draw `u` in [0, 1)."""
        if not 0 <= u <= 1:
            raise ValueError(f"u={u} outside [0, 1]")
        qs = [q for q, _ in self.quantiles_us]
        i = min(bisect.bisect_right(qs, u), len(qs) - 1)
        (q0, v0), (q1, v1) = self.quantiles_us[i - 1], self.quantiles_us[i]
        return v0 if q1 == q0 else v0 + (v1 - v0) * (u - q0) / (q1 - q0)

    def to_json(self) -> dict[str, Any]:
        return {"batch_bytes": self.batch_bytes, "preallocated": self.preallocated,
                "samples": self.samples, "mean_us": self.mean_us,
                "percentiles_us": {label(q): v for q, v in self.quantiles_us
                                   if label(q) in SUMMARY_LABELS},
                "quantiles_us": [list(p) for p in self.quantiles_us],
                "histogram": self.histogram}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FsyncCase:
        table = tuple((float(q), float(v)) for q, v in data["quantiles_us"])
        qs = [q for q, _ in table]
        if qs != sorted(qs) or qs[0] != 0 or qs[-1] != 1:
            raise FsyncFileError("quantiles_us must run from q=0 to q=1, increasing")
        if any(b[1] < a[1] for a, b in zip(table, table[1:], strict=False)):
            raise FsyncFileError("quantiles_us values must not decrease")
        return cls(int(data["batch_bytes"]), bool(data["preallocated"]), int(data["samples"]),
                   table, float(data["mean_us"]), dict(data["histogram"]))


def label(q: float) -> str:
    """p50, p99, p99.9, p100 ..."""
    return "p" + f"{100 * q:.2f}".rstrip("0").rstrip(".")


SUMMARY_LABELS = ("p0", "p50", "p90", "p99", "p99.9", "p99.99", "p100")


@dataclass(frozen=True, slots=True)
class FsyncProfile:
    """Every measured case and how they were measured (machine, command, date, method)."""

    measured: dict[str, Any]
    cases: tuple[FsyncCase, ...]

    def case(self, batch_bytes: int, preallocated: bool = False) -> FsyncCase:
        """The case of the nearest measured batch size (in log scale) with that preallocation,
        or of either preallocation when only the other was measured."""
        pool = [c for c in self.cases if c.preallocated == preallocated] or list(self.cases)
        return min(pool, key=lambda c: (abs(math.log(max(c.batch_bytes, 1))
                                            - math.log(max(batch_bytes, 1))), c.batch_bytes))

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, "measured": self.measured,
                "cases": [c.to_json() for c in self.cases]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FsyncProfile:
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise FsyncFileError(f"format={data.get('format')!r} version={data.get('version')!r}, "
                                 f"expected {FORMAT!r} version {FORMAT_VERSION}")
        cases = tuple(FsyncCase.from_json(c) for c in data.get("cases", ()))
        if not cases:
            raise FsyncFileError("no cases")
        return cls(dict(data.get("measured", {})), cases)

    def dumps(self) -> str:
        """Indented JSON with every list of numbers on one line (a readable, diffable file)."""
        text = json.dumps(self.to_json(), indent=1)
        return _NUMBER_LIST.sub(lambda m: re.sub(r"\s+", " ", m.group(0))
                                .replace("[ ", "[").replace(" ]", "]"), text) + "\n"


_NUMBER_LIST = re.compile(r"\[[\s\d.,eE+-]*\]")


def load(path: Path | str) -> FsyncProfile:
    return FsyncProfile.from_json(json.loads(Path(path).read_text()))


def load_default() -> FsyncProfile:
    """The distribution shipped in the repository (measured on the project's machine)."""
    text = resources.files(__package__ or "harness.results").joinpath(DEFAULT_FILE).read_text()
    return FsyncProfile.from_json(json.loads(text))

"""The study's statistics on the driver: paired differences over seeds with bootstrap intervals,
Wilson intervals per cell, and the decision rules every verdict uses (docs/compare.md,
"Statistics").

The unit of evidence is the seed. Runs of the same seed in two arms share the fault schedule,
its victims and the clients' timings (the simulator draws them from the seed, not from the
settings), so a cell's paired difference d_s = metric(b, seed s) - metric(a, seed s) removes
what the seeds have in common. Per cell and metric:
- the mean of d over the cell's seeds, and its 95% BCa bootstrap interval (bias-corrected and
  accelerated: Efron, "Better bootstrap confidence intervals", JASA 1987; DiCiccio and Efron,
  "Bootstrap confidence intervals", Statistical Science 1996): RESAMPLES resamples of the seeds
  with replacement, from a generator seeded by the cell's name, so the interval is the same on
  every run of the report and does not depend on the other cells. The percentile interval it
  replaces under-covers at the study's few seeds, most where d is skewed (a few seeds that
  lose seconds, the rest nothing); BCa corrects for the resamples' median bias and for the
  skew (the jackknife's acceleration);
- a p-value for "no difference" (d symmetric about 0): the paired sign-flip permutation test,
  exact over all 2^n sign vectors up to EXACT_FLIPS_MAX seeds, else SIGN_FLIPS seeded flips
  (Fisher 1935; Good, "Permutation, parametric and bootstrap tests of hypotheses", 2005);
- false-discovery control across the grid: the Benjamini-Hochberg q-value of each p over every
  (comparison, cell, metric) of one `paired_cells` call (Benjamini and Hochberg, JRSS B 1995),
  so about 1,400 intervals read together do not turn chance into findings;
- the verdict, decided by THRESHOLDS stated before any number (`decide`): `b-better` when the
  whole interval is past the margin in b's favour and q <= FDR, `a-better` symmetrically,
  `equivalent` when the whole interval lies within the margin, `inconclusive` otherwise
  (among them a difference past the margin that does not survive the FDR control),
  `insufficient` below MIN_SEEDS paired seeds;
- safety is not averaged: an arm that lost an acknowledged write in any run of a cell has shown
  the loss can happen (the run is its reproduction); an arm that lost none in n runs has a 95%
  Wilson upper bound on its loss rate (`safety_verdict`).
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

WILSON_Z = 1.959963984540054  # two-sided 95%
RESAMPLES = 2000
LEVEL = 0.95
MIN_SEEDS = 5
FDR = 0.05  # the false-discovery rate the difference verdicts are held to
EXACT_FLIPS_MAX = 16  # up to 2^16 sign vectors enumerated; beyond, SIGN_FLIPS drawn
SIGN_FLIPS = 20000
_NORMAL = NormalDist()
BASE_SEED = 20240101

B_BETTER, A_BETTER, EQUIVALENT, INCONCLUSIVE, INSUFFICIENT = (
    "b-better", "a-better", "equivalent", "inconclusive", "insufficient")


@dataclass(frozen=True, slots=True)
class Metric:
    """A per-run number compared between arms: `column` of the paired frame (a_<column>,
    b_<column>), whether more is better, and the margin below which a difference is no
    difference (in the metric's unit)."""

    column: str
    label: str
    unit: str
    higher_is_better: bool
    margin: float


# Stated in the report before the numbers (report.thresholds_lines).
METRICS: tuple[Metric, ...] = (
    Metric("avail_fault", "write availability during the fault (acknowledged / attempted)",
           "fraction", True, 0.02),
    Metric("unavail_ms_during", "unavailable time during the fault (open-loop probe)", "ms",
           False, 100.0),
    Metric("max_unavailable_ms", "longest window without an acknowledged write", "ms", False,
           100.0),
    Metric("p99_ms_during", "p99 acknowledged-write latency during the fault", "ms", False,
           10.0),
    Metric("p99_ms_before", "p99 acknowledged-write latency before the fault", "ms", False,
           2.0),
    Metric("recovery_ms", "time from the heal to the first acknowledged write", "ms", False,
           100.0),
)
METRIC_BY_COLUMN = {m.column: m for m in METRICS}


def wilson(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n trials (Wilson 1927); (0, 1) for n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def cell_seed(*parts: object) -> int:
    """A generator seed from a cell's name: the same cell gets the same resamples whatever
    else is in the report."""
    return BASE_SEED ^ zlib.crc32("|".join(map(str, parts)).encode())


def bootstrap_mean(values: Sequence[float], seed: int, resamples: int = RESAMPLES,
                   level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` and its BCa bootstrap interval (module
    docstring). Constant data has the zero-width interval at its value."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(data.mean())
    if data.size == 1 or np.all(data == data[0]):
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    # bias: the share of resampled means below the estimate (ties count half), as a z-score
    below = (np.count_nonzero(means < mean) + 0.5 * np.count_nonzero(means == mean)) / resamples
    edge = 0.5 / resamples
    z0 = _NORMAL.inv_cdf(min(max(below, edge), 1 - edge))
    # acceleration: the skew of the jackknife (leave-one-seed-out) means
    jack = (data.sum() - data) / (data.size - 1)
    d = jack.mean() - jack
    spread = float((d * d).sum())
    accel = float((d ** 3).sum()) / (6 * spread ** 1.5) if spread > 0 else 0.0
    tail = (1 - level) / 2
    probs = []
    for alpha in (tail, 1 - tail):
        z = z0 + _NORMAL.inv_cdf(alpha)
        probs.append(_NORMAL.cdf(z0 + z / (1 - accel * z)))
    low, high = np.quantile(means, probs)
    return mean, float(low), float(high)


def sign_flip_p(values: Sequence[float], seed: int, flips: int = SIGN_FLIPS) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of mean 0 (module
    docstring): the share of sign vectors whose mean is at least as far from 0 as the data's."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan
    observed = abs(float(data.mean()))
    if observed == 0.0:
        return 1.0
    if data.size <= EXACT_FLIPS_MAX:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=data.size)))
        extra = 0
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice((1.0, -1.0), size=(flips, data.size))
        extra = 1  # the data's own signs, so p is never 0 (Phipson and Smyth 2010)
    tol = 1e-12 * max(1.0, observed)
    hits = int(np.count_nonzero(np.abs(signs @ data / data.size) >= observed - tol))
    return (hits + extra) / (len(signs) + extra)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """The Benjamini-Hochberg q-value of each p (NaN stays NaN and is not counted): the
    smallest FDR at which its test would be called a discovery."""
    p = np.asarray(pvalues, dtype=float)
    q = np.full(p.shape, math.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return q.tolist()
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order] * ok.size / np.arange(1, ok.size + 1)
    q[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return q.tolist()


def decide(low: float, high: float, metric: Metric, n: int, min_seeds: int = MIN_SEEDS,
           q: float = 0.0) -> str:
    """The verdict on a paired difference b - a with interval [low, high] and FDR q-value `q`
    (see the module docstring); `b-better` means b is better whichever direction `better` is
    for the metric."""
    if n < min_seeds or math.isnan(low) or math.isnan(high):
        return INSUFFICIENT
    sign = 1.0 if metric.higher_is_better else -1.0
    # In "better" units: positive favours b.
    lo, hi = sorted((sign * low, sign * high))
    discovered = not math.isnan(q) and q <= FDR
    if lo > metric.margin and discovered:
        return B_BETTER
    if hi < -metric.margin and discovered:
        return A_BETTER
    if -metric.margin <= lo and hi <= metric.margin:
        return EQUIVALENT
    return INCONCLUSIVE


def paired_cells(pairs: pd.DataFrame, cell_keys: Sequence[str],
                 metrics: Sequence[Metric] = METRICS,
                 min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """One row per (comparison, cell, metric) from a frame of paired runs (one row per
    comparison, cell and seed, with a_<metric> and b_<metric> columns): seeds with both values,
    the arms' means, the mean difference b - a with its bootstrap interval, its sign-flip
    p-value, its Benjamini-Hochberg q-value over every row returned, and the verdict."""
    if pairs.empty:
        return pd.DataFrame(columns=["comparison", *cell_keys, "metric", "seeds", "mean_a",
                                     "mean_b", "diff", "diff_low", "diff_high", "p", "q",
                                     "verdict"])
    keys = ["comparison", *cell_keys]
    found: list[tuple[dict[str, object], Metric, int, float, float, float]] = []
    for cell, part in pairs.groupby(keys, dropna=False, sort=True):
        cell_values = dict(zip(keys, cell if isinstance(cell, tuple) else (cell,), strict=True))
        part = part.sort_values("seed")
        for m in metrics:
            a_col, b_col = f"a_{m.column}", f"b_{m.column}"
            if a_col not in part or b_col not in part:
                continue
            both = part[[a_col, b_col]].astype(float).dropna()
            if both.empty:
                continue
            diffs = (both[b_col] - both[a_col]).to_numpy()
            seed = cell_seed(*cell_values.values(), m.column)
            mean, low, high = bootstrap_mean(diffs, seed)
            row: dict[str, object] = {
                **cell_values, "metric": m.column, "seeds": len(both),
                "mean_a": float(both[a_col].mean()), "mean_b": float(both[b_col].mean()),
                "diff": mean, "diff_low": low, "diff_high": high}
            found.append((row, m, len(both), low, high, sign_flip_p(diffs, seed)))
    # the q-values over the whole grid of this call, only where the seeds suffice to judge
    judged = [i for i, (_, _, n, _, _, _) in enumerate(found) if n >= min_seeds]
    qs = dict(zip(judged, benjamini_hochberg([found[i][5] for i in judged]), strict=True))
    out = []
    for i, (row, m, n, low, high, p) in enumerate(found):
        q = qs.get(i, math.nan)
        out.append({**row, "p": p, "q": q, "verdict": decide(low, high, m, n, min_seeds, q)})
    return pd.DataFrame(out)


@dataclass(frozen=True, slots=True)
class Safety:
    """Loss in one arm and cell: runs, runs that lost an acknowledged write, and the seeds of
    those runs (their reproductions)."""

    runs: int
    lossy_runs: int
    lossy_seeds: tuple[int, ...] = ()

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.lossy_runs, self.runs)


def safety_verdict(a: Safety, b: Safety) -> str:
    """`a-lost` / `b-lost` (only that arm lost), `both-lost`, `neither-lost` (none in any
    run of either arm; how rare a loss could still be is the Wilson upper bound)."""
    if a.lossy_runs and b.lossy_runs:
        return "both-lost"
    if a.lossy_runs:
        return "a-lost"
    if b.lossy_runs:
        return "b-lost"
    return "neither-lost"

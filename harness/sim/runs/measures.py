"""What a scenario run measures beyond the queue checker, for its summary row
(harness.sim.runs.matrix.summarize; the columns are documented in harness/results/schema.py):

- acknowledged-write latency per phase: invoke -> ok of every write that was acknowledged
  (retries included), bucketed by its invoke time into `before` [workload start, fault start),
  `during` [fault start, heal) and `after` [heal, workload end); count, p50, p99 and p99.9 (the
  nearest-rank percentile: a value some write actually took);
- availability in time from the open-loop probe (`probe` operations, one every
  probe_interval_ms): per phase, the probe's slots and those whose write was acknowledged
  within PROBE_OK_MS; unavailable time = (slots - ok) x interval.

Invariants: only `send` operations of the run's workload count (the final drain and polls do
not); the probe's operations count here and in loss, never in the attempt-based columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from harness.check.history import Event

# A probe slot is available when its write was acknowledged within this long: well above the
# healthy p99.9 (a few fsyncs and round trips, harness/results/fsync_default.json) and well
# below the request timeout, so a slot counts as available only if the cluster was taking
# writes then, not merely later.
PROBE_OK_MS = 200
PHASES = ("before", "during", "after")
QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))


def phase_of(time_ms: int, fault_start_ms: int | None, heal_ms: int | None) -> str:
    if fault_start_ms is None or heal_ms is None or time_ms < fault_start_ms:
        return "before"
    return "during" if time_ms < heal_ms else "after"


def nearest_rank(sorted_values: list[int], q: float) -> float:
    """The smallest value with at least q of the values at or below it."""
    return float(sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)])


def writes(events: Iterable[Event]) -> list[tuple[int, str, int | None, bool]]:
    """Every workload write: (invoke ms, completion type, latency ms if ok, is a probe)."""
    opened: dict[Any, tuple[int, bool]] = {}
    out: list[tuple[int, str, int | None, bool]] = []
    for e in events:
        if e.f != "send" or e.extra.get("final"):
            continue
        time_ms = e.time // 1_000_000
        if e.type == "invoke":
            opened[e.process] = (time_ms, bool(e.extra.get("probe")))
            continue
        invoked = opened.pop(e.process, None)
        if invoked is not None:
            out.append((invoked[0], e.type, time_ms - invoked[0] if e.type == "ok" else None,
                        invoked[1]))
    out += [(t, "open", None, probe) for t, probe in opened.values()]
    return sorted(out)


def latency_columns(events: Iterable[Event], fault_start_ms: int | None,
                    heal_ms: int | None) -> dict[str, Any]:
    """acked_<phase> and latency_<q>_ms_<phase> (None without an acknowledged write)."""
    by_phase: dict[str, list[int]] = {p: [] for p in PHASES}
    for invoked, kind, latency, probe in writes(events):
        if kind == "ok" and not probe and latency is not None:
            by_phase[phase_of(invoked, fault_start_ms, heal_ms)].append(latency)
    out: dict[str, Any] = {}
    for phase, values in by_phase.items():
        values.sort()
        out[f"acked_{phase}"] = len(values)
        for name, q in QUANTILES:
            out[f"latency_{name}_ms_{phase}"] = nearest_rank(values, q) if values else None
    return out


def probe_columns(events: Iterable[Event], interval_ms: int, fault_start_ms: int | None,
                  heal_ms: int | None, workload_end_ms: int) -> dict[str, Any]:
    """probe_interval_ms, probe_slots_<phase>, probe_ok_<phase> (all None without a probe)."""
    if interval_ms <= 0:
        return {"probe_interval_ms": None,
                **{f"probe_{k}_{p}": None for p in PHASES for k in ("slots", "ok")}}
    slots = dict.fromkeys(PHASES, 0)
    ok = dict.fromkeys(PHASES, 0)
    for invoked, kind, latency, probe in writes(events):
        if not probe or invoked >= workload_end_ms:
            continue
        phase = phase_of(invoked, fault_start_ms, heal_ms)
        slots[phase] += 1
        if kind == "ok" and latency is not None and latency <= PROBE_OK_MS:
            ok[phase] += 1
    out: dict[str, Any] = {"probe_interval_ms": interval_ms}
    for p in PHASES:
        out[f"probe_slots_{p}"], out[f"probe_ok_{p}"] = slots[p], ok[p]
    return out

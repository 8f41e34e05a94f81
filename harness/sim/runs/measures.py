"""What a scenario run measures beyond the queue checker, for its summary row
(harness.sim.runs.matrix.summarize; the columns are documented in harness/results/schema.py):

- acknowledged-write latency per phase: invoke -> ok of every write that was acknowledged
  (retries included), bucketed by its invoke time into `before` [the partition's first leader,
  fault start),
  `during` [fault start, heal) and `after` [heal, workload end); count, p50, p99 and p99.9 (the
  nearest-rank percentile: a value some write actually took). Writes invoked before the
  partition first had a leader are left out: they measure topic creation, not the arm (an ISR
  or quorum partition gets its leader from the controller at creation; a raft partition's
  group elects its first one an election timeout later, 100-250 ms, and its first writes
  waiting for it made the raft arm's p99 without a fault ~110-220 ms);
- availability in time from the open-loop probe (`probe` operations, one every
  probe_interval_ms): per phase, the probe's slots and those whose write was acknowledged
  within PROBE_OK_MS; unavailable time = (slots - ok) x interval;
- visibility lag of the writes invoked during the fault: from a write's acknowledgement to the
  moment the partition's HW first passed its offset (the ReplicaChecker's HW marks), i.e. how
  long an acknowledged record was invisible to consumers. Under acks=all it is ~0 (the ack
  waits for the HW); under acks=1 with the ISR below min.insync.replicas the HW freezes
  (strict min ISR, KAFKA-15583) and the lag is the time until the ISR recovers. A write the
  HW never passed (lost, or the run ended) has no lag: loss is counted elsewhere.

Invariants: only `send` operations of the run's workload count (the final drain and polls do
not); the probe's operations count here and in loss, never in the attempt-based columns.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
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
                    heal_ms: int | None, first_leader_ms: int | None = None) -> dict[str, Any]:
    """acked_<phase> and latency_<q>_ms_<phase> (None without an acknowledged write), over
    the writes invoked once the partition had a leader (`first_leader_ms`; None: all)."""
    by_phase: dict[str, list[int]] = {p: [] for p in PHASES}
    ready_ms = first_leader_ms if first_leader_ms is not None else -1
    for invoked, kind, latency, probe in writes(events):
        if kind == "ok" and not probe and latency is not None and invoked >= ready_ms:
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


def _acked_offsets(events: Iterable[Event]) -> list[tuple[int, int, int]]:
    """(invoke ms, ack ms, offset) of every acknowledged workload write whose ok names its
    offset ([topic-partition, [offset, value]])."""
    opened: dict[Any, int] = {}
    out: list[tuple[int, int, int]] = []
    for e in events:
        if e.f != "send" or e.extra.get("final"):
            continue
        if e.type == "invoke":
            opened[e.process] = e.time // 1_000_000
            continue
        invoked = opened.pop(e.process, None)
        value = e.value
        if (e.type == "ok" and invoked is not None and isinstance(value, list | tuple)
                and len(value) == 2 and isinstance(value[1], list | tuple) and value[1]):
            out.append((invoked, e.time // 1_000_000, int(value[1][0])))
    return out


def visibility_columns(events: Iterable[Event], hw_marks: Sequence[tuple[int, int]],
                       fault_start_ms: int | None, heal_ms: int | None) -> dict[str, Any]:
    """visibility_lag_p99_ms and visibility_lag_max_ms over the writes invoked during the fault
    (None without a fault or without such a write the HW passed)."""
    none: dict[str, Any] = {"visibility_lag_p99_ms": None, "visibility_lag_max_ms": None}
    if fault_start_ms is None or heal_ms is None:
        return none
    heights = [hw for _, hw in hw_marks]
    lags: list[int] = []
    for invoked, acked, offset in _acked_offsets(events):
        if phase_of(invoked, fault_start_ms, heal_ms) != "during":
            continue
        i = bisect_right(heights, offset)  # the first mark whose HW is past the offset
        if i < len(hw_marks):
            lags.append(max(0, hw_marks[i][0] - acked))
    if not lags:
        return none
    lags.sort()
    return {"visibility_lag_p99_ms": nearest_rank(lags, 0.99),
            "visibility_lag_max_ms": float(lags[-1])}

"""The comparison's run-summary row (harness/results/schema.py) for a real-process Jepsen run.

`kraftlab jepsen run --out DIR` writes one `RunSummary` (source `jepsen`) to
`DIR/summary/part-<run_id>.parquet` with `matrix_schema.write_dataset`, and the same row as
JSON in `DIR/summary.json`. The Spark job reads directories recursively, so
`kraftlab analyze --input runs/` takes any number of run directories, alone or beside a
simulated matrix (docs/compare.md, docs/jepsen.md "The summary row").

Mapping (the simulator's rules, harness/sim/runs/matrix.py, applied to a recorded history):
- writes are `send` (queue) or `write`/`cas`/`append` (kv), reads are `poll` (queue) or `read`
  (kv); `assign` and the final phase (events flagged `final`: probes, drains, final reads)
  are not counted. Each op is bucketed by the second of its invoke; ok -> succeeded,
  fail -> failed, info (or never completed) -> indeterminate. A kv cas that did not match
  (CAS_FAILED) is `failed` here: the row counts outcomes, not the report's "served";
- unavailability windows: gaps of >= 1 s without an acknowledged write, from the first
  acknowledged write to the final heal;
- the fault window: the first fault's start, the last fault's end, the final heal (all null
  for nemesis `none`); recovery time: the queue's probe (heal -> every partition acknowledged
  an acks=all write), or for kv the controllers agreeing on a leader;
- kv runs are the metadata quorum: replication_mode `quorum`, acks `all`, replication factor
  and brokers = controllers, min.insync.replicas = a majority; `metadata_linearizable` is the
  linearizability verdict (null when unknown);
- `nemesis`: a single fault maps onto the matrix's names (`JEPSEN_TO_MATRIX`, e.g. `halves` ->
  `random-halves`), other single faults keep their name, several faults are `mixed`;
- divergent offsets (queue): offsets at which two polls saw different values (committed data
  that changed, `read_divergence`), not the checker's `inconsistent-offsets`, which also counts
  an acknowledged acks=1 write whose offset a new leader reused (that is loss: lost_writes);
- leader elections: the increase of partition leader epochs (queue) or of the controller
  epoch (kv) over the run; ISR shrinks/expands: those the partition leaders logged
  (`isr_changes`, queue runs, from kraftlab's JSON log lines; `kafka_isr_changes` from Apache
  Kafka's text logs for a run against it); unclean elections are not observed (0);
- `system`: what the run ran against, `kraftlab` or `kafka` (results.json `system`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.check.history import Operation
from harness.check.report import NS_PER_S, fault_intervals
from harness.results.schema import (
    NemesisEvent,
    RunSummary,
    SecondCounts,
    Window,
    validate_row,
    write_dataset,
)

NS_PER_MS = 1_000_000
UNAVAILABLE_GAP_MS = 1000  # as harness/sim/runs/matrix.py: no acknowledged write for this long
WRITES = frozenset({"send", "write", "cas", "append"})
READS = frozenset({"poll", "read"})
JEPSEN_TO_MATRIX = {
    "none": "none",
    "isolate-leader": "isolate-controller-leader",
    "isolate-controller-leader": "isolate-controller-leader",
    "halves": "random-halves",
    "isolate-partition-leader": "isolate-partition-leader",
    "leader-cut-from-followers-only": "leader-cut-from-followers-only",
    "zombie-leader": "zombie-leader",
    "kill-partition-leader": "kill-leader",
    "pause-partition-leader": "pause-leader",
    # Every replica killed at once, each losing what it had not flushed: a correlated power
    # loss of all the partition's brokers (not the matrix's unclean-crash-losing-unflushed-tail,
    # which cuts the leader off first and powers off only the leader).
    "crash-unflushed": "power-loss-all-brokers",
    # queue runs: the controller-side faults hit the controller leader, not the data's leader
    "kill-leader": "kill-controller-leader",
    "pause-leader": "pause-controller-leader",
}


def matrix_nemesis(faults: Sequence[str], workload: str) -> str:
    """The matrix's name of a run's nemesis (module docstring); `leader-cut-from-followers`
    (cut from the brokers and the controllers, clients still reach it) has no matrix twin and
    keeps its name."""
    if not faults:
        return "none"
    if len(faults) > 1:
        return "mixed"
    name = faults[0]
    if workload == "kv" and name in ("kill-leader", "pause-leader"):
        return name  # the controller leader is the kv data's leader
    return JEPSEN_TO_MATRIX.get(name, name)


def _counted(ops: Sequence[Operation]) -> list[Operation]:
    return [op for op in ops if op.is_client and not op.flag("final")
            and (op.f in WRITES or op.f in READS)]


def per_second(ops: Sequence[Operation]) -> tuple[SecondCounts, ...]:
    counted = _counted(ops)
    if not counted:
        return ()
    last = max(op.invoke.time for op in counted) // NS_PER_S
    cells = {s: dict.fromkeys(("wa", "ws", "wf", "wi", "ra", "rs", "rf", "ri"), 0)
             for s in range(last + 1)}
    for op in counted:
        c = cells[op.invoke.time // NS_PER_S]
        kind = "w" if op.f in WRITES else "r"
        c[kind + "a"] += 1
        c[kind + {"ok": "s", "fail": "f"}.get(op.type, "i")] += 1
    return tuple(SecondCounts(s, c["wa"], c["ws"], c["wf"], c["wi"], c["ra"], c["rs"], c["rf"],
                              c["ri"]) for s, c in sorted(cells.items()))


def unavailability(ops: Sequence[Operation], end_ms: int) -> tuple[Window, ...]:
    times = sorted((op.completion.time // NS_PER_MS) for op in _counted(ops)
                   if op.f in WRITES and op.type == "ok" and op.completion is not None)
    times = [t for t in times if t <= end_ms]
    out = []
    previous = times[0] if times else 0
    for t in [*times[1:], end_ms]:
        if t - previous >= UNAVAILABLE_GAP_MS:
            out.append(Window(previous, t))
        previous = max(previous, t)
    return tuple(out)


def recovery_after(ops: Sequence[Operation], heal_ms: int) -> int | None:
    """ms from the fault's heal to the first write acknowledged at or after it (the
    simulator's recovery_time_ms; the final phase's probe writes count: a fault held to the
    run's clean-up heal recovers there), None if none was."""
    after = [op.completion.time // NS_PER_MS for op in ops
             if op.is_client and op.f in WRITES and op.type == "ok" and op.completion is not None
             and op.completion.time // NS_PER_MS >= heal_ms]
    return min(after) - heal_ms if after else None


def read_divergence(ops: Sequence[Operation]) -> int:
    """Offsets at which two ok polls (the final drain included) saw different values.

    Consumers read only below the high watermark, so this is committed data that changed: the
    divergence the comparison's `divergent_offsets` means. The checker's `inconsistent-offsets`
    also counts an acknowledged send whose offset a later leader reused (an acks=1 write lost
    to truncation), which is loss and already in `lost_writes`, so it is not used here."""
    seen: dict[tuple[str, int], set[Any]] = {}
    for op in ops:
        if op.is_client and op.f == "poll" and op.type == "ok" and isinstance(op.value, dict):
            for tp, rows in op.value.items():
                for offset, value in rows:
                    seen.setdefault((str(tp), offset), set()).add(json.dumps(value))
    return sum(1 for values in seen.values() if len(values) > 1)


def isr_changes(logs_dir: Path, topic: str) -> tuple[int, int]:
    """(shrinks, expands) of `topic`'s ISR that partition leaders logged (`partition.isr_shrunk`
    / `partition.isr_expanded`, partition/replica/leader.py), from the brokers' logs copied
    into the run's DIR/logs; each change once, by (partition, partition_epoch). ISR changes the
    controller makes itself (fencing a broker) are not logged there and not counted."""
    seen: set[tuple[str, int, int]] = set()
    for path in sorted(logs_dir.glob("broker-*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "partition.isr_" not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                name = event.get("event")
                if event.get("topic") == topic and name in ("partition.isr_shrunk",
                                                            "partition.isr_expanded"):
                    seen.add((name, int(event.get("partition", -1)),
                              int(event.get("partition_epoch", -1))))
    shrinks = sum(1 for name, _, _ in seen if name == "partition.isr_shrunk")
    return shrinks, len(seen) - shrinks


# Apache Kafka's partition state lines (kafka.cluster.Partition and state.change.logger, Kafka
# 4.x core/src/main/scala/kafka/cluster/Partition.scala): the ISR a leader starts with, at a
# partition epoch, and each ISR change a leader's AlterPartition committed, at its new epoch.
_KAFKA_LEADER_START = re.compile(
    r"Leader (?P<tp>\S+) with topic id .*? starts at leader epoch \d+ from offset \d+ with "
    r"partition epoch (?P<epoch>\d+), high watermark \d+, ISR \[(?P<isr>[\d,]*)\]")
_KAFKA_ISR_UPDATED = re.compile(
    r"\[Partition (?P<tp>\S+) broker=\d+\] ISR updated to (?P<isr>[\d,]*)"
    r"(?: \([\w-]+\))?\s+and version updated to (?P<epoch>\d+)")  # "(under-min-isr)" at times


def kafka_isr_changes(logs_dir: Path, topic: str) -> tuple[int, int]:
    """(shrinks, expands) of `topic`'s ISR that Apache Kafka's partition leaders committed
    (`ISR updated to ... and version updated to E`), from the brokers' server logs copied into
    the run's DIR/logs: each partition's ISR by partition epoch (a leader's start line gives the
    ISR it starts with), an update a shrink if it holds fewer replicas than the ISR of the epoch
    before it, an expansion if more. As `isr_changes` for kraftlab, the ISR changes the
    controller makes itself (fencing a broker: a new leader epoch) are not counted."""
    states: dict[str, dict[int, tuple[int, ...]]] = {}
    updates: set[tuple[str, int]] = set()
    for path in sorted(logs_dir.glob("broker-*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "ISR" not in line:
                    continue
                found = _KAFKA_ISR_UPDATED.search(line) or _KAFKA_LEADER_START.search(line)
                if found is None:
                    continue
                tp = found["tp"]
                if tp.rpartition("-")[0] != topic:
                    continue
                isr = tuple(sorted(int(b) for b in found["isr"].split(",") if b))
                epoch = int(found["epoch"])
                states.setdefault(tp, {})[epoch] = isr
                if found.re is _KAFKA_ISR_UPDATED:
                    updates.add((tp, epoch))
    shrinks = expands = 0
    for tp, by_epoch in states.items():
        epochs = sorted(by_epoch)
        for before, after in zip(epochs, epochs[1:], strict=False):
            if (tp, after) not in updates:
                continue
            grew = len(by_epoch[after]) - len(by_epoch[before])
            shrinks += grew < 0
            expands += grew > 0
    return shrinks, expands


def run_id(results: dict[str, Any], started_s: float) -> str:
    """`jepsen-<workload>-<matrix nemesis>-s<seed>-<start, ms since the epoch>` (`jepsen-kafka-...`
    for a run against Apache Kafka): unique per run, and a valid Parquet part name."""
    stamp = int(started_s * 1000)
    nemesis = matrix_nemesis(results["faults"], results["workload"])
    # a kraftlab run's id is as it always was; another system's names it
    system = results.get("system", "kraftlab")
    prefix = "jepsen" if system == "kraftlab" else f"jepsen-{system}"
    raw = f"{prefix}-{results['workload']}-{nemesis}-s{results['seed']}-{stamp}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw)


def build_row(ops: Sequence[Operation], results: dict[str, Any], *, wall_ms: int,
              controllers: int, brokers: int, started_s: float,
              overrides: dict[str, str], logs_dir: Path | None = None) -> RunSummary:  # fmt: skip
    """The summary row of a finished run (`results` is results.json's content; `logs_dir`
    the node logs, for ISR changes of a queue run)."""
    intervals, heal_ns = fault_intervals(ops)
    end_ns = max(((op.completion or op.invoke).time for op in ops), default=0)
    duration_ms = math.ceil(end_ns / NS_PER_MS)
    heal_ms = None if heal_ns is None else heal_ns // NS_PER_MS
    timeline = tuple(NemesisEvent(i["start_ns"] // NS_PER_MS, i["end_ns"] // NS_PER_MS,
                                  i["kind"]) for i in intervals)
    faulted = bool(timeline) and heal_ms is not None
    fault_start = min(e.start_ms for e in timeline) if faulted else None
    fault_end = max(e.end_ms for e in timeline) if faulted else None
    if faulted:
        # The fault's own heal (its stop event), as the simulator's heal_ms: not the run's final
        # clean-up heal at the time limit, seconds later, whose gap would count healed seconds
        # as "during the fault" and measure recovery from the clean-up.
        heal_ms = fault_end
    recovery_ms = None if not faulted or heal_ms is None else recovery_after(ops, heal_ms)
    if recovery_ms is None and faulted:
        # No write after the heal in the history (a kv run's final phase only reads): the
        # runner's own measure from the final heal, when the fault lasted until it.
        measured = results.get("probe_recovery_s", results.get("recovery_s"))
        if measured is not None and heal_ns is not None and fault_end is not None \
                and fault_end >= heal_ns // NS_PER_MS:
            recovery_ms = int(round(measured * 1000))
    counted = _counted(ops)
    counted_end_ms = max(((op.completion or op.invoke).time // NS_PER_MS for op in counted),
                         default=0)
    acked = sum(1 for op in counted if op.f in WRITES and op.type == "ok")
    counts = results.get("checker", {}).get("counts", {}) if results["workload"] == "queue" \
        else {}
    anomalies = results.get("anomalies", {})
    if results["workload"] == "queue":
        mode, acks = results["replication_mode"], results["acks"]
        min_isr, rf = results["min_insync_replicas"], results["replication_factor"]
        unclean = bool(results["unclean_leader_election"])
        elections = int(results.get("partition_leader_elections") or 0)
        metadata_linearizable = None
        stale = 0
    else:
        mode, acks, rf = "quorum", "all", controllers
        min_isr, unclean = controllers // 2 + 1, False
        elections = int(results.get("controller_leader_elections") or 0)
        metadata_linearizable = {"valid": True, "invalid": False}.get(results["verdict"])
        stale = len(anomalies.get("stale-read", []))
    lost = int(counts.get("lost-write", 0))
    count = kafka_isr_changes if results.get("system") == "kafka" else isr_changes
    shrinks, expands = (count(logs_dir, str(results.get("topic")))
                        if logs_dir is not None and results["workload"] == "queue" else (0, 0))
    row = RunSummary(
        run_id=run_id(results, started_s), source="jepsen", seed=int(results["seed"]),
        replication_mode=mode, acks=acks, min_insync_replicas=int(min_isr),
        unclean_leader_election=unclean,
        eligible_leader_replicas=str(overrides.get("eligible.leader.replicas.enable", "")
                                     ).lower() in ("true", "1"),
        leader_epoch_enable=bool(results.get("leader_epoch_enable", True)),
        replication_factor=int(rf),
        brokers=max(int(brokers or controllers), int(rf)),
        nemesis=matrix_nemesis(results["faults"], results["workload"]),
        fault_duration_ms=(round(sum(e.end_ms - e.start_ms for e in timeline) / len(timeline))
                           if timeline else 0),
        duration_ms=duration_ms, wall_duration_ms=wall_ms,
        nemesis_timeline=timeline, per_second=per_second(ops),
        # Over the whole workload, as the simulator's windows (harness/sim/runs/matrix.py).
        unavailability_windows=unavailability(ops, counted_end_ms),
        fault_start_ms=fault_start, fault_end_ms=fault_end,
        heal_ms=heal_ms if faulted else None,
        acked_writes=acked, lost_writes=min(lost, acked),
        duplicates=int(counts.get("duplicate", 0)),
        divergent_offsets=read_divergence(ops),
        stale_reads=stale,
        nonmonotonic_reads=int(counts.get("nonmonotonic-poll", 0))
        + int(counts.get("int-nonmonotonic-poll", 0)),
        metadata_linearizable=metadata_linearizable,
        recovery_time_ms=recovery_ms,
        leader_elections=elections,
        isr_shrinks=shrinks, isr_expands=expands,
        system=str(results.get("system", "kraftlab")),
    )
    validate_row(row)
    return row


def write_row(row: RunSummary, out_dir: Path) -> dict[str, str]:
    """DIR/summary/part-<run_id>.parquet (the comparison's dataset) and DIR/summary.json."""
    path = write_dataset([row], out_dir / "summary", part=row.run_id)
    (out_dir / "summary.json").write_text(json.dumps(asdict(row), indent=1) + "\n")
    return {"summary_parquet": str(path.relative_to(out_dir)), "summary_json": "summary.json"}

"""The comparison's summary row of a Jepsen run, from hand-made histories (no processes).

Every number is known by hand: per-second buckets by invoke time, the final phase and assigns
left out, unavailability gaps, the fault window, the nemesis name mapping, the anomaly counts,
and the Parquet round trip through harness.results.schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import NEMESIS, Event, Operation, pair_operations
from harness.check.queue import check_queue
from harness.check.report import fault_intervals, phase_of
from harness.jepsen.summary_row import (
    build_row,
    isr_changes,
    kafka_isr_changes,
    matrix_nemesis,
    write_row,
)
from harness.results.schema import SecondCounts, Window, read_dataset

MS = 1_000_000


def history(*rows: tuple[Any, ...]) -> list[Operation]:
    """Rows are (time_ms, process, type, f, value[, extra])."""
    events = []
    for index, row in enumerate(rows):
        t, process, type_, f, value = row[:5]
        extra = dict(row[5]) if len(row) > 5 else {}
        error = extra.pop("error", None)
        events.append(Event(index, t * MS, process, type_, f, value, error, extra))
    return pair_operations(events)


QUEUE = history(
    (100, 0, "invoke", "assign", ["t-0"]),
    (101, 0, "ok", "assign", ["t-0"]),
    (200, 1, "invoke", "send", ["t-0", 1]),
    (210, 1, "ok", "send", ["t-0", [0, 1]]),
    (300, 2, "invoke", "send", ["t-0", 2]),
    (320, 2, "ok", "send", ["t-0", [1, 2]]),  # acknowledged, then lost (not in the drain)
    (900, 0, "invoke", "poll", None),
    (950, 0, "ok", "poll", {"t-0": [[0, 1]]}),
    (1000, NEMESIS, "info", "start-partition", {"fault": "leader-cut-from-followers"}),
    (1010, NEMESIS, "info", "start-partition", {"fault": "leader-cut-from-followers"}),
    (1100, 1, "invoke", "send", ["t-0", 3]),
    (3600, 1, "info", "send", ["t-0", 3], {"error": "REQUEST_TIMED_OUT"}),
    (1200, 2, "invoke", "send", ["t-0", 4]),
    (1300, 2, "fail", "send", ["t-0", 4], {"error": "NO_PRODUCER"}),
    (3500, 0, "invoke", "poll", None),
    (3550, 0, "fail", "poll", None, {"error": "NOT_LEADER_OR_FOLLOWER"}),
    (4000, NEMESIS, "info", "stop-partition", {"fault": "leader-cut-from-followers"}),
    (4020, NEMESIS, "info", "stop-partition", {"fault": "leader-cut-from-followers"}),
    (4100, 2, "invoke", "send", ["t-0", 5]),
    (4150, 2, "ok", "send", ["t-0", [1, 5]]),
    (5000, NEMESIS, "info", "stop-all", None),
    (5030, NEMESIS, "info", "stop-all", {}),
    (5100, 7, "invoke", "send", ["t-0", 6], {"final": True}),
    (5110, 7, "ok", "send", ["t-0", [2, 6]], {"final": True}),
    (5200, 8, "invoke", "poll", None, {"final": True}),
    (5300, 8, "ok", "poll", {"t-0": [[0, 1], [1, 5], [2, 6]]}, {"final": True}),
)


def queue_results(ops: list[Operation]) -> dict[str, Any]:
    report = check_queue(ops).to_json()
    return {"workload": "queue", "faults": ["leader-cut-from-followers"],
            "nemesis": "leader-cut-from-followers", "seed": 9, "verdict": "invalid",
            "anomalies": {k: {} for k in report["anomaly_types"]}, "checker": report,
            "replication_mode": "isr", "acks": "1", "min_insync_replicas": 1,
            "replication_factor": 3, "unclean_leader_election": False,
            "partition_leader_elections": 2, "probe_recovery_s": 0.25, "recovery_s": 0.01}


def test_queue_row_counts_every_column_by_hand(tmp_path: Path) -> None:
    results = queue_results(QUEUE)
    assert results["checker"]["counts"]["lost-write"] == 1
    row = build_row(QUEUE, results, wall_ms=12_345, controllers=3, brokers=3,
                    started_s=1_700_000_000.5, overrides={})
    assert row.run_id == "jepsen-queue-leader-cut-from-followers-s9-1700000000500"
    assert (row.source, row.replication_mode, row.acks, row.min_insync_replicas) == (
        "jepsen", "isr", "1", 1)
    assert (row.replication_factor, row.brokers, row.seed) == (3, 3, 9)
    # invoke seconds: 0 -> sends 1, 2 (ok) and a poll (ok); 1 -> sends 3 (info), 4 (fail);
    # 3 -> a failed poll; 4 -> send 5 (ok); assigns and the final phase are not counted
    assert row.per_second == (
        SecondCounts(0, 2, 2, 0, 0, 1, 1, 0, 0),
        SecondCounts(1, 2, 0, 1, 1, 0, 0, 0, 0),
        SecondCounts(2),
        SecondCounts(3, 0, 0, 0, 0, 1, 0, 1, 0),
        SecondCounts(4, 1, 1, 0, 0, 0, 0, 0, 0),
    )
    assert row.acked_writes == 3 and row.lost_writes == 1
    # offset 1 held 2 (acknowledged), then 5: the checker's inconsistent-offsets, but no two
    # reads disagreed, so the row's divergence (committed data that changed) is 0
    assert results["checker"]["counts"]["inconsistent-offsets"] == 1
    assert (row.duplicates, row.divergent_offsets) == (0, 0)
    # acknowledged writes at 210, 320, 4150 ms; the fault heals at 4020 ms, the run's final
    # clean-up heal ends at 5030 ms: heal_ms is the fault's own (as the simulator's), and
    # recovery is measured from it to the first acknowledged write (4150), not from the clean-up
    assert row.unavailability_windows == (Window(320, 4150),)
    assert [(e.start_ms, e.end_ms, e.kind) for e in row.nemesis_timeline] == [
        (1000, 4020, "partition")]
    assert (row.fault_start_ms, row.fault_end_ms, row.heal_ms) == (1000, 4020, 4020)
    assert (row.fault_duration_ms, row.recovery_time_ms) == (3020, 130)
    assert (row.duration_ms, row.wall_duration_ms, row.leader_elections) == (5300, 12_345, 2)
    assert row.metadata_linearizable is None and row.nemesis == "leader-cut-from-followers"
    files = write_row(row, tmp_path)
    assert files["summary_json"] == "summary.json"
    assert read_dataset(tmp_path / "summary") == [row]


def test_the_row_names_the_system_the_run_ran_against() -> None:
    """A kraftlab run's row says `kraftlab` and keeps its id; a run against Apache Kafka
    (`--system kafka`) says `kafka`, and so does its id."""
    results = queue_results(QUEUE)
    kraftlab = build_row(QUEUE, results, wall_ms=1, controllers=3, brokers=3,
                         started_s=1_700_000_000.5, overrides={})
    assert kraftlab.system == "kraftlab"
    assert kraftlab.run_id == "jepsen-queue-leader-cut-from-followers-s9-1700000000500"
    kafka = build_row(QUEUE, {**results, "system": "kafka"}, wall_ms=1, controllers=3,
                      brokers=3, started_s=1_700_000_000.5, overrides={})
    assert kafka.system == "kafka"
    assert kafka.run_id == "jepsen-kafka-queue-leader-cut-from-followers-s9-1700000000500"


def test_a_skipped_fault_is_no_fault_window() -> None:
    # The nemesis found no led partition at first (start-skipped), then cut a leader.
    ops = history(
        (500, NEMESIS, "info", "start-skipped", {"fault": "kill-partition-leader"}),
        (501, NEMESIS, "info", "start-skipped", {"fault": "kill-partition-leader",
                                                 "skipped": "no partition has a leader"}),
        (600, 1, "invoke", "send", ["t-0", 1]),
        (610, 1, "fail", "send", ["t-0", 1], {"error": "NOT_LEADER_OR_FOLLOWER"}),
        (800, NEMESIS, "info", "stop-skipped", {"fault": "kill-partition-leader"}),
        (801, NEMESIS, "info", "stop-skipped", {"fault": "kill-partition-leader"}),
        (1000, NEMESIS, "info", "start-partition", {"fault": "leader-cut-from-followers"}),
        (1010, NEMESIS, "info", "start-partition", {"fault": "leader-cut-from-followers"}),
        (4000, NEMESIS, "info", "stop-partition", {"fault": "leader-cut-from-followers"}),
        (4020, NEMESIS, "info", "stop-partition", {"fault": "leader-cut-from-followers"}),
    )
    intervals, final_heal_ns = fault_intervals(ops)
    assert [(i["fault"], i["start_s"], i["end_s"]) for i in intervals] == [
        ("leader-cut-from-followers", 1.0, 4.02)]
    assert final_heal_ns is None
    send = next(op for op in ops if op.f == "send")
    assert phase_of(send, intervals, final_heal_ns) == "between_faults"


def test_divergent_offsets_count_reads_that_disagree() -> None:
    ops = history(
        (0, 0, "invoke", "poll", None),
        (1, 0, "ok", "poll", {"t-0": [[0, 1], [1, 2]], "t-1": [[0, 9]]}),
        (2, 1, "invoke", "poll", None, {"final": True}),
        (3, 1, "ok", "poll", {"t-0": [[0, 1], [1, 3]], "t-1": [[0, 9]]}, {"final": True}),
    )
    results = {**queue_results(ops), "faults": [], "nemesis": "none"}
    row = build_row(ops, results, wall_ms=1, controllers=3, brokers=3, started_s=1.0,
                    overrides={})
    assert row.divergent_offsets == 1  # t-0 offset 1: 2 then 3


def test_kv_row_is_the_metadata_quorum() -> None:
    ops = history(
        (0, 0, "invoke", "write", ["k0", "w1"]),
        (5, 0, "ok", "write", ["k0", "w1"]),
        (10, 1, "invoke", "cas", ["k0", ["x", "c2"]]),
        (20, 1, "fail", "cas", ["k0", ["x", "c2"]], {"error": "CAS_FAILED"}),
        (30, 1, "invoke", "read", ["k0", None]),
        (40, 1, "ok", "read", ["k0", "w1"]),
        (50, 2, "invoke", "read", ["k0", None], {"final": True}),
        (60, 2, "ok", "read", ["k0", "w1"], {"final": True}),
    )
    results = {"workload": "kv", "faults": [], "nemesis": "none", "seed": 1,
               "verdict": "invalid", "anomalies": {"stale-read": [{}, {}]},
               "recovery_s": 0.5, "controller_leader_elections": 1}
    row = build_row(ops, results, wall_ms=1, controllers=3, brokers=0, started_s=1.0,
                    overrides={})
    assert (row.replication_mode, row.acks, row.replication_factor, row.brokers) == (
        "quorum", "all", 3, 3)
    assert row.min_insync_replicas == 2 and row.metadata_linearizable is False
    assert row.stale_reads == 2 and row.leader_elections == 1
    assert row.per_second == (SecondCounts(0, 2, 1, 1, 0, 1, 1, 0, 0),)
    # nemesis none: no fault window, no heal, so no recovery time
    assert (row.heal_ms, row.recovery_time_ms, row.nemesis) == (None, None, "none")


@pytest.mark.parametrize(("faults", "workload", "name"), [
    ((), "queue", "none"),
    (("halves",), "kv", "random-halves"),
    (("isolate-leader",), "queue", "isolate-controller-leader"),
    (("kill-partition-leader",), "queue", "kill-leader"),
    (("kill-leader",), "kv", "kill-leader"),
    (("kill-leader",), "queue", "kill-controller-leader"),
    (("crash-unflushed",), "queue", "power-loss-all-brokers"),
    (("zombie-leader",), "queue", "zombie-leader"),
    (("halves", "kill"), "kv", "mixed"),
])
def test_nemesis_names_map_onto_the_matrix(faults: tuple[str, ...], workload: str,
                                           name: str) -> None:  # fmt: skip
    assert matrix_nemesis(faults, workload) == name


def test_isr_changes_are_counted_once_per_partition_epoch_of_the_topic(tmp_path: Path) -> None:
    def line(event: str, topic: str, partition: int, epoch: int) -> str:
        return json.dumps({"event": event, "topic": topic, "partition": partition,
                           "partition_epoch": epoch, "node_id": 101})

    (tmp_path / "broker-101.log").write_text("\n".join([
        line("partition.isr_shrunk", "q", 0, 1),
        line("partition.isr_shrunk", "q", 0, 1),  # the same change logged twice
        line("partition.isr_expanded", "q", 0, 2),
        line("partition.isr_shrunk", "other", 0, 1),  # another run's topic
        "not json partition.isr_shrunk",
        line("partition.isr_change_proposed", "q", 1, 1),
    ]) + "\n")
    (tmp_path / "broker-102.log").write_text(line("partition.isr_shrunk", "q", 1, 3) + "\n")
    (tmp_path / "controller-1.log").write_text(line("partition.isr_shrunk", "q", 2, 1) + "\n")
    assert isr_changes(tmp_path, "q") == (2, 1)
    ops = history((0, 0, "invoke", "send", ["q-0", 1]), (1, 0, "ok", "send", ["q-0", [0, 1]]))
    results = {**queue_results(ops), "faults": [], "nemesis": "none", "topic": "q"}
    row = build_row(ops, results, wall_ms=1, controllers=3, brokers=3, started_s=1.0,
                    overrides={}, logs_dir=tmp_path)
    assert (row.isr_shrinks, row.isr_expands) == (2, 1)


# Apache Kafka 4.4's own lines, from a pause of partition svr-0's leader 103: the controller
# fenced it and elected 101 with the ISR [101,102] (a new leader epoch: not a leader's change),
# 103 came back and 101 expanded the ISR; then a leader's shrink.
KAFKA_LINES = """\
[2026-12-07 15:23:13,431] INFO [Broker id=101] Follower svr-0 starts at leader epoch 0 from offset 0 with partition epoch 0 and high watermark 0. Current leader is 103. Previous leader None and previous leader epoch was -1. (state.change.logger)
[2026-12-07 15:23:17,289] INFO [Broker id=101] Leader svr-0 with topic id Some(pUnZrWvbQlKOrqaCMN63LA) starts at leader epoch 1 from offset 50 with partition epoch 1, high watermark 48, ISR [101,102], adding replicas [] and removing replicas [] . Previous leader Some(103) and previous leader epoch was 0. (state.change.logger)
[2026-12-07 15:23:20,133] INFO [Partition svr-0 broker=101] ISR updated to 103,102,101  and version updated to 2 (kafka.cluster.Partition)
[2026-12-07 15:23:25,001] INFO [Partition svr-0 broker=101] ISR updated to 102,101  and version updated to 3 (kafka.cluster.Partition)
[2026-12-07 15:23:25,001] INFO [Partition svr-0 broker=101] ISR updated to 102,101  and version updated to 3 (kafka.cluster.Partition)
[2026-12-07 15:23:29,325] INFO [Partition svr-0 broker=101] ISR updated to 101 (under-min-isr) and version updated to 4 (kafka.cluster.Partition)
[2026-12-07 15:23:26,000] INFO [Partition svr-other-0 broker=101] ISR updated to 101  and version updated to 2 (kafka.cluster.Partition)
"""
KAFKA_START = """\
[2026-12-07 15:23:13,449] INFO [Broker id=103] Leader svr-0 with topic id Some(pUnZrWvbQlKOrqaCMN63LA) starts at leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [103,101,102], adding replicas [] and removing replicas [] . Previous leader None and previous leader epoch was -1. (state.change.logger)
"""


def test_kafka_isr_changes_are_the_leaders_committed_updates_by_partition_epoch(
    tmp_path: Path,
) -> None:
    """Epoch 0 -> 1 (3 -> 2 replicas) is the controller's fencing, not counted; 1 -> 2 an
    expansion, 2 -> 3 a shrink (logged twice, counted once), 3 -> 4 a shrink below
    min.insync.replicas (Kafka marks it "(under-min-isr)"); another topic's never."""
    (tmp_path / "broker-101.log").write_text(KAFKA_LINES)
    (tmp_path / "broker-103.log").write_text(KAFKA_START)
    assert kafka_isr_changes(tmp_path, "svr") == (2, 1)
    assert kafka_isr_changes(tmp_path, "svr-other") == (0, 0)  # no epoch before its update
    assert isr_changes(tmp_path, "svr") == (0, 0)  # kraftlab's reader finds none in Kafka's
    ops = history((0, 0, "invoke", "send", ["svr-0", 1]), (1, 0, "ok", "send", ["svr-0", [0, 1]]))
    results = {**queue_results(ops), "faults": [], "nemesis": "none", "topic": "svr",
               "system": "kafka"}
    row = build_row(ops, results, wall_ms=1, controllers=3, brokers=3, started_s=1.0,
                    overrides={}, logs_dir=tmp_path)
    assert (row.isr_shrinks, row.isr_expands) == (2, 1)

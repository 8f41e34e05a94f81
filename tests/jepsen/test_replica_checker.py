"""The replica agreement checker (harness/check/replicas.py): KIP-101 scenario 2's outcome (two
replicas holding different records below both high watermarks) is `replica-divergence`; a
follower's uncommitted tail, a shorter log or an agreeing pair is not."""

from __future__ import annotations

from harness.check.replicas import ReplicaLog, check_replicas


def log(broker: int, values: list[str], hw: int, start: int = 0) -> ReplicaLog:
    return ReplicaLog(broker, [(start + i, v) for i, v in enumerate(values)], hw)


def test_kip101_divergence_below_both_high_watermarks_is_reported_once_per_offset() -> None:
    # A kept m1 at offset 1 (its HW 2, no truncation pre-0.11); B lost it and wrote m2 there.
    result = check_replicas({"t-0": [log(101, ["m0", "m1"], 2), log(102, ["m0", "m2"], 2),
                                     log(103, ["m0", "m2"], 2)]})
    assert not result.valid
    assert result.counts == {"replica-divergence": 1}
    assert result.anomalies["replica-divergence"] == [
        {"partition": "t-0", "offset": 1, "values": {"101": "m1", "102": "m2", "103": "m2"}}]
    assert result.compared == {"t-0": 2}


def test_uncommitted_tails_shorter_logs_and_agreement_are_valid() -> None:
    result = check_replicas({
        "t-0": [log(101, ["m0", "m1", "x"], 2), log(102, ["m0", "m1", "y"], 3)],  # x above HW
        "t-1": [log(101, ["a", "b", "c"], 3), log(102, ["a"], 1)],  # 102 behind
        "t-2": [log(101, ["c", "d"], 5, start=3), log(102, ["b", "c", "d"], 5, start=2)],
    })
    assert result.valid and result.counts == {}
    assert result.compared == {"t-0": 2, "t-1": 1, "t-2": 2}

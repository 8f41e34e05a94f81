"""Consumer group checker (harness/check/groups.py): small hand-made histories, one per
anomaly, and clean ones (including a redelivery at-least-once allows)."""

from __future__ import annotations

from typing import Any

from harness.check.groups import check_groups
from tests.jepsen.histories import ops

Row = tuple[Any, ...]
G = {"group": True}


def assign(process: int, tps: list[str]) -> list[Row]:
    return [(process, "invoke", "assign", tps, G), (process, "ok", "assign", tps, G)]


def poll(process: int, records: dict[str, list[list[Any]]]) -> list[Row]:
    return [(process, "invoke", "poll", None, G), (process, "ok", "poll", records, G)]


def commit(process: int, offsets: dict[str, int], outcome: str = "ok") -> list[Row]:
    return [(process, "invoke", "commit", offsets, G),
            (process, outcome, "commit", offsets if outcome == "ok" else None, G)]


def drain(rows: list[list[Any]]) -> list[Row]:
    return [(9, "invoke", "poll", None), (9, "ok", "poll", {"t-0": rows}, {"final": True})]


ALL = [[0, "a"], [1, "b"], [2, "c"], [3, "d"]]


def found(rows: list[Row]) -> dict[str, int]:
    return {k: v for k, v in check_groups(ops(*rows)).counts.items() if v}


def test_handover_at_the_committed_offset_is_clean() -> None:
    rows = [*assign(1, ["t-0"]), *poll(1, {"t-0": [[0, "a"], [1, "b"]]}), *commit(1, {"t-0": 2}),
            *assign(1, []), *assign(2, ["t-0"]), *poll(2, {"t-0": [[2, "c"], [3, "d"]]}),
            *commit(2, {"t-0": 4}), *drain(ALL)]
    result = check_groups(ops(*rows))
    assert result.valid and found(rows) == {}
    assert result.stats["group_caught_up"] and result.stats["group_redelivered"] == 0
    assert result.stats["group_committed"] == {"t-0": 4}


def test_redelivery_after_an_unacknowledged_commit_is_allowed() -> None:
    rows = [*assign(1, ["t-0"]), *poll(1, {"t-0": [[0, "a"], [1, "b"]]}),
            *commit(1, {"t-0": 2}, outcome="info"), *assign(2, ["t-0"]),
            *poll(2, {"t-0": [[0, "a"], [1, "b"], [2, "c"], [3, "d"]]}),
            *commit(2, {"t-0": 4}), *drain(ALL)]
    result = check_groups(ops(*rows))
    assert result.valid and result.stats["group_redelivered"] == 2


def test_group_rewind_below_an_acknowledged_commit() -> None:
    rows = [*assign(1, ["t-0"]), *poll(1, {"t-0": [[0, "a"], [1, "b"]]}), *commit(1, {"t-0": 2}),
            *assign(2, ["t-0"]), *poll(2, {"t-0": [[1, "b"], [2, "c"], [3, "d"]]}),
            *commit(2, {"t-0": 4}), *drain(ALL)]
    assert found(rows) == {"group-rewind": 1}
    example = check_groups(ops(*rows)).anomalies["group-rewind"][0]
    assert (example["first_offset"], example["acknowledged_commit"]) == (1, 2)


def test_group_lost_a_record_below_the_commit_nobody_polled() -> None:
    rows = [*assign(1, ["t-0"]), *poll(1, {"t-0": [[0, "a"], [1, "b"]]}),
            *poll(1, {"t-0": [[3, "d"]]}), *commit(1, {"t-0": 4}), *drain(ALL)]
    assert found(rows) == {"group-lost": 1}
    assert check_groups(ops(*rows)).anomalies["group-lost"][0]["value"] == "c"


def test_not_caught_up_when_commits_stop_short() -> None:
    rows = [*assign(1, ["t-0"]), *poll(1, {"t-0": [[0, "a"]]}), *commit(1, {"t-0": 1}),
            *drain(ALL)]
    result = check_groups(ops(*rows))
    assert result.valid and not result.stats["group_caught_up"]

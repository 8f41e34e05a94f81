"""Queue/log checker: one small hand-made history per anomaly that has exactly that anomaly,
and a clean history that has none."""

from __future__ import annotations

from typing import Any

import pytest

from harness.check.history import HistoryError
from harness.check.queue import ANOMALIES, check_queue
from tests.jepsen.histories import ops

Row = tuple[Any, ...]


def send(
    process: int, value: Any, offset: int | None, tp: str = "t-0", outcome: str = "ok"
) -> list[Row]:
    done: Row
    if outcome == "ok":
        done = (process, "ok", "send", [tp, [offset, value]])
    else:
        done = (process, outcome, "send", [tp, value])
    return [(process, "invoke", "send", [tp, value]), done]


def poll(process: int, records: dict[str, list[list[Any]]], final: bool = False) -> list[Row]:
    extra = {"final": True} if final else {}
    return [(process, "invoke", "poll", None), (process, "ok", "poll", records, extra)]


def clean() -> list[Row]:
    return [
        *send(1, "a", 0),
        *send(1, "b", 1),
        *send(2, "c", 2),
        *poll(3, {"t-0": [[0, "a"], [1, "b"]]}),
        *poll(3, {"t-0": [[2, "c"]]}),
        *poll(9, {"t-0": [[0, "a"], [1, "b"], [2, "c"]]}, final=True),
    ]


def found(rows: list[Row]) -> dict[str, int]:
    result = check_queue(ops(*rows))
    return {k: v for k, v in result.counts.items() if v}


def test_clean_history_has_no_anomaly() -> None:
    result = check_queue(ops(*clean()))
    assert result.valid and found(clean()) == {}
    assert set(result.counts) == set(ANOMALIES)
    assert result.stats["sends"] == {"ok": 3, "fail": 0, "info": 0}
    assert result.stats["drained_partitions"] == ["t-0"]


def test_lost_write_missing_from_final_drain() -> None:
    rows = [*send(1, "a", 0), *send(1, "b", 1), *poll(9, {"t-0": [[0, "a"]]}, final=True)]
    assert found(rows) == {"lost-write": 1}
    example = check_queue(ops(*rows)).anomalies["lost-write"][0]
    assert (example["value"], example["offset"], example["rule"]) == (
        "b",
        1,
        "missing from the final drain",
    )


def test_lost_write_of_a_value_read_then_truncated() -> None:
    # the info send was read by a consumer, so it was committed; the drain lost it
    rows = [
        *send(1, "a", 0),
        *send(2, "b", None, outcome="info"),
        *poll(3, {"t-0": [[0, "a"], [1, "b"]]}),
        *poll(9, {"t-0": [[0, "a"]]}, final=True),
    ]
    assert found(rows) == {"lost-write": 1}


def test_lost_write_without_drain_uses_the_highest_polled_offset() -> None:
    rows = [
        *send(1, "a", 0),
        *send(1, "b", 1),
        *send(1, "c", 2),
        *poll(3, {"t-0": [[0, "a"], [2, "c"]]}),
    ]
    # b at offset 1 lies below the highest polled offset 2: lost; the gap is also an internal skip
    assert found(rows) == {"lost-write": 1, "int-poll-skip": 1}


def test_unseen_acknowledged_but_never_read_without_drain() -> None:
    rows = [*send(1, "a", 0), *send(1, "b", 1), *poll(3, {"t-0": [[0, "a"]]})]
    assert found(rows) == {"unseen": 1}
    assert check_queue(ops(*rows)).anomalies["unseen"][0]["value"] == "b"


def test_duplicate_one_value_at_two_offsets() -> None:
    rows = [
        *send(1, "a", 0),
        *send(1, "b", 1),
        *poll(9, {"t-0": [[0, "a"], [1, "b"], [2, "b"]]}, final=True),
    ]
    assert found(rows) == {"duplicate": 1}
    assert check_queue(ops(*rows)).anomalies["duplicate"][0]["offsets"] == [1, 2]


def test_inconsistent_offsets_two_values_at_one_offset() -> None:
    rows = [
        *send(1, "a", 0),
        *send(2, "b", 0),
        *poll(3, {"t-0": [[0, "a"]]}),
        *poll(4, {"t-0": [[0, "b"]]}),
        *poll(9, {"t-0": [[0, "a"]]}, final=True),
        *poll(8, {"t-0": [[0, "b"]]}, final=True),
    ]
    assert found(rows) == {"inconsistent-offsets": 1}


def test_nonmonotonic_send() -> None:
    rows = [*send(1, "a", 1), *send(1, "b", 0), *poll(9, {"t-0": [[0, "b"], [1, "a"]]}, final=True)]
    assert found(rows) == {"nonmonotonic-send": 1}


def test_nonmonotonic_poll_and_reset_by_assign() -> None:
    base = [*send(1, "a", 0), *send(1, "b", 1), *poll(9, {"t-0": [[0, "a"], [1, "b"]]}, final=True)]
    rows = base + [*poll(3, {"t-0": [[0, "a"], [1, "b"]]}), *poll(3, {"t-0": [[1, "b"]]})]
    assert found(rows) == {"nonmonotonic-poll": 1}
    seek = [
        (3, "invoke", "assign", ["t-0"]),
        (3, "ok", "assign", ["t-0"], {"seek_to_beginning": True}),
    ]
    rows = base + [*poll(3, {"t-0": [[0, "a"], [1, "b"]]}), *seek, *poll(3, {"t-0": [[0, "a"]]})]
    assert found(rows) == {}


def test_poll_skip_between_polls() -> None:
    rows = [
        *send(1, "a", 0),
        *send(1, "b", 1),
        *send(1, "c", 2),
        *poll(3, {"t-0": [[0, "a"]]}),
        *poll(3, {"t-0": [[2, "c"]]}),
        *poll(9, {"t-0": [[0, "a"], [1, "b"], [2, "c"]]}, final=True),
    ]
    assert found(rows) == {"poll-skip": 1}
    assert check_queue(ops(*rows)).anomalies["poll-skip"][0]["skipped_offsets"] == [1]


def test_internal_nonmonotonic_poll() -> None:
    rows = [*send(1, "a", 0), *send(1, "b", 1), *poll(9, {"t-0": [[1, "b"], [0, "a"]]}, final=True)]
    assert found(rows) == {"int-nonmonotonic-poll": 1}


def test_g1a_read_of_a_failed_send() -> None:
    rows = [
        *send(1, "a", 0),
        *send(2, "x", None, outcome="fail"),
        *poll(9, {"t-0": [[0, "a"], [1, "x"]]}, final=True),
    ]
    assert found(rows) == {"G1a": 1}


def test_precommitted_read_before_the_send_was_invoked() -> None:
    rows = [
        *poll(3, {"t-0": [[0, "a"]]}),
        *send(1, "a", 0),
        *poll(9, {"t-0": [[0, "a"]]}, final=True),
    ]
    assert found(rows) == {"precommitted-read": 1}
    phantom = [*send(1, "a", 0), *poll(9, {"t-0": [[0, "a"], [1, "ghost"]]}, final=True)]
    assert found(phantom) == {"precommitted-read": 1}


def test_partitions_are_checked_separately() -> None:
    rows = [
        *send(1, "a", 0, tp="t-0"),
        *send(1, "b", 0, tp="t-1"),
        *poll(9, {"t-0": [[0, "a"]], "t-1": [[0, "b"]]}, final=True),
    ]
    assert found(rows) == {}


def test_send_shapes_and_errors() -> None:
    triple = [(1, "invoke", "send", ["t-0", "a"]), (1, "ok", "send", ["t-0", "a", 0])]
    field_form = [
        (2, "invoke", "send", ["t-0", "b"]),
        (2, "ok", "send", ["t-0", "b"], {"offset": 1}),
    ]
    rows = triple + field_form + poll(9, {"t-0": [[0, "a"], [1, "b"]]}, final=True)
    assert found(rows) == {}
    with pytest.raises(HistoryError, match="no integer offset"):
        check_queue(ops((1, "invoke", "send", ["t-0", "a"]), (1, "ok", "send", ["t-0", "a"])))


def test_a_retried_value_counts_by_its_strongest_outcome() -> None:
    # the first attempt failed, the retry of the same value was acknowledged: reading it is fine
    rows = [
        *send(1, "a", None, outcome="fail"),
        *send(1, "a", 0),
        *poll(9, {"t-0": [[0, "a"]]}, final=True),
    ]
    assert found(rows) == {}
    lost = [
        *send(1, "a", None, outcome="info"),
        *send(1, "a", 0),
        *poll(9, {"t-0": []}, final=True),
    ]
    assert found(lost) == {"lost-write": 1}


def test_internal_poll_skip() -> None:
    rows = [
        *send(1, "a", 0),
        *send(1, "b", 1),
        *send(1, "c", 2),
        *poll(3, {"t-0": [[0, "a"], [2, "c"]]}),
        *poll(9, {"t-0": [[0, "a"], [1, "b"], [2, "c"]]}, final=True),
    ]
    assert found(rows) == {"int-poll-skip": 1}
    assert check_queue(ops(*rows)).anomalies["int-poll-skip"][0]["skipped_offsets"] == [1]

"""History reading and pairing: JSON lines, Jepsen log lines, and the invoke/complete rule."""

from __future__ import annotations

import json

import pytest

from harness.check.history import (
    HistoryError,
    pair_operations,
    parse_edn_value,
    parse_jepsen_log,
    parse_jsonl,
)
from tests.jepsen.histories import events


def test_jsonl_round_trip_keeps_unknown_fields() -> None:
    lines = [
        json.dumps(
            {"index": 0, "time": 5, "process": 3, "type": "invoke", "f": "write", "value": ["x", 5]}
        ),
        "",
        json.dumps(
            {
                "index": 1,
                "time": 9,
                "process": 3,
                "type": "ok",
                "f": "write",
                "value": ["x", 5],
                "final": True,
            }
        ),
    ]
    evs = parse_jsonl(lines)
    assert [(e.index, e.time, e.process, e.type) for e in evs] == [
        (0, 5, 3, "invoke"),
        (1, 9, 3, "ok"),
    ]
    assert evs[1].extra == {"final": True}
    assert evs[1].to_json()["final"] is True


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        ('{"process": 1, "type": "invoke"}', "no 'f' field"),
        ('{"process": 1, "type": "done", "f": "read"}', "type must be one of"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_jsonl_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(HistoryError, match=f"line 2: .*{message}"):
        parse_jsonl(['{"process": 0, "type": "invoke", "f": "read"}', line])


def test_jepsen_log_tabs_and_spaces_and_keywords() -> None:
    lines = [
        "INFO  jepsen.util - 2\t:invoke\t:cas\t[3 0]",
        "INFO  jepsen.util - 2\t:fail\t:cas\t[3 0]",
        "INFO  jepsen.util - 1   :invoke :write  3",
        "some other logger line",
        "INFO  jepsen.util - 1   :info   :write  :timed-out",
        "INFO  jepsen.util - 0\t:invoke\t:read\tnil",
        "INFO  jepsen.util - 0\t:fail\t:read\t:timed-out",
    ]
    evs = parse_jepsen_log(lines)
    assert [(e.process, e.type, e.f, e.value, e.error) for e in evs] == [
        (2, "invoke", "cas", [3, 0], None),
        (2, "fail", "cas", [3, 0], None),
        (1, "invoke", "write", 3, None),
        (1, "info", "write", None, "timed-out"),
        (0, "invoke", "read", None, None),
        (0, "fail", "read", None, "timed-out"),
    ]
    assert [e.index for e in evs] == list(range(6))


def test_edn_values() -> None:
    assert parse_edn_value('[1 nil "a b" :k [2 3]]') == [1, None, "a b", ":k", [2, 3]]
    with pytest.raises(ValueError):
        parse_edn_value("[1 2")


def test_pairing_and_info_stays_open() -> None:
    ops = pair_operations(
        events(
            (1, "invoke", "write", ["x", 1]),
            (2, "invoke", "write", ["x", 2]),
            (1, "ok", "write", ["x", 1]),
            (2, "info", "write", None),
            (3, "invoke", "read", ["x", None]),
        )
    )
    assert [(o.id, o.process, o.type, o.call_index, o.return_index) for o in ops] == [
        (0, 1, "ok", 0, 2),
        (1, 2, "info", 1, None),  # info: open to the end
        (2, 3, "info", 4, None),  # never completed: treated as info
    ]
    assert ops[1].value == ["x", 2]  # an info completion without value keeps the invoked one


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([(1, "ok", "read", None)], "has no invoke"),
        ([(1, "invoke", "read", None), (1, "invoke", "write", 1)], "still open"),
        ([(1, "invoke", "read", None), (1, "ok", "write", 1)], "invoked read but completed write"),
    ],
)
def test_pairing_rejects_broken_discipline(rows: list[tuple[object, ...]], message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        pair_operations(events(*rows))


def test_nemesis_info_pairs_like_jepsen() -> None:
    ops = pair_operations(
        events(
            ("nemesis", "info", "start-partition", "leader-cut"),
            (1, "invoke", "read", ["x", None]),
            ("nemesis", "info", "start-partition", ["1", "2"]),
            (1, "ok", "read", ["x", None]),
        )
    )
    nemesis = [o for o in ops if not o.is_client]
    assert [(o.f, o.call_index, o.completion.index if o.completion else None) for o in nemesis] == [
        ("start-partition", 0, 2)
    ]

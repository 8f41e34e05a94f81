"""`kraftlab check linearizable|queue`: exit codes, summaries, JSON, failure view, bad input.

The parser is built from this command module alone, so other commands' state cannot break it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness.check.history import write_jsonl
from harness.cli import check as cli
from tests.jepsen.histories import events

ETCD = Path(__file__).resolve().parents[1] / "data" / "jepsen-etcd"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kraftlab")
    sub = parser.add_subparsers(dest="command")
    cli.register(sub)
    args = parser.parse_args(argv)
    return int(args.handler(args))


def kv_file(tmp_path: Path, read_value: int) -> Path:
    path = tmp_path / "kv.jsonl"
    write_jsonl(
        events(
            (1, "invoke", "write", ["x", 1]),
            (1, "ok", "write", ["x", 1]),
            (2, "invoke", "read", ["x", None]),
            (2, "ok", "read", ["x", read_value]),
        ),
        path,
    )
    return path


def test_linearizable_valid_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["check", "linearizable", "--model", "kv", str(kv_file(tmp_path, 1))]) == 0
    assert capsys.readouterr().out.startswith("VALID: 2 ops")


def test_linearizable_invalid_exits_1_and_writes_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    view = tmp_path / "view.html"
    code = run(["check", "linearizable", str(kv_file(tmp_path, 7)), "--json", "--html", str(view)])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "invalid" and report["valid"] is False
    assert report["failure"]["stuck"][0]["op"] == "read() -> 7"
    assert report["failure"]["state_after_prefix"] == "1"
    assert report["html"] == str(view) and "read() -&gt; 7" in view.read_text()


def test_linearizable_unknown_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wide.jsonl"
    rows = [(p, "invoke", "write", ["x", p]) for p in range(12)] + [
        (p, "ok", "write", ["x", p]) for p in range(12)
    ]
    write_jsonl(
        events(*rows, (99, "invoke", "read", ["x", None]), (99, "ok", "read", ["x", -1])), path
    )
    assert run(["check", "linearizable", str(path), "--max-cache", "5", "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["valid"], report["reason"]) == ("unknown", None, "memory")


def test_jepsen_log_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["check", "linearizable", "--model", "cas-register", "--format", "jepsen-log"]
    assert run([*base, str(ETCD / "etcd_002.log")]) == 0
    assert run([*base, str(ETCD / "etcd_000.log"), "--html", str(tmp_path / "v.html")]) == 1
    out = capsys.readouterr().out
    assert "INVALID: 85 ops" in out and "read() -> 2  <- returned first" in out
    assert "view: " + str(tmp_path / "v.html") in out and (tmp_path / "v.html").is_file()


def test_no_html_view_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["check", "linearizable", "--model", "cas-register", "--format", "jepsen-log"]
    assert run([*base, str(ETCD / "etcd_000.log")]) == 1
    assert "view: " not in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_queue_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.jsonl"
    sends = [
        (1, "invoke", "send", ["t-0", "a"]),
        (1, "ok", "send", ["t-0", [0, "a"]]),
        (1, "invoke", "send", ["t-0", "b"]),
        (1, "ok", "send", ["t-0", [1, "b"]]),
    ]
    write_jsonl(
        events(
            *sends,
            (9, "invoke", "poll", None),
            (9, "ok", "poll", {"t-0": [[0, "a"], [1, "b"]]}, {"final": True}),
        ),
        path,
    )
    assert run(["check", "queue", str(path)]) == 0
    assert capsys.readouterr().out.startswith("VALID")
    write_jsonl(
        events(
            *sends,
            (9, "invoke", "poll", None),
            (9, "ok", "poll", {"t-0": [[0, "a"]]}, {"final": True}),
        ),
        path,
    )
    assert run(["check", "queue", str(path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (
        report["anomaly_types"] == ["lost-write"]
        and report["anomalies"]["lost-write"][0]["value"] == "b"
    )


def test_bad_input_exits_3_with_error_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"process": 1, "type": "ok", "f": "read", "value": ["x", 1]}\n')
    assert run(["check", "linearizable", str(path)]) == 3
    err = json.loads(capsys.readouterr().err)
    assert err["error"] == "INVALID_REQUEST" and "has no invoke" in err["message"]
    assert run(["check", "queue", str(tmp_path / "missing.jsonl")]) == 3

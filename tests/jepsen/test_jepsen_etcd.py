"""The 102 Jepsen etcd histories (Porcupine's test set) against their known verdicts.

These are real histories from a real system; a checker that disagrees with any verdict is
wrong. Semantics and provenance: tests/data/jepsen-etcd/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.check.history import load_history
from harness.check.linearizable import check_linearizable
from harness.check.models import get_model

ETCD = Path(__file__).resolve().parents[1] / "data" / "jepsen-etcd"
EXPECTED: dict[str, bool] = json.loads((ETCD / "expected.json").read_text())


def test_expected_covers_every_history_but_the_empty_one() -> None:
    logs = {p.name for p in ETCD.glob("etcd_*.log")}
    assert len(EXPECTED) == 102
    assert "etcd_095.log" not in EXPECTED  # empty (or absent): that cluster never started
    assert logs - set(EXPECTED) <= {"etcd_095.log"}
    assert sum(EXPECTED.values()) == 23  # 23 linearizable, 79 not


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_etcd_history_verdict(name: str) -> None:
    ops = load_history(ETCD / name, "jepsen-log")
    result = check_linearizable(ops, get_model("cas-register"))
    assert result.verdict == ("valid" if EXPECTED[name] else "invalid")
    if not EXPECTED[name]:
        failure = result.failure
        assert failure is not None and failure.stuck and failure.blocking in failure.stuck


def test_empty_history_is_valid(tmp_path: Path) -> None:
    empty = tmp_path / "etcd_095.log"
    empty.write_text("")
    ops = load_history(empty, "jepsen-log")
    assert ops == []
    result = check_linearizable(ops, get_model("cas-register"))
    assert (result.verdict, result.ops) == ("valid", 0)

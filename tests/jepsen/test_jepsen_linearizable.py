"""The linearizability checker on small hand-made kv histories, and its limits."""

from __future__ import annotations

import pytest

from harness.check.linearizable import check_linearizable, check_partition
from harness.check.models import get_model
from harness.check.timeline import render_failure_html
from tests.jepsen.histories import ops

KV = get_model("kv")


def verdict(*rows: tuple[object, ...]) -> str:
    return check_linearizable(ops(*rows), KV).verdict


def test_concurrent_write_and_read_may_see_either_value() -> None:
    assert (
        verdict(
            (1, "invoke", "write", ["x", 1]),
            (2, "invoke", "read", ["x", None]),
            (2, "ok", "read", ["x", None]),
            (1, "ok", "write", ["x", 1]),
            (2, "invoke", "read", ["x", None]),
            (2, "ok", "read", ["x", 1]),
        )
        == "valid"
    )


def test_stale_read_after_completed_write_is_invalid() -> None:
    history = ops(
        (1, "invoke", "write", ["x", 1]),
        (1, "ok", "write", ["x", 1]),
        (1, "invoke", "write", ["x", 2]),
        (1, "ok", "write", ["x", 2]),
        (2, "invoke", "read", ["x", None]),
        (2, "ok", "read", ["x", 1]),
    )
    result = check_linearizable(history, KV)
    assert result.verdict == "invalid"
    failure = result.failure
    assert failure is not None
    assert [m.op.id for m in failure.prefix] == [0, 1]  # both writes linearize
    assert KV.describe_state(failure.state) == "2"
    assert [m.op.id for m in failure.stuck] == [2] and failure.blocking.op.id == 2
    assert failure.partition == "x"
    page = render_failure_html(result, KV)
    assert "read() -&gt; 1" in page and "write(2)" in page


def test_cas_fail_is_a_read_that_the_state_differs() -> None:
    base = [
        (1, "invoke", "write", ["x", 1]),
        (1, "ok", "write", ["x", 1]),
        (2, "invoke", "cas", ["x", [1, 5]]),
    ]
    assert verdict(*base, (2, "fail", "cas", ["x", [1, 5]])) == "invalid"  # state was 1
    assert verdict(*base, (2, "ok", "cas", ["x", [1, 5]])) == "valid"
    # a fail with another error did not happen at all
    assert (
        verdict(*base, (2, "fail", "cas", ["x", [1, 5]], {"error": "NOT_LEADER_OR_FOLLOWER"}))
        == "valid"
    )
    # an ok cas from a state that never held `expected` is impossible
    assert (
        verdict((2, "invoke", "cas", ["x", [7, 5]]), (2, "ok", "cas", ["x", [7, 5]])) == "invalid"
    )


def test_info_write_may_take_effect_late_or_never() -> None:
    prefix = [
        (1, "invoke", "write", ["x", 1]),
        (1, "info", "write", None),
        (2, "invoke", "read", ["x", None]),
        (2, "ok", "read", ["x", None]),
    ]
    assert verdict(*prefix) == "valid"  # never took effect (so far)
    assert (
        verdict(*prefix, (3, "invoke", "read", ["x", None]), (3, "ok", "read", ["x", 1])) == "valid"
    )
    # but once observed it cannot be undone
    assert (
        verdict(
            *prefix,
            (3, "invoke", "read", ["x", None]),
            (3, "ok", "read", ["x", 1]),
            (3, "invoke", "read", ["x", None]),
            (3, "ok", "read", ["x", None]),
        )
        == "invalid"
    )


def test_failed_write_did_not_happen() -> None:
    assert (
        verdict(
            (1, "invoke", "write", ["x", 1]),
            (1, "fail", "write", ["x", 1]),
            (2, "invoke", "read", ["x", None]),
            (2, "ok", "read", ["x", 1]),
        )
        == "invalid"
    )


def test_append_concatenates_in_linearization_order() -> None:
    rows = [
        (1, "invoke", "append", ["k", "a"]),
        (2, "invoke", "append", ["k", "b"]),
        (1, "ok", "append", ["k", "a"]),
        (2, "ok", "append", ["k", "b"]),
        (3, "invoke", "read", ["k", None]),
    ]
    assert verdict(*rows, (3, "ok", "read", ["k", "ba"])) == "valid"
    assert verdict(*rows, (3, "ok", "read", ["k", "ab"])) == "valid"
    assert verdict(*rows, (3, "ok", "read", ["k", "a"])) == "invalid"  # b completed before the read


def test_keys_are_independent_and_the_bad_key_is_named() -> None:
    history = ops(
        (1, "invoke", "write", ["x", 1]),
        (1, "ok", "write", ["x", 1]),
        (2, "invoke", "write", ["y", 1]),
        (2, "ok", "write", ["y", 1]),
        (3, "invoke", "read", ["y", None]),
        (3, "ok", "read", ["y", 2]),
        (4, "invoke", "read", ["x", None]),
        (4, "ok", "read", ["x", 1]),
    )
    result = check_linearizable(history, KV)
    assert (result.verdict, result.partitions) == ("invalid", 2)
    assert result.failure is not None and result.failure.partition == "y"


def test_nemesis_ops_are_ignored() -> None:
    assert (
        verdict(
            ("nemesis", "invoke", "partition", ["1", "2"]),
            (1, "invoke", "write", ["x", 1]),
            ("nemesis", "info", "partition", None),
            (1, "ok", "write", ["x", 1]),
        )
        == "valid"
    )


def _wide_history(width: int) -> list[tuple[object, ...]]:
    """`width` concurrent writes then reads that force a deep search."""
    rows: list[tuple[object, ...]] = [(p, "invoke", "write", ["x", p]) for p in range(width)]
    rows += [(p, "ok", "write", ["x", p]) for p in range(width)]
    rows += [(100, "invoke", "read", ["x", None]), (100, "ok", "read", ["x", -1])]
    return rows


def test_memory_bound_gives_unknown() -> None:
    history = ops(*_wide_history(12))
    mops = [KV.prepare(o) for o in history]
    outcome = check_partition(KV, [m for m in mops if m is not None], max_cache_entries=10)
    assert (outcome.verdict, outcome.reason) == ("unknown", "memory")
    # without the bound the same history is decided
    assert check_linearizable(history, KV).verdict == "invalid"


def test_timeout_gives_unknown() -> None:
    result = check_linearizable(ops(*_wide_history(12)), KV, timeout_s=0.0)
    assert (result.verdict, result.reason) == ("unknown", "timeout")


def test_parallel_partitions_agree_with_sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.check import linearizable

    rows: list[tuple[object, ...]] = []
    for k in range(4):  # four keys of ten concurrent writes; k1 and k2 end in impossible reads
        rows += [(10 * k + p, "invoke", "write", [f"k{k}", p]) for p in range(10)]
        rows += [(10 * k + p, "ok", "write", [f"k{k}", p]) for p in range(10)]
        bad = -1 if k in (1, 2) else 9
        rows += [
            (99 + k, "invoke", "read", [f"k{k}", None]),
            (99 + k, "ok", "read", [f"k{k}", bad]),
        ]
    history = ops(*rows)
    pooled: list[int] = []
    real_run_parallel = linearizable._run_parallel

    def spy(model: object, parts: list[object], *args: object) -> object:
        pooled.append(len(parts))
        return real_run_parallel(model, parts, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(linearizable, "_run_parallel", spy)
    seq = check_linearizable(history, KV, workers=1)
    assert seq.verdict == "invalid" and pooled == []
    assert seq.failure is not None and seq.failure.partition == "k1"  # first failure stops
    assert seq.partitions_checked == 2
    # quick_pass_s=0: partitions needing over a thousand backtracks go to the pool
    par = check_linearizable(history, KV, workers=2, quick_pass_s=0.0)
    assert pooled == [2]  # the two undecidable-in-a-hurry keys; the valid ones finish at once
    assert par.verdict == "invalid"
    assert par.failure is not None and par.failure.partition in ("k1", "k2")
    valid = ops(*[r for r in rows if r[0] not in (100, 101)])
    assert check_linearizable(valid, KV, workers=2, quick_pass_s=0.0).verdict == "valid"


@pytest.mark.parametrize("model_name", ["kv", "cas-register"])
def test_unknown_operation_is_a_clear_error(model_name: str) -> None:
    from harness.check.history import HistoryError

    value = ["x", 1] if model_name == "kv" else 1
    with pytest.raises(HistoryError, match="no operation 'incr'"):
        check_linearizable(
            ops((1, "invoke", "incr", value), (1, "ok", "incr", value)), get_model(model_name)
        )


def test_delete_makes_the_key_absent() -> None:
    rows = [
        (1, "invoke", "write", ["x", 1]),
        (1, "ok", "write", ["x", 1]),
        (1, "invoke", "delete", ["x", None]),
        (1, "ok", "delete", ["x", None]),
        (2, "invoke", "read", ["x", None]),
    ]
    assert verdict(*rows, (2, "ok", "read", ["x", None])) == "valid"
    assert verdict(*rows, (2, "ok", "read", ["x", 1])) == "invalid"

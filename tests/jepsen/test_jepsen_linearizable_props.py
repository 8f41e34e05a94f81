"""Properties: histories recorded from a real sequential execution are linearizable however the
calls are stretched into concurrency windows, and a planted stale read is always caught."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.check.history import Event, Operation, pair_operations
from harness.check.linearizable import check_linearizable
from harness.check.models import get_model

KV = get_model("kv")
KEYS = ("a", "b")


@dataclass
class Planned:
    process: int
    f: str
    invoke_value: Any
    outcome: str  # ok | fail | info
    result_value: Any
    call_t: int
    ret_t: int | None


@st.composite
def executions(draw: st.DrawFn) -> list[Planned]:
    """Run random ops against a real dict in order; op k takes effect at time 10k and its call
    and return are stretched by random windows around that point (processes stay sequential)."""
    n = draw(st.integers(min_value=1, max_value=24))
    store: dict[str, Any] = {}
    busy_until: dict[int, int] = {}
    planned: list[Planned] = []
    next_value = 1
    for k in range(n):
        point = 10 * k + 5
        key = draw(st.sampled_from(KEYS))
        f = draw(st.sampled_from(["read", "write", "cas", "append"]))
        free = [p for p in range(4) if busy_until.get(p, -1) < point]
        process = draw(st.sampled_from(free)) if free else max(busy_until) + 1
        call_t = draw(
            st.integers(min_value=max(busy_until.get(process, -1) + 1, point - 25), max_value=point)
        )
        ret_t = point + draw(st.integers(min_value=0, max_value=25))
        info = f != "read" and draw(st.integers(0, 9)) == 0
        current = store.get(key)
        if f == "read":
            p = Planned(process, f, [key, None], "ok", [key, current], call_t, ret_t)
        elif f == "write":
            store[key] = next_value
            p = Planned(process, f, [key, next_value], "ok", [key, next_value], call_t, ret_t)
        elif f == "append":
            if current is not None and not isinstance(current, str):
                continue
            store[key] = (current or "") + f"{next_value},"
            p = Planned(process, f, [key, f"{next_value},"], "ok", None, call_t, ret_t)
        else:
            expected = current if draw(st.booleans()) else next_value + 1000
            ok = current == expected
            if ok:
                store[key] = next_value
            p = Planned(
                process,
                f,
                [key, [expected, next_value]],
                "ok" if ok else "fail",
                None,
                call_t,
                ret_t,
            )
        next_value += 1
        if info:
            p.outcome, p.ret_t = "info", None
            busy_until[process] = 10**9  # Jepsen retires a process after an info op
        else:
            busy_until[process] = ret_t
        planned.append(p)
    return planned


def to_history(planned: list[Planned]) -> list[Operation]:
    stamped: list[tuple[int, int, Planned, str]] = []
    for n, p in enumerate(planned):
        stamped.append((p.call_t, 0, p, "invoke"))
        if p.ret_t is not None:
            stamped.append((p.ret_t, 1, p, p.outcome))
        else:
            stamped.append((10**6 + n, 1, p, "info"))
    stamped.sort(key=lambda s: (s[0], s[1]))
    events = []
    for index, (t, _, p, kind) in enumerate(stamped):
        value = p.invoke_value if kind == "invoke" or p.result_value is None else p.result_value
        events.append(Event(index, t, p.process, kind, p.f, value if kind != "info" else None))  # type: ignore[arg-type]
    return pair_operations(events)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(executions())
def test_sequential_executions_are_linearizable(planned: list[Planned]) -> None:
    result = check_linearizable(to_history(planned), KV)
    assert result.verdict == "valid", result.failure


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(executions(), st.sampled_from(KEYS))
def test_planted_stale_read_is_caught(planned: list[Planned], key: str) -> None:
    """After everything, write v_old then v_new (unique values, completed one after the
    other), then read v_old: no linearization allows it."""
    end = max([p.ret_t or p.call_t for p in planned] + [0]) + 100
    old, new = 10_000, 10_001
    planned = planned + [
        Planned(50, "write", [key, old], "ok", [key, old], end, end + 1),
        Planned(51, "write", [key, new], "ok", [key, new], end + 2, end + 3),
        Planned(52, "read", [key, None], "ok", [key, old], end + 4, end + 5),
    ]
    result = check_linearizable(to_history(planned), KV)
    assert result.verdict == "invalid"
    assert result.failure is not None and result.failure.partition == key
    assert result.failure.blocking.op.process == 52


def brute_force_linearizable(history: list[Operation]) -> bool:
    """Try every order that respects real time: the definition, for tiny histories."""
    mops = [m for m in (KV.prepare(op) for op in history) if m is not None]
    end = 10**9

    def ret(m: Any) -> int:
        r = m.op.return_index
        return end if r is None else r

    def search(remaining: frozenset[int], state: Any) -> bool:
        if not remaining:
            return True
        horizon = min(ret(mops[i]) for i in remaining)
        for i in remaining:
            if mops[i].op.call_index > horizon:
                continue  # some remaining op returned before this one was invoked
            ok, new_state = KV.step(state, mops[i].input, mops[i].output)
            if ok and search(remaining - {i}, new_state):
                return True
        return False

    by_key: dict[Any, list[int]] = {}
    for i, m in enumerate(mops):
        by_key.setdefault(m.partition, []).append(i)
    return all(search(frozenset(ids), KV.init()) for ids in by_key.values())


@st.composite
def random_histories(draw: st.DrawFn) -> list[Operation]:
    """Arbitrary small histories over a tiny value domain (so identical info ops, failed cas
    and repeated values are common); most are not linearizable."""
    n = draw(st.integers(min_value=1, max_value=7))
    stamped: list[tuple[int, int, int, str, str, Any]] = []
    for p in range(n):
        f = draw(st.sampled_from(["read", "write", "cas"]))
        key = draw(st.sampled_from(["a", "a", "b"]))
        v = draw(st.sampled_from([None, 1, 2]))
        w = draw(st.sampled_from([1, 2]))
        call = draw(st.integers(0, 20))
        outcome = draw(
            st.sampled_from(["ok", "ok", "fail", "info"] if f == "cas" else ["ok", "ok", "info"])
        )
        invoke = [key, None] if f == "read" else [key, w] if f == "write" else [key, [v, w]]
        done = [key, v] if f == "read" else invoke
        stamped.append((call, 0, p, "invoke", f, invoke))
        if outcome == "info":
            stamped.append((100 + p, 1, p, "info", f, None))
        else:
            stamped.append((call + draw(st.integers(1, 20)), 1, p, outcome, f, done))
    stamped.sort(key=lambda s: (s[0], s[1]))
    events = [Event(i, s[0], s[2], s[3], s[4], s[5]) for i, s in enumerate(stamped)]  # type: ignore[arg-type]
    return pair_operations(events)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_histories())
def test_agrees_with_brute_force_on_tiny_histories(history: list[Operation]) -> None:
    """Every pruning (cache, read-only dominance, identical-info symmetry) must be exact."""
    expected = brute_force_linearizable(history)
    assert check_linearizable(history, KV).verdict == ("valid" if expected else "invalid")

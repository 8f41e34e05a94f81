"""partition.purgatory: the one place both partition cores park requests. Unit tests of its
contract, then a hypothesis state machine against a plain model: nothing completes before its
condition or expires before its deadline, every parked op leaves exactly once, in park order
within each call, and fail_all leaves nothing parked."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from partition.purgatory import Purgatory, PurgatoryUsageError


@dataclass(frozen=True, slots=True)
class Op:
    """An op waiting for a watermark to reach `required_offset` (a produce's HW condition)."""

    op_id: int
    required_offset: int


def _ids(ops: list[Op]) -> list[int]:
    return [op.op_id for op in ops]


def test_complete_takes_the_satisfied_in_park_order_and_keeps_the_rest() -> None:
    p: Purgatory[Op] = Purgatory()
    p.park(Op(1, 5), deadline_ms=100)
    p.park(Op(2, 9), deadline_ms=50)
    p.park(Op(3, 4), deadline_ms=70)
    assert _ids(p.complete(lambda op: op.required_offset <= 5)) == [1, 3]
    assert [x.op.op_id for x in p] == [2]
    assert p.complete(lambda op: op.required_offset <= 5) == []


def test_expire_is_inclusive_of_the_deadline() -> None:
    p: Purgatory[Op] = Purgatory()
    p.park(Op(1, 5), deadline_ms=100)
    p.park(Op(2, 5), deadline_ms=101)
    assert p.expire(99) == []
    assert _ids(p.expire(100)) == [1]
    assert _ids(p.expire(1_000)) == [2]
    assert len(p) == 0


def test_fail_all_takes_everything_in_park_order() -> None:
    p: Purgatory[Op] = Purgatory()
    for i in range(3):
        p.park(Op(i, i), deadline_ms=10 - i)
    assert _ids(p.fail_all()) == [0, 1, 2]
    assert len(p) == 0 and p.next_deadline_ms(0) is None and p.fail_all() == []


def test_next_deadline_is_the_earliest_or_now_while_a_wake_waits() -> None:
    p: Purgatory[Op] = Purgatory()
    assert p.next_deadline_ms(7) is None
    p.wake()  # with nothing parked: no deadline, but the wake is kept for what parks next
    assert p.next_deadline_ms(7) is None and not p.is_woken
    p.park(Op(1, 1), deadline_ms=300)
    p.park(Op(2, 1), deadline_ms=200)
    assert p.is_woken and p.next_deadline_ms(7) == 7
    assert p.sweep(7, lambda op, woken, expired: None) == []
    assert not p.is_woken and p.next_deadline_ms(7) == 200


def test_sweep_passes_the_wake_once_and_answers_take_ops_out() -> None:
    p: Purgatory[Op] = Purgatory()
    p.park(Op(1, 3), deadline_ms=100)
    p.park(Op(2, 8), deadline_ms=100)
    seen: list[tuple[int, bool, bool]] = []

    def settle(op: Op, woken: bool, expired: bool) -> str | None:
        seen.append((op.op_id, woken, expired))
        return f"answer {op.op_id}" if (woken and op.required_offset <= 5) or expired else None

    p.wake()
    assert p.sweep(10, settle) == ["answer 1"]
    assert p.sweep(10, settle) == []  # the wake was used up: op 2 is not looked at as woken
    assert p.sweep(100, settle) == ["answer 2"]
    assert seen == [(1, True, False), (2, True, False), (2, False, False), (2, False, True)]


def test_a_sweep_may_not_keep_an_expired_op() -> None:
    p: Purgatory[Op] = Purgatory()
    p.park(Op(1, 3), deadline_ms=100)
    with pytest.raises(PurgatoryUsageError, match="past its deadline"):
        p.sweep(100, lambda op, woken, expired: None)


# ------------------------------------------------------------------------ state machine


class PurgatoryMachine(RuleBasedStateMachine):
    """A watermark and a clock that only move forward, ops parked against them, and every way
    out of the purgatory, checked against a model of what is parked."""

    def __init__(self) -> None:
        super().__init__()
        self.p: Purgatory[Op] = Purgatory()
        self.parked: dict[int, tuple[Op, int]] = {}  # the model: op id -> (op, deadline)
        self.left: list[int] = []  # every op id taken out, by any call
        self.watermark = 0
        self.now_ms = 0
        self.next_id = 0

    def _took(self, ops: list[Op]) -> None:
        ids = _ids(ops)
        assert ids == sorted(ids), "ops leave in park order"
        for op_id in ids:
            assert op_id in self.parked, f"op {op_id} left twice, or was never parked"
            del self.parked[op_id]
        self.left += ids

    @rule(ahead=st.integers(0, 20), wait_ms=st.integers(0, 1_000))
    def park(self, ahead: int, wait_ms: int) -> None:
        op = Op(self.next_id, self.watermark + ahead)
        self.next_id += 1
        self.p.park(op, self.now_ms + wait_ms)
        self.parked[op.op_id] = (op, self.now_ms + wait_ms)

    @rule(by=st.integers(0, 10))
    def watermark_moves_and_completes(self, by: int) -> None:
        self.watermark += by
        done = self.p.complete(lambda op: op.required_offset <= self.watermark)
        for op in done:
            assert op.required_offset <= self.watermark, "completed before its condition"
        self._took(done)
        assert all(op.required_offset > self.watermark for op, _ in self.parked.values())

    @rule(ms=st.integers(0, 700))
    def time_passes_and_expires(self, ms: int) -> None:
        self.now_ms += ms
        expired = self.p.expire(self.now_ms)
        for op in expired:
            assert self.parked[op.op_id][1] <= self.now_ms, "expired before its deadline"
        self._took(expired)
        assert all(deadline > self.now_ms for _, deadline in self.parked.values())

    @rule(wake=st.booleans(), ms=st.integers(0, 700))
    def sweep(self, wake: bool, ms: int) -> None:
        self.now_ms += ms
        if wake:
            self.p.wake()

        def settle(op: Op, woken: bool, expired: bool) -> Op | None:
            assert woken == wake
            assert expired == (self.parked[op.op_id][1] <= self.now_ms)
            return op if expired or (woken and op.required_offset <= self.watermark) else None

        self._took(self.p.sweep(self.now_ms, settle))
        assert not self.p.is_woken

    @precondition(lambda self: self.parked)
    @rule()
    def fail_all(self) -> None:
        self._took(self.p.fail_all())
        assert not self.parked and len(self.p) == 0

    @invariant()
    def matches_the_model(self) -> None:
        assert [(x.op, x.deadline_ms) for x in self.p] == sorted(
            self.parked.values(), key=lambda pair: pair[0].op_id)
        assert len(self.left) == len(set(self.left)), "an op left twice"
        assert len(self.left) + len(self.parked) == self.next_id
        due = self.p.next_deadline_ms(self.now_ms)
        if not self.parked:
            assert due is None
        elif not self.p.is_woken:
            assert due == min(deadline for _, deadline in self.parked.values())

    def teardown(self) -> None:
        # Leadership lost at the end: whatever is still parked leaves now, and exactly once.
        self._took(self.p.fail_all())
        assert sorted(self.left) == list(range(self.next_id))


TestPurgatoryMachine = PurgatoryMachine.TestCase
TestPurgatoryMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)

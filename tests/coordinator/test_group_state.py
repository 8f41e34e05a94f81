"""The classic group's transition table (ClassicGroupState.validPreviousStates), enforced where
the state changes: every allowed transition works, every other one is an InvariantViolation."""

from __future__ import annotations

import itertools

import pytest

from coordinator.errors import InvariantViolation
from coordinator.group import ClassicGroup, GroupState

S = GroupState
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.STABLE, S.PREPARING_REBALANCE),
} | {(s, S.DEAD) for s in S}


@pytest.mark.parametrize(("source", "target"), list(itertools.product(S, S)))
def test_transition_table(source: GroupState, target: GroupState) -> None:
    group = ClassicGroup("g", 0, state=source)
    if (source, target) in ALLOWED:
        group.transition_to(target, 5)
        assert (group.state, group.previous_state, group.state_timestamp_ms) == (target, source, 5)
    else:
        with pytest.raises(InvariantViolation):
            group.transition_to(target, 5)
        assert group.state is source


def test_only_a_deleted_empty_group_comes_back() -> None:
    group = ClassicGroup("g", 0)
    group.transition_to(S.DEAD, 1)
    group.undo_delete(2)
    assert group.state is S.EMPTY
    stable = ClassicGroup("g", 0, state=S.STABLE)
    stable.transition_to(S.DEAD, 1)
    with pytest.raises(InvariantViolation):
        stable.undo_delete(2)

"""The table of docs/groups.md: what a follower's SyncGroup, Heartbeat, OffsetCommit (at its
generation, and a simple one) and LeaveGroup get in each state, and where LeaveGroup takes the
group."""

from __future__ import annotations

import pytest

from coordinator import GroupState, JoinGroupProtocol, MemberIdentity
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker, stable_group

S = GroupState
PARKED = None  # no answer yet


def group_in(state: GroupState) -> tuple[Broker, str, int]:
    """A group of two in `state`; returns the broker, the follower's id and the generation the
    follower knows."""
    b = Broker()
    (leader, follower), generation = stable_group(b, "g", 2)
    if state is S.PREPARING_REBALANCE:
        b.join("g", leader)
    elif state is S.COMPLETING_REBALANCE:
        b.join("g", leader, protocols=(JoinGroupProtocol("range", b"more"),))
        _, response = b.join("g", follower)
        generation = response.generation_id
    elif state is S.EMPTY:
        b.leave("g", MemberIdentity(leader), MemberIdentity(follower))
    assert b.state("g") is state
    return b, follower, generation


@pytest.mark.parametrize(
    ("state", "sync", "heartbeat", "commit", "simple_commit", "leave", "after_leave"),
    [
        (S.EMPTY, Errors.UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID,
         Errors.NONE, Errors.UNKNOWN_MEMBER_ID, S.EMPTY),
        # The leader has rejoined; the follower leaving completes the join phase.
        (S.PREPARING_REBALANCE, Errors.REBALANCE_IN_PROGRESS, Errors.REBALANCE_IN_PROGRESS,
         Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.NONE, S.COMPLETING_REBALANCE),
        (S.COMPLETING_REBALANCE, PARKED, Errors.NONE, Errors.REBALANCE_IN_PROGRESS,
         Errors.UNKNOWN_MEMBER_ID, Errors.NONE, S.PREPARING_REBALANCE),
        (S.STABLE, Errors.NONE, Errors.NONE, Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.NONE,
         S.PREPARING_REBALANCE),
    ],
)  # fmt: skip
def test_answers_by_state(state: GroupState, sync: Errors | None, heartbeat: Errors, commit: Errors,
                          simple_commit: Errors, leave: Errors, after_leave: GroupState) -> None:  # fmt: skip
    b, follower, generation = group_in(state)
    assert b.heartbeat("g", follower, generation) is heartbeat
    _, committed = b.commit("g", {("t", 0): 1}, generation=generation, member_id=follower)
    assert committed.topics[0].partitions[0].error is commit
    _, simple = b.commit("g", {("t", 1): 1})
    assert simple.topics[0].partitions[0].error is simple_commit
    _, synced = b.sync("g", follower, generation)
    assert (synced if synced is None else synced.error) is sync
    assert b.state("g") is state  # none of these moves the group
    assert b.leave("g", MemberIdentity(follower)).members[0].error is leave
    assert b.state("g") is after_leave

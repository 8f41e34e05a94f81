"""The leader's timer arithmetic (quorum/raft/leader.py), asked after every input by the drivers:
`check_quorum_deadline_ms` and `next_deadline_ms` against the plain definitions (sort the other
voters' fetch times, take the one the majority needs; the minimum of every pending deadline),
for any voter set, with or without the leader counting itself (KIP-853 removal)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from quorum.raft.config import RaftConfig
from quorum.raft.leader import LeaderState, ParkedFetch
from quorum.raft.messages import FetchRequest

CONFIG = RaftConfig()


def reference_check_quorum_deadline(ls: LeaderState) -> int:
    times = sorted(
        (p.last_fetch_ms or 0 for v, p in ls.voter_progress.items() if v != ls.node_id),
        reverse=True,
    )
    needed = ls.majority - (1 if ls.counts_self else 0)
    if needed <= 0 or len(times) < needed:
        return 1 << 62
    return times[needed - 1] + CONFIG.check_quorum_timeout_ms + 1


@st.composite
def leaders(draw: Any) -> LeaderState:
    voters = tuple(sorted(draw(st.sets(st.integers(1, 7), min_size=1, max_size=7))))
    node_id = draw(st.sampled_from((*voters, 99)))  # 99: this leader was removed, leads on
    ls = LeaderState(epoch=3, node_id=node_id, voters=voters, epoch_start_offset=0,
                     now_ms=1_000, config=CONFIG, view=None)  # type: ignore[arg-type]  # fmt: skip
    for v in voters:
        ls.voter_progress[v].last_fetch_ms = draw(st.none() | st.integers(0, 10_000))
    if not draw(st.booleans()):
        ls.unacked_begin.clear()
    ls.begin_resend_ms = draw(st.integers(0, 20_000))
    for src in draw(st.lists(st.integers(1, 7), max_size=3)):
        request = FetchRequest(leader_epoch=3, replica_id=src, fetch_offset=0, last_fetched_epoch=0)
        ls.parked.append(ParkedFetch(src, request, draw(st.integers(0, 20_000))))
    ls.batch_deadline_ms = draw(st.none() | st.integers(0, 20_000))
    ls.last_append_ms = draw(st.integers(0, 20_000))
    return ls


@given(leaders())
def test_check_quorum_deadline_is_the_fetch_time_the_majority_needs(ls: LeaderState) -> None:
    assert ls.check_quorum_deadline_ms() == reference_check_quorum_deadline(ls)


@given(leaders())
def test_next_deadline_is_the_earliest_pending_one(ls: LeaderState) -> None:
    deadlines = [reference_check_quorum_deadline(ls)]
    if ls.unacked_begin:
        deadlines.append(ls.begin_resend_ms)
    deadlines += [p.deadline_ms for p in ls.parked]
    if ls.batch_deadline_ms is not None:
        deadlines.append(ls.batch_deadline_ms)
    if CONFIG.max_idle_interval_ms > 0 and not ls.batch:
        deadlines.append(ls.last_append_ms + CONFIG.max_idle_interval_ms)
    assert ls.next_deadline_ms() == min(deadlines)

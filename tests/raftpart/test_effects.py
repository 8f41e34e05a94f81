"""The effect list of a raft partition (partition/raft/effects.py): client answers run in order
between the Raft runs handed to the shared executor, and flush_stages cuts a list exactly where
harness/drive/effects.py's execute_effects would fsync, so a driver grouping fsyncs across partitions
does the same thing in the same order, with one fsync round per broker per event-loop round."""

from __future__ import annotations

from typing import Any

import structlog
from hypothesis import given
from hypothesis import strategies as st

from harness.drive.effects import execute_effects
from partition.raft import Stage, execute_partition_effects, flush_stages
from partition.raft.effects import Effect, RaftEffect
from partition.replica import CompleteProduce, FetchResponse, ProduceResponse, SendFetchResponse
from quorum.metadata.errors import Errors
from quorum.raft.effects import (
    AppendToLog,
    CommitAdvanced,
    ElectionState,
    FlushLog,
    PersistElectionState,
    Send,
    TruncateLog,
)
from quorum.raft.log import Entry
from quorum.raft.messages import VoteRequest
from tests.raftpart.router import Router


def append(offset: int, flush: bool) -> AppendToLog:
    return AppendToLog((Entry(offset, 1, b"x"),), flush)


SEND = Send(2, VoteRequest(1, 1, 0, 0))
DONE = CompleteProduce(ProduceResponse(7, Errors.NONE, 1, 1))


def test_a_leader_append_then_commit_is_two_stages() -> None:
    effects: list[Effect] = [append(1, False), DONE, SEND, FlushLog(), CommitAdvanced(2), DONE]
    assert flush_stages(effects) == [
        Stage((append(1, False), DONE, SEND), flush_after=True),  # replication overlaps the fsync
        Stage((CommitAdvanced(2), DONE), flush_after=False),
    ]


def test_a_follower_append_is_flushed_before_its_next_fetch() -> None:
    effects: list[Effect] = [append(1, True), append(2, True), append(3, False), SEND]
    assert flush_stages(effects) == [
        Stage((append(1, False), append(2, False), append(3, False)), flush_after=True),
        Stage((SEND,), flush_after=False),
    ]
    assert flush_stages([append(1, True)]) == [Stage((append(1, False),), flush_after=True)]
    assert flush_stages([]) == []


def test_a_vote_is_durable_before_the_answer_that_grants_it() -> None:
    vote = ElectionState(3, voted_id=2)
    effects: list[Effect] = [PersistElectionState(vote), SEND]
    assert flush_stages(effects) == [Stage((), flush_after=False, persist=vote),
                                     Stage((SEND,), flush_after=False)]  # fmt: skip
    # Unflushed appends before it: the log's fsync, then the election state, then the rest.
    effects = [append(1, True), PersistElectionState(vote), CommitAdvanced(2), SEND]
    assert flush_stages(effects) == [
        Stage((append(1, False),), flush_after=True, persist=vote),
        Stage((CommitAdvanced(2), SEND), flush_after=False),
    ]


class Recorder:
    """A Raft EffectEnv and a log that write down what happens, in order."""

    def __init__(self) -> None:
        self.trace: list[tuple[Any, ...]] = []
        self.log = self

    # the log
    def append(self, entries: Any) -> None:
        self.trace.append(("append", entries[0].offset))

    def flush(self) -> None:
        self.trace.append(("flush",))

    def truncate_to(self, end_offset: int) -> None:
        self.trace.append(("truncate", end_offset))

    # the env
    def send(self, to: int, message: Any) -> None:
        self.trace.append(("send", to))

    def persist_election_state(self, state: ElectionState) -> None:
        self.trace.append(("persist", state.epoch))

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.trace.append(("commit", high_watermark))

    def run_raft_effects(self, effects: list[RaftEffect]) -> None:
        execute_effects(effects, self)  # type: ignore[arg-type]

    def complete_produce(self, response: ProduceResponse) -> None:
        self.trace.append(("produce", response.request_id))

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.trace.append(("fetch", response.request_id))


def _effect(kind: int, n: int) -> Effect:
    return [
        append(n, True), append(n, False), FlushLog(), Send(n % 3, VoteRequest(1, 1, 0, 0)),
        CommitAdvanced(n), TruncateLog(n), PersistElectionState(ElectionState(n)),
        CompleteProduce(ProduceResponse(n, Errors.NONE)),
        SendFetchResponse(-1, FetchResponse("t", 0, Errors.NONE, 0, request_id=n)),
    ][kind]  # fmt: skip


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 9)), max_size=25))
def test_running_the_stages_does_what_the_executor_does(raw: list[tuple[int, int]]) -> None:
    effects = [_effect(kind, n) for kind, n in raw]
    direct = Recorder()
    execute_partition_effects(effects, direct)
    staged = Recorder()
    for stage in flush_stages(effects):
        execute_partition_effects(stage.effects, staged)
        if stage.flush_after:
            staged.flush()
        if stage.persist is not None:
            staged.persist_election_state(stage.persist)
    assert staged.trace == direct.trace


def test_a_broker_fsyncs_once_per_round_for_all_its_partitions() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    r = Router(partitions=12, seed=1)
    for p in range(12):
        r.wait_for_leader(partition=p)
    r.advance(2000)  # idle: phases merged, every follower's fetch parked at its leader
    leader = r.leader(0).node_id
    led = [p for p in range(12) if r.leader(p).node_id == leader]
    assert len(led) >= 3
    rounds, fsyncs = r.grouped_fsyncs, r.log_fsyncs
    r.produce_many([(p, f"v{p}") for p in led], to=leader)
    assert (r.grouped_fsyncs - rounds, r.log_fsyncs - fsyncs) == (1, len(led))
    r.advance(1)  # each follower broker gets one envelope with every partition's new batch
    assert (r.grouped_fsyncs - rounds, r.log_fsyncs - fsyncs) == (3, 3 * len(led))

"""The simulator's checker is known to work: with a deliberately broken core or log (tests/sim/
planted.py, subclasses of the REAL parts) it finds a violation within a few seeds, names the
broken invariant, and the failing seed replays to the same violation."""

from __future__ import annotations

import pytest

from harness.sim.actors.raft_node import RaftNode
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.simulation import SimConfig, SimResult, run_seed
from tests.sim.planted import (
    DoubleVoteNode,
    LocalReadNode,
    SilentLocalReadNode,
    StaleLogVoteNode,
    UnsyncedLogNode,
)


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards
MAX_SEEDS = 60


def first_violation(node_class: type[RaftNode], voters: int = 3) -> SimResult | None:
    for seed in range(1, MAX_SEEDS + 1):
        result = run_seed(SimConfig(seed=seed, voters=voters), node_class)
        if not result.ok:
            return result
    return None


PLANTED = [
    # (broken node, voters, invariants that may catch it). Split votes, which the double vote
    # needs, are more frequent with 5 voters.
    (DoubleVoteNode, 5, {"ElectionSafety"}),
    (StaleLogVoteNode, 3, {"LeaderCompleteness", "StateMachineSafety", "LogMatching"}),
    (UnsyncedLogNode, 3, {"Durability"}),
    (LocalReadNode, 3, {"StaleRead"}),
    (SilentLocalReadNode, 3, {"Linearizability"}),
]


@pytest.mark.parametrize(
    ("node_class", "voters", "invariants"),
    PLANTED,
    ids=[
        "two-votes-per-epoch",
        "vote-ignores-log",
        "flush-without-fsync",
        "read-without-barrier",
        "read-without-barrier-history-only",
    ],
)
def test_planted_bug_is_caught(
    node_class: type[RaftNode], voters: int, invariants: set[str]
) -> None:
    found = first_violation(node_class, voters)
    assert found is not None, f"{node_class.__name__}: no violation in {MAX_SEEDS} seeds"
    assert found.violation is not None
    assert found.violation.invariant in invariants, str(found.violation)
    replay = run_seed(found.config, node_class)
    assert replay.violation == found.violation
    assert replay.digest == found.digest


def test_the_real_parts_pass_the_seeds_that_catch_the_planted_bugs() -> None:
    # Control: the violations above come from the planted bugs, not from the simulator.
    for node_class, voters, _ in PLANTED:
        found = first_violation(node_class, voters)
        assert found is not None
        assert run_seed(found.config).ok

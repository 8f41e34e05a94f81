"""Seeded simulation of the quorum with the leader's lingers on, as real nodes run them: the same
invariants after every event, the same liveness phase and linearizability check as
tests/sim/test_seeds.py, on every voter and observer.

- RaftConfig.hw_linger_ms (real nodes: 5 ms): a lingering HW only delays what a follower knows;
  it must never let one learn an HW the leader did not reach, nor stall convergence.
- RaftConfig.spare_voter_linger_ms (real nodes: 5 ms, beside the HW linger): a spare voter only
  gets its copy later; that must never change what commits, lose a committed entry across
  crashes and elections, or stall convergence (a voter that waits must still catch up)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker
from harness.sim.runs.simulation import SimConfig, run_seed
from quorum.raft.config import RaftConfig

NodeFactory = Callable[[int, Sequence[int], RaftConfig, SafetyChecker], RaftNode]


def lingering_node(node_id: int, voter_ids: Sequence[int], raft_config: RaftConfig,
                   checker: SafetyChecker) -> RaftNode:  # fmt: skip
    # A linger below and above the long poll (fetch_max_wait_ms): both paths of on_fetch.
    linger = (1, 5, raft_config.fetch_max_wait_ms * 2)[node_id % 3]
    return RaftNode(node_id, voter_ids, replace(raft_config, hw_linger_ms=linger), checker)


def thrifty_node(node_id: int, voter_ids: Sequence[int], raft_config: RaftConfig,
                 checker: SafetyChecker) -> RaftNode:  # fmt: skip
    # Lingers below and above the long poll (fetch_max_wait_ms): both ways a spare is served.
    spare = (2, 7, raft_config.fetch_max_wait_ms * 2)[node_id % 3]
    config = replace(raft_config, hw_linger_ms=5, spare_voter_linger_ms=spare)
    return RaftNode(node_id, voter_ids, config, checker)


def assert_safe_and_converged(seed: int, node: NodeFactory) -> None:
    config = SimConfig(seed=seed, voters=5 if seed % 5 == 0 else 3)
    result = run_seed(config, node)
    assert result.ok, f"{result.violation}\n" + "\n".join(result.trace_tail)
    assert result.stats.get("committed", 0) > 0


@pytest.mark.parametrize("seed", range(500, 620))
def test_runs_with_hw_linger_keep_every_invariant_and_converge(seed: int) -> None:
    assert_safe_and_converged(seed, lingering_node)


@pytest.mark.parametrize("seed", range(700, 900))
def test_runs_with_spare_voters_keep_every_invariant_and_converge(seed: int) -> None:
    assert_safe_and_converged(seed, thrifty_node)

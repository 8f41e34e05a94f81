"""Seeded simulation of the quorum with RaftConfig.hw_linger_ms on (real nodes run with 5 ms):
the same invariants after every event, the same liveness phase and linearizability check as
tests/sim/test_seeds.py, on every voter and observer. A lingering HW only delays what a follower
knows; it must never let one learn an HW the leader did not reach, nor stall convergence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker
from harness.sim.runs.simulation import SimConfig, run_seed
from quorum.raft.config import RaftConfig

SEEDS = range(500, 620)


def lingering_node(node_id: int, voter_ids: Sequence[int], raft_config: RaftConfig,
                   checker: SafetyChecker) -> RaftNode:  # fmt: skip
    # A linger below and above the long poll (fetch_max_wait_ms): both paths of on_fetch.
    linger = (1, 5, raft_config.fetch_max_wait_ms * 2)[node_id % 3]
    return RaftNode(node_id, voter_ids, replace(raft_config, hw_linger_ms=linger), checker)


@pytest.mark.parametrize("seed", SEEDS)
def test_runs_with_hw_linger_keep_every_invariant_and_converge(seed: int) -> None:
    config = SimConfig(seed=seed, voters=5 if seed % 5 == 0 else 3)
    result = run_seed(config, lingering_node)
    assert result.ok, f"{result.violation}\n" + "\n".join(result.trace_tail)
    assert result.stats.get("committed", 0) > 0

"""Seeded simulation of the quorum with RaftConfig.spare_voter_linger_ms on, beside the HW linger
as real nodes run them (2 ms and 5 ms): the same invariants after every event, the same liveness
phase and linearizability check as tests/sim/test_seeds.py, on every voter and observer. A spare
voter only gets its copy later; that must never change what commits, lose a committed entry
across crashes and elections, or stall convergence (a voter that waits must still catch up)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker
from harness.sim.runs.simulation import SimConfig, run_seed
from quorum.raft.config import RaftConfig

SEEDS = range(700, 900)


def thrifty_node(node_id: int, voter_ids: Sequence[int], raft_config: RaftConfig,
                 checker: SafetyChecker) -> RaftNode:  # fmt: skip
    # Lingers below and above the long poll (fetch_max_wait_ms): both ways a spare is served.
    spare = (2, 7, raft_config.fetch_max_wait_ms * 2)[node_id % 3]
    config = replace(raft_config, hw_linger_ms=5, spare_voter_linger_ms=spare)
    return RaftNode(node_id, voter_ids, config, checker)


@pytest.mark.parametrize("seed", SEEDS)
def test_runs_with_spare_voters_keep_every_invariant_and_converge(seed: int) -> None:
    config = SimConfig(seed=seed, voters=5 if seed % 5 == 0 else 3)
    result = run_seed(config, thrifty_node)
    assert result.ok, f"{result.violation}\n" + "\n".join(result.trace_tail)
    assert result.stats.get("committed", 0) > 0

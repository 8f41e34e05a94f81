"""`kraftlab sim matrix` (harness/sim/runs/matrix.py, harness/cli/sim_matrix.py): the matrix enumeration, one
valid summary row per run in the run-summary schema, determinism, and the CLI writing Parquet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.results.schema import read_dataset, validate_row
from harness.sim.checks.replicas import ReplicaChecker
from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs import cluster as cluster_module
from harness.sim.runs.matrix import DEFAULT_SETTINGS, MatrixSpec, default_spec, run_one, summarize
from harness.sim.runs.runner import quiet_logging
from harness.sim.runs.scenario_run import ScenarioConfig, ScenarioRun, run_scenario


@pytest.fixture(autouse=True)
def _quiet_logging() -> None:
    quiet_logging()  # tests/conftest.py restores the previous configuration afterwards


def test_full_matrix_is_the_whole_product() -> None:
    spec = MatrixSpec(seeds=1)
    configs = spec.configs()
    classic = [c for c in configs if c.replication_mode != "raft"]
    # 2 modes x 2 acks x 2 minISR x 2 unclean x 2 ELR x 2 RF; nemesis `none` has no duration.
    assert len(classic) == 64 * (1 + (len(NEMESES) - 1) * 3)
    # raft mode: 2 acks x 2 minISR x 2 RF (no unclean election, no ELR, leader epochs on).
    raft = [c for c in configs if c.replication_mode == "raft"]
    assert len(raft) == 8 * (1 + (len(NEMESES) - 1) * 3)
    assert all(not c.unclean_leader_election and not c.eligible_leader_replicas
               and c.leader_epoch_enable for c in raft)
    assert len({c.key() for c in configs}) == len(configs)


def test_default_matrix_has_the_three_modes_and_every_nemesis() -> None:
    configs = default_spec(seeds=2).configs()
    assert {c.replication_mode for c in configs} == {"isr", "quorum", "raft"}
    assert {c.nemesis for c in configs} == set(NEMESES)
    assert len(configs) == len(DEFAULT_SETTINGS) * (1 + (len(NEMESES) - 1) * 2) * 2


def test_same_config_same_history_and_row() -> None:
    config = ScenarioConfig(seed=5, acks="1", min_insync_replicas=1, nemesis="zombie-leader",
                           fault_duration_ms=1000)
    a, b = run_scenario(config), run_scenario(config)
    assert [e.to_json() for e in a.history.events] == [e.to_json() for e in b.history.events]
    row_a = dataclasses.replace(summarize(a), wall_duration_ms=0)
    row_b = dataclasses.replace(summarize(b), wall_duration_ms=0)
    assert row_a == row_b


def test_summary_row_follows_the_schema_and_counts_the_loss() -> None:
    out = run_one(ScenarioConfig(seed=1, acks="1", min_insync_replicas=1, nemesis="zombie-leader",
                                fault_duration_ms=5000))
    row = out.row
    validate_row(row)
    assert row.lost_writes > 0 and row.leader_elections >= 1
    assert row.heal_ms == row.fault_end_ms == 8000 and row.fault_start_ms == 3000
    assert sum(s.writes_succeeded for s in row.per_second) == row.acked_writes
    assert row.nemesis_timeline[0].kind == "partition"
    assert out.invariant_violations == ()


def test_cli_writes_rows_readable_by_the_schema_reader(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows"
    code = main(["sim", "matrix", "--out", str(out), "--modes", "isr,quorum", "--acks", "all",
                 "--min-isr", "2", "--unclean", "false", "--elr", "false", "--rf", "3",
                 "--nemeses", "none,kill-leader", "--durations", "1", "--seeds", "2",
                 "--jobs", "2"])
    assert code == 0
    rows = read_dataset(out)
    assert len(rows) == 2 * 2 * 2
    assert {r.nemesis for r in rows} == {"none", "kill-leader"}
    assert all(r.lost_writes == 0 for r in rows)
    assert "simulated s per wall s" in capsys.readouterr().out


def test_cli_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "matrix", "--out", str(tmp_path), "--nemeses", "gremlins"]) == 2
    assert "INVALID_REQUEST" in capsys.readouterr().err
    assert main(["sim", "matrix", "--out", str(tmp_path), "--seeds", "0"]) == 2


def test_compare_index_reports_the_matrix_speed_from_the_rows(tmp_path: Path) -> None:
    # `kraftlab compare` names the matrix's runs and speed in its index, for a file or a dir.
    from harness.results.schema import write_dataset
    from harness.study.compare import matrix_speed

    rows = [run_one(ScenarioConfig(seed=s, nemesis="none")).row for s in (1, 2)]
    path = write_dataset(rows, tmp_path / "runs", part="local")
    total_s = sum(r.duration_ms for r in rows) / 1000  # 2 x 11 s of workload
    assert total_s == 22.0
    assert matrix_speed(path, 0.5) == "2 runs, 0 s wall, 44 simulated workload s per wall s"
    assert matrix_speed(tmp_path / "runs", 2.0) == \
        "2 runs, 2 s wall, 11 simulated workload s per wall s"


def test_matrix_runs_on_a_raft_quorum_unless_told_abstract(tmp_path: Path) -> None:
    configs = default_spec(seeds=1).configs()
    assert {c.metadata for c in configs} == {"raft"}
    assert configs[0].key().endswith("-j500-raft-s1")
    assert {c.metadata for c in default_spec(1, "abstract").configs()} == {"abstract"}
    out = tmp_path / "rows"
    common = ["sim", "matrix", "--modes", "isr", "--acks", "all", "--min-isr", "2",
              "--unclean", "false", "--elr", "false", "--rf", "3", "--nemeses", "none",
              "--seeds", "1", "--jobs", "1"]
    assert main([*common, "--out", str(out / "raft")]) == 0
    assert main([*common, "--out", str(out / "abstract"), "--metadata", "abstract"]) == 0
    raft, abstract = read_dataset(out / "raft"), read_dataset(out / "abstract")
    assert [(r.metadata_quorum, r.run_id.endswith("-raft-s1")) for r in raft] == [("raft", True)]
    assert [(r.metadata_quorum, "raft" in r.run_id) for r in abstract] == [("abstract", False)]


def _raft_sim(nemesis: str, seed: int = 1) -> ScenarioRun:
    return ScenarioRun(ScenarioConfig(seed=seed, nemesis=nemesis, fault_duration_ms=5000,
                                        start_jitter_ms=500, metadata="raft"))


def test_controller_nemeses_act_on_the_raft_voters() -> None:
    # isolate-controller-leader: the active voter is cut from every voter and broker for the
    # fault; the others elect a new active controller of a higher epoch.
    sim = _raft_sim("isolate-controller-leader")
    cluster = sim.cluster
    assert cluster.voters and cluster.abstract is None
    seen: dict[str, tuple[int | None, int]] = {}

    def look(at: str) -> None:
        active = cluster.active_controller()
        epochs = [node.epoch for node in cluster.voters.values() if node.up]
        seen[at] = (active, max(epochs))

    cluster.world.queue.call_at(2999, look, "before")
    cluster.world.queue.call_at(4500, look, "during")
    result = sim.run()
    (old, old_epoch), (new, new_epoch) = seen["before"], seen["during"]
    assert old is not None and new is not None and new != old and new_epoch > old_epoch
    assert [(s.start_ms, s.end_ms, s.kind) for s in result.timeline] == [
        (3000, 8000, "partition")]
    assert result.lost_writes == 0 and cluster.stats["controller_epochs"] >= 2

    # metadata-quorum-down: a majority of the voters crashed for the fault, back at its end.
    sim = _raft_sim("metadata-quorum-down")
    voters = sim.cluster.voters
    up: dict[int, int] = {}
    for t in (2999, 4000, 8100):
        sim.cluster.world.queue.call_at(t, lambda t=t: up.__setitem__(
            t, sum(node.up for node in voters.values())))
    sim.run()
    assert up == {2999: 3, 4000: 1, 8100: 3}

    # zombie-leader: the partition leader is cut from every voter (not from "controller 0").
    sim = _raft_sim("zombie-leader")
    world = sim.cluster.world
    cuts: list[set[tuple[int, int]]] = []
    world.queue.call_at(4000, lambda: cuts.append(set(world.network.describe_cut())))
    result = sim.run()
    leader = {b for pair in cuts[0] for b in pair if b in sim.cluster.brokers}
    assert len(leader) == 1
    voter_ids = world.controller_ids
    assert cuts[0] == {(*leader, v) for v in voter_ids} | {(v, *leader) for v in voter_ids}
    assert result.leader_elections >= 1


class _PrefixPinned(ReplicaChecker):
    """Replica checks that never learn of a loss: divergence-below-hw stays an invariant."""

    prefix_may_change = property(lambda self: False, lambda self, value: None)


def test_divergence_below_hw_is_an_invariant_only_without_legitimate_loss(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An unclean election hands leadership to a shorter log: the new leader reuses the lost
    # offsets, so records below the old HW change. That is the loss (lost_writes), counted
    # apart, not a broken invariant that would fail `kraftlab sim matrix`.
    config = ScenarioConfig(seed=1, acks="all", min_insync_replicas=1,
                           unclean_leader_election=True, nemesis="isolate-partition-leader",
                           fault_duration_ms=5000, start_jitter_ms=500)
    sim = ScenarioRun(config)
    result = sim.run()
    assert result.unclean_elections == 1 and result.lost_writes > 0
    assert "divergence-below-hw" not in result.violations
    assert sim.cluster.replicas.counters.divergence_after_loss == 18
    assert run_one(config).invariant_violations == ()
    # The same rewrite where the prefix must hold is reported, offset by offset.
    monkeypatch.setattr(cluster_module, "ReplicaChecker", _PrefixPinned)
    pinned = ScenarioRun(config)
    assert pinned.run().violations["divergence-below-hw"] == 18
    assert pinned.cluster.replicas.counters.divergence_after_loss == 0

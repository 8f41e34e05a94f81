"""Real-process Jepsen queue runs of the staged faults (harness/jepsen/staged.py): the recipes of
docs/jepsen.md "Recipes", each one run, bounded (time limit 30 s, every stage's wait bounded by
staged.STAGE_TIMEOUT_S, the run by the runner's own timeout), on 3 controllers + 3 brokers. A run
ends POST_HEAL_S after its fault's heal (`RunOptions.stop_when`), not at the time limit.

- KIP-966 (`staggered-isr-drop`, RF 3, min.insync.replicas=2, acks=all, unclean election on):
  without ELR the controller elects the follower that left the ISR first and the writes the
  other follower acknowledged are lost; on a cluster with eligible.leader.replicas.enable=true
  the eligible follower is elected and nothing is lost.
- KIP-101 (`truncate-restart-then-leader-crash`, RF 2, unclean election on): with
  leader.epoch.enable=false and min.insync.replicas=2 the restarted follower truncates to its
  high watermark and acknowledged writes are lost; with min.insync.replicas=1 the replicas also
  diverge below the high watermark (the checker's `replica-divergence`, from every replica's own
  log); with leader epochs (min.insync.replicas=2) neither happens.

Each assertion names the elected broker too, so a run that did not stage what it claims fails
for that reason, not for a verdict that happens to match. The runs without ELR share the
package's queue cluster (tests/jepsen/conftest.py); the ELR cluster is this module's own, and a
finalizer SIGKILLs every PID of it still alive.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import load_history
from harness.check.queue import check_queue
from harness.jepsen.runner import DEFAULT_OVERRIDES, RunOptions, RunResult, bring_up, run
from harness.jepsen.workload_queue import QueueOptions
from tests.jepsen.conftest import healed_then_written
from tests.live import kill_recorded

pytestmark = pytest.mark.integration

ELR = {**DEFAULT_OVERRIDES, "eligible.leader.replicas.enable": "true"}
POST_HEAL_S = 2.0  # writes after the heal, to the newly elected leader
# The staggered drop needs only writes before the fault (docs/jepsen.md's recipe: --lead-in 2);
# KIP-101's follower truncates to a high watermark checkpointed every second on the queue
# workload's brokers (replica.high.watermark.checkpoint.interval.ms, QUEUE_OVERRIDES), so its
# lead-in outlasts one checkpoint.
STAGGER_LEAD_IN_S = 2.0
KIP101_LEAD_IN_S = 2.5


def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str,
             overrides: dict[str, str]) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp(name)
    try:
        bring_up(RunOptions(out_dir=data_dir, workload="queue", overrides=overrides), data_dir)
        yield data_dir
    finally:
        kill_recorded(data_dir)


@pytest.fixture(scope="module")
def elr_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from _cluster(tmp_path_factory, "staged-elr", ELR)


def staged_run(out: Path, data_dir: Path, nemesis: str, topic: str, lead_in_s: float,
               overrides: dict[str, str] | None = None, **queue: Any) -> RunResult:
    options = RunOptions(
        out_dir=out, workload="queue", nemesis=nemesis, time_limit_s=30.0, seed=1,
        data_dir=data_dir, overrides=overrides or dict(DEFAULT_OVERRIDES),
        queue=QueueOptions(topic=topic, partitions=3, producers=3, consumers=2, rate=60.0,
                           op_timeout_s=2.5, acks="all", unclean_leader_election=True,
                           **queue),
        # one fault: a lead-in for writes, the stages, a short hold, then no second fault; the
        # phase ends POST_HEAL_S after the heal (the time limit only bounds a slow run)
        fault_s=(2.0, 2.0), quiet_s=(60.0, 60.0), lead_in_s=lead_in_s,
        stop_when=healed_then_written(POST_HEAL_S),
    )
    return run(options)


def stages(out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fault as applied, its heal), from the history's nemesis events."""
    done = [op for op in load_history(out / "history.jsonl")
            if op.process == "nemesis" and isinstance(op.value, dict) and "result" in op.value]
    applied = next(op.value for op in done if op.f == "start-staged")
    healed = next(op.value for op in done if op.f == "stop-staged")
    return applied, healed["result"]


def anomaly_counts(result: RunResult) -> dict[str, int]:
    return {name: a["count"] for name, a in result.results["anomalies"].items()}


def test_staggered_drop_unclean_election_loses_what_elr_keeps(
    tmp_path: Path, queue_cluster: Path, elr_cluster: Path
) -> None:
    lossy = staged_run(tmp_path / "unclean", queue_cluster, "staggered-isr-drop", "stagger-u",
                       STAGGER_LEAD_IN_S)
    applied, healed = stages(tmp_path / "unclean")
    first, second = applied["followers"]
    # the follower that left first (and missed what the other acknowledged) was elected
    assert healed["leader"] == first, (applied, healed)
    assert (lossy.exit_code, lossy.verdict) == (1, "invalid")
    assert anomaly_counts(lossy)["lost-write"] > 0
    assert check_queue(load_history(tmp_path / "unclean" / "history.jsonl")).counts[
        "lost-write"] == anomaly_counts(lossy)["lost-write"]

    safe = staged_run(tmp_path / "elr", elr_cluster, "staggered-isr-drop", "stagger-e",
                      STAGGER_LEAD_IN_S, overrides=ELR)
    applied, healed = stages(tmp_path / "elr")
    first, second = applied["followers"]
    assert healed["leader"] == second, (applied, healed)  # the eligible replica
    r = safe.results
    assert (safe.exit_code, safe.verdict) == (0, "valid"), json.dumps(r["anomalies"])[:2000]
    assert r["drain_complete"] and r["replica_check"]["counts"] == {}
    assert r["summary_row"]["lost_writes"] == 0


def test_kip101_pre_0_11_truncation_loses_and_diverges_leader_epochs_do_not(
    tmp_path: Path, queue_cluster: Path
) -> None:
    nemesis = "truncate-restart-then-leader-crash"
    loss = staged_run(tmp_path / "loss", queue_cluster, nemesis, "kip101-loss", KIP101_LEAD_IN_S,
                      replication_factor=2, min_insync_replicas=2, leader_epoch_enable=False)
    applied, healed = stages(tmp_path / "loss")
    assert healed["leader"] == applied["followers"][0], (applied, healed)
    assert (loss.exit_code, loss.verdict) == (1, "invalid")
    assert anomaly_counts(loss)["lost-write"] > 0

    diverge = staged_run(tmp_path / "diverge", queue_cluster, nemesis, "kip101-div", KIP101_LEAD_IN_S,
                         replication_factor=2, min_insync_replicas=1, leader_epoch_enable=False)
    applied, healed = stages(tmp_path / "diverge")
    assert healed["leader"] == applied["followers"][0], (applied, healed)
    counts = anomaly_counts(diverge)
    assert counts["replica-divergence"] > 0 and counts["lost-write"] > 0
    example = diverge.results["anomalies"]["replica-divergence"]["examples"][0]
    assert example["partition"] == f"kip101-div-{applied['partition']}"
    assert len(set(example["values"].values())) == 2  # the two replicas disagree

    fixed = staged_run(tmp_path / "fixed", queue_cluster, nemesis, "kip101-fixed", KIP101_LEAD_IN_S,
                       replication_factor=2, min_insync_replicas=2)
    applied, healed = stages(tmp_path / "fixed")
    assert healed["leader"] == applied["followers"][0], (applied, healed)
    r = fixed.results
    assert (fixed.exit_code, fixed.verdict) == (0, "valid"), json.dumps(r["anomalies"])[:2000]
    assert r["drain_complete"] and r["replica_check"]["counts"] == {}
    assert r["leader_epoch_enable"] is True and loss.results["leader_epoch_enable"] is False

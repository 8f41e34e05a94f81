"""Real-process Jepsen runs of the `queue` workload: 3 controllers + 3 brokers on loopback.

One cluster (tests/jepsen/conftest.py `queue_cluster`, shared with test_run_queue_raft.py and
test_run_staged.py) serves every run; every run creates its own topic, so runs never see each
other's values. Runs are short: one fault of 3.5-4.5 s (longer than
broker.session.timeout.ms=3000 and replica.lag.time.max.ms=2000, so a cut-off or killed leader
is really fenced and replaced), then the run ends 2 s of writes after its heal (a 10 s time
limit bounds a slow heal); the fault-free control writes for 4 s.

- (a) the safe configuration (acks=all, min.insync.replicas=2, RF 3, unclean off, idempotence
  on) under no fault and under each broker-aware nemesis that exists in harness/jepsen/nemesis.py
  finds no anomaly, its final drain covers every partition, and the summary row says so;
- (b) acks=1 under `leader-cut-from-followers` (the leader broker cut from the other brokers and
  the controllers; clients still reach it), the cut held until a follower has been elected
  (`RunOptions.stop_when`, not a guessed duration), finds lost writes, and the test checks them
  against the partition as it really is after the run, read through another path (the leader
  broker's admin API): every lost value is absent from the log, and the drain saw exactly the
  log;
- the run through the real `kraftlab jepsen run` command: options, exit code, artefacts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminClient
from harness.check.history import load_history
from harness.check.queue import check_queue
from harness.jepsen.nemesis import FAULTS, ClusterNemesis
from harness.jepsen.runner import RunOptions, run
from harness.jepsen.workload_queue import QueueOptions
from harness.launcher import cluster as cl
from harness.results.schema import read_dataset
from tests.jepsen.conftest import healed_then_written

pytestmark = pytest.mark.integration

# Broker-aware faults (harness/jepsen/nemesis.py), run where they exist, plus the
# controller-side pause (SIGSTOP of a random controller) that every tree has.
WANTED = ("kill-partition-leader", "pause-partition-leader", "isolate-partition-leader",
          "leader-cut-from-followers", "leader-cut-from-followers-only", "zombie-leader",
          "isolate-controller-leader", "crash-unflushed", "pause")
SAFE_NEMESES = ("none",) + tuple(n for n in WANTED if n in FAULTS)
NO_FAULT_TIME_LIMIT_S = 4.0
POST_HEAL_S = 2.0  # writes (and the acks=all probe) after a one-fault run's heal
SAFE: dict[str, Any] = dict(acks="all", min_insync_replicas=2, replication_factor=3,
                            unclean_leader_election=False, idempotence=True)


def queue_run(out: Path, data_dir: Path, nemesis: str, topic: str, seed: int,
              fault_s: tuple[float, float] = (3.5, 4.5), time_limit_s: float = 8.0,
              stop_when: Any = None, one_fault: bool = False, **queue: Any) -> Any:  # fmt: skip
    """One queue run on the shared cluster. `one_fault`: the run ends POST_HEAL_S after its
    first fault's heal (no second fault, which the time limit would cut short of the session
    timeout anyway); the time limit then only bounds a slow heal."""
    quiet_s = (0.5, 1.0)
    if one_fault:
        assert stop_when is None, "one_fault brings its own stop condition"
        stop_when, quiet_s = healed_then_written(POST_HEAL_S), (60.0, 60.0)
    options = RunOptions(
        out_dir=out, workload="queue", nemesis=nemesis, time_limit_s=time_limit_s, seed=seed,
        data_dir=data_dir,
        queue=QueueOptions(topic=topic, partitions=3, producers=3, consumers=2, rate=60.0,
                           op_timeout_s=2.5, **queue),
        fault_s=fault_s, quiet_s=quiet_s, lead_in_s=1.0, stop_when=stop_when,
    )
    return run(options)


async def cut_leader_replaced(nemesis: ClusterNemesis) -> bool:
    """The active `leader-cut-from-followers` fault's partition has a new, real leader: the
    controllers fenced the cut-off broker and elected a follower while it is still cut off
    (asked of the active controller, linearizably: never a lagging follower's old image)."""
    fault = nemesis.active
    if fault is None or fault.name != "leader-cut-from-followers":
        return False
    return await nemesis.partition_leader_replaced()


def drained(ops: list[Any]) -> dict[str, list[tuple[int, Any]]]:
    """The final drain of each partition: {tp: [(offset, value), ...]}."""
    out: dict[str, list[tuple[int, Any]]] = {}
    for op in ops:
        if op.f == "poll" and op.type == "ok" and op.flag("final"):
            for tp, rows in op.value.items():
                out[tp] = [(o, v) for o, v in rows]
    return out


def leader_log(data_dir: Path, topic: str, partition: int) -> list[tuple[int, Any]]:
    """The partition as its leader broker serves it now, through the admin HTTP API."""
    cluster = cl.ClusterFile.load(data_dir)
    controller = cluster.controllers[0]
    meta = AdminClient(controller.host, controller.admin_port, 5.0).get_json(f"/topics/{topic}")
    leader = next(p["leader"] for p in meta["partitions"] if p["partition"] == partition)
    node = cluster.node(leader)
    client = AdminClient(node.host, node.admin_port, 5.0)
    rows: list[tuple[int, Any]] = []
    offset = 0
    while True:
        page = client.get_json(f"/topics/{topic}/partitions/{partition}/records?offset={offset}"
                               "&max_records=1000")
        for r in page["records"]:
            rows.append((r["offset"], int(r["value"])))
        if not page["records"] or rows[-1][0] + 1 >= page["high_watermark"]:
            return rows
        offset = rows[-1][0] + 1


@pytest.mark.parametrize("nemesis", SAFE_NEMESES)
def test_safe_configuration_finds_no_anomaly(
    tmp_path: Path, queue_cluster: Path, nemesis: str
) -> None:
    out = tmp_path / "out"
    topic = f"safe-{nemesis}"
    # Without a fault there is no fault window to outlast: the control needs only a few
    # seconds of writes, not a fault's window and the writes after its heal.
    limit_s = NO_FAULT_TIME_LIMIT_S if nemesis == "none" else 10.0
    result = queue_run(out, queue_cluster, nemesis, topic, seed=21, time_limit_s=limit_s,
                       one_fault=nemesis != "none", **SAFE)
    r = result.results
    assert r["anomalies"] == {}, json.dumps(r["anomalies"], default=str)[:3000]
    assert (result.exit_code, result.verdict) == (0, "valid")
    assert r["crashed_tasks"] == []
    assert r["drain_complete"] and r["drained_partitions"] == [f"{topic}-{p}" for p in range(3)]
    assert r["probe_recovery_s"] is not None
    ops = load_history(out / "history.jsonl")
    assert check_queue(ops).valid
    # not vacuous: acknowledged writes were checked, and after the heal every partition took
    # a write again (its acks=all probe) and was drained
    sent = [op for op in ops if op.f == "send" and op.type == "ok"]
    assert any(not op.flag("final") for op in sent)
    assert {op.value[0] for op in sent if op.flag("final")} == {f"{topic}-{p}" for p in range(3)}
    # every acknowledged send is in the final drain, at the offset its producer was told
    drain = drained(ops)
    at = {(tp, v): o for tp, rows in drain.items() for o, v in rows}
    for op in ops:
        if op.f == "send" and op.type == "ok":
            tp, (offset, value) = op.value
            assert at[(tp, value)] == offset
    if nemesis != "none":
        assert r["faults_applied"] >= 1
        assert r["summary"]["phases"]["during_fault"]["attempted"] > 0
    if nemesis in ("kill-partition-leader", "isolate-partition-leader"):
        assert r["partition_leader_elections"] >= 1  # the fault really moved a leader
    # the comparison's row: real-process source, the safe settings, nothing lost
    [row] = read_dataset(out / "summary")
    assert (row.source, row.acks, row.min_insync_replicas, row.replication_factor) == (
        "jepsen", "all", 2, 3)
    assert (row.lost_writes, row.duplicates, row.divergent_offsets) == (0, 0, 0)
    assert row.acked_writes == sum(1 for op in ops if op.f == "send" and op.type == "ok"
                                   and not op.flag("final"))
    assert sum(s.writes_succeeded for s in row.per_second) == row.acked_writes
    assert (row.heal_ms is None) == (nemesis == "none")


def test_acks_1_under_leader_cut_from_followers_loses_acknowledged_writes(
    tmp_path: Path, queue_cluster: Path
) -> None:
    out = tmp_path / "out"
    topic = "acks1-cut"
    # One cut, held until the controllers have fenced the cut-off leader (3 s broker session)
    # and elected a follower, while the old leader still acknowledges acks=1 writes; only then
    # healed. A condition, not a guessed duration: the 30 s limit only bounds a broken run.
    result = queue_run(out, queue_cluster, "leader-cut-from-followers", topic, seed=3,
                       fault_s=(60.0, 60.0), time_limit_s=30.0, stop_when=cut_leader_replaced,
                       acks="1", min_insync_replicas=1, replication_factor=3,
                       unclean_leader_election=False, idempotence=False)
    r = result.results
    assert r["faults_applied"] == 1
    assert r["stopped_early_s"] is not None, "no new leader was elected within the 30 s cut"
    assert (result.exit_code, result.verdict) == (1, "invalid"), r["anomalies"].keys()
    lost = r["checker"]["counts"]["lost-write"]
    assert lost > 0 and "lost-write" in r["anomalies"]
    assert r["drain_complete"] and r["partition_leader_elections"] >= 1
    assert r["crashed_tasks"] == []
    ops = load_history(out / "history.jsonl")
    drain = drained(ops)
    # The checker's verdict against what is really there: the partition as the leader serves
    # it after the run, read over HTTP (not the client the workload used).
    lost_values: dict[str, set[Any]] = {}
    full = check_queue(ops)
    assert full.counts["lost-write"] == lost
    for op in ops:
        if op.f == "send" and op.type == "ok":
            tp, (offset, value) = op.value
            if value not in {v for _, v in drain[tp]}:
                lost_values.setdefault(tp, set()).add(value)
    assert sum(len(v) for v in lost_values.values()) == lost
    for p in range(3):
        tp = f"{topic}-{p}"
        log = leader_log(queue_cluster, topic, p)
        assert log == drain[tp]  # the drain read exactly the log
        assert not lost_values.get(tp, set()) & {v for _, v in log}
    [row] = read_dataset(out / "summary")
    assert (row.acks, row.nemesis, row.lost_writes) == ("1", "leader-cut-from-followers", lost)
    assert row.recovery_time_ms is not None and row.fault_start_ms is not None


def test_queue_run_through_the_command(tmp_path: Path, queue_cluster: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness", "jepsen", "run", "--workload", "queue",
           "--nemesis", "none", "--time-limit", "3", "--seed", "5", "--partitions", "2",
           "--consumers", "1", "--concurrency", "2", "--rate", "40", "--acks", "all",
           "--min-insync-replicas", "2", "--out", str(out), "--data-dir", str(queue_cluster)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # the topic name is the default one; this is the only test that uses it
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith("VALID:")
    r = json.loads((out / "results.json").read_text())
    assert (r["workload"], r["partitions"], r["acks"], r["idempotence"]) == ("queue", 2, "all",
                                                                             True)
    assert r["producers"] == 2 and r["consumers"] == 1
    for name in ("history.jsonl", "report.html", "report.png", "summary.json"):
        assert (out / name).stat().st_size > 0, name
    [row] = read_dataset(out / "summary")
    assert row.nemesis == "none" and row.run_id == r["summary_row"]["run_id"]
    # the cluster was already running: the run left it running
    assert cl.running_nodes(cl.ClusterFile.load(queue_cluster))
    bad = subprocess.run(cmd[:-4] + ["--acks", "1", "--idempotence", "--out", str(tmp_path / "x"),
                                     "--data-dir", str(queue_cluster)],
                         capture_output=True, text=True, timeout=60, check=False, env=env)
    assert bad.returncode == 3 and "idempotence needs acks=all" in bad.stderr
    # the same topic again: its old records would pollute the new history, so it is refused
    again = subprocess.run(cmd[:-4] + ["--out", str(tmp_path / "y"), "--data-dir",
                                       str(queue_cluster)],
                           capture_output=True, text=True, timeout=60, check=False, env=env)
    assert again.returncode == 3 and "already exists" in again.stderr, again.stderr[-2000:]

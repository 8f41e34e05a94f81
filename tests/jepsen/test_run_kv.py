"""Real-process Jepsen runs of the `kv` workload (3 controllers on loopback, short runs).

- linearizable reads under leader isolation, halves and kill -9 of the leader: the checker
  finds nothing, every artefact is written, and the cluster is brought down;
- local reads while a follower is cut off (writes keep committing through the leader, the
  follower's image stays behind): the checker must call the history not linearizable and point
  at a stale read, through the real `kraftlab jepsen run` command and its exit code.
Each run is bounded (time limit 6-8 s, op timeout, recovery deadline); a finalizer SIGKILLs any
PID of the run's own cluster.json still alive, whatever happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.check.history import NEMESIS, load_history
from harness.check.linearizable import check_linearizable
from harness.check.models import get_model
from harness.jepsen.runner import DEFAULT_OVERRIDES, RunOptions, run
from harness.jepsen.workload_kv import KvOptions
from harness.launcher import cluster as cl
from harness.results.schema import read_dataset

pytestmark = pytest.mark.integration


def no_node_running(data_dir: Path) -> bool:
    return not cl.running_nodes(cl.ClusterFile.load(data_dir))


def test_linearizable_reads_under_partitions_and_kill_find_no_anomaly(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "out"
    options = RunOptions(
        # Seed 156 draws the three faults in this order, the third starting about 4.8 s in
        # (plus the API calls'), well inside the 8 s: each kind is exercised, not just named.
        out_dir=out, nemesis="isolate-leader,halves,kill-leader", time_limit_s=8.0, seed=156,
        data_dir=data_dir, kv=KvOptions(keys=3, concurrency=4, rate=40.0, op_timeout_s=2.0),
        fault_s=(1.5, 2.0), quiet_s=(0.5, 1.0), lead_in_s=0.5,
        # the admin API wants the bearer token on every write, as when bound off 127.0.0.1:
        # the workload and the nemesis must both send the cluster's token
        overrides={**DEFAULT_OVERRIDES, "kraftlab.admin.require.token": "true"},
    )
    result = run(options)
    r = result.results
    assert (result.exit_code, result.verdict, r["valid"], r["anomalies"]) == (0, "valid", True, {})
    assert r["recovered"] and r["faults_applied"] >= 3
    assert no_node_running(data_dir)  # the run brought its own cluster down
    for name in ("history.jsonl", "results.json", "report.html", "report.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "logs" / "controller-1.log").exists()
    # The history reads back with the checkers' parser, and their verdict agrees.
    ops = load_history(out / "history.jsonl")
    assert check_linearizable(ops, get_model("kv")).verdict == "valid"
    client = [op for op in ops if op.is_client]
    assert len(client) == r["summary"]["ops"] >= 100
    assert {op.f for op in client} == {"read", "write", "cas", "append"}
    nemesis_ops = [op for op in ops if op.process == NEMESIS]
    nemesis_fs = [op.f for op in nemesis_ops]
    started = [op.value["fault"] for op in nemesis_ops if op.f.startswith("start-")]
    assert started[:3] == ["isolate-leader", "halves", "kill-leader"]
    assert nemesis_fs[0] in ("start-partition", "start-kill") and nemesis_fs[-1] == "stop-all"
    assert nemesis_fs.count("start-partition") + nemesis_fs.count("start-kill") == r[
        "faults_applied"]
    # Faults really cost something, and everything came back after the heal.
    phases = r["summary"]["phases"]
    assert phases["during_fault"]["attempted"] > 0
    assert phases["during_fault"]["availability"] < 1.0
    assert phases["after_heal"]["ok"] == 3  # one final read per key
    saved = json.loads((out / "results.json").read_text())
    assert saved["summary"]["counts"] == r["summary"]["counts"]
    # The comparison's row: the metadata quorum as the data, linearizable, faults and a heal.
    [row] = read_dataset(out / "summary")
    assert (row.source, row.replication_mode, row.replication_factor, row.nemesis) == (
        "jepsen", "quorum", 3, "mixed")
    assert row.metadata_linearizable is True and row.stale_reads == 0
    assert len(row.nemesis_timeline) == r["faults_applied"]
    # Recovery from the fault's own heal to the first acknowledged write after it, as in the
    # simulator's rows (harness/jepsen/summary_row.py).
    assert row.heal_ms is not None and row.heal_ms == row.fault_end_ms
    after = [op.completion.time // 1_000_000 for op in client
             if op.f != "read" and op.type == "ok" and op.completion is not None
             and op.completion.time // 1_000_000 >= row.heal_ms]
    if after:
        assert row.recovery_time_ms == min(after) - row.heal_ms
    writes = [op for op in client if op.f != "read" and not op.flag("final")]
    assert sum(s.writes_attempted for s in row.per_second) == len(writes)
    assert sum(s.writes_succeeded for s in row.per_second) == row.acked_writes == sum(
        1 for op in writes if op.type == "ok")
    assert row.acked_writes > 0  # writes got through the token check
    assert not [op for op in ops if op.error == "SASL_AUTHENTICATION_FAILED"]


def test_local_reads_from_a_cut_off_follower_are_caught_as_stale(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness", "jepsen", "run", "--workload", "kv",
           "--nemesis", "isolate-follower", "--consistency", "local", "--time-limit", "6",
           "--fault-s", "4,4", "--lead-in", "0.5", "--seed", "7", "--concurrency", "4",
           "--out", str(out), "--data-dir", str(data_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith("INVALID:")
    assert "[  1.0s] ok" in proc.stderr  # progress was shown
    r = json.loads((out / "results.json").read_text())
    assert r["valid"] is False and r["consistency"] == "local"
    stale = r["anomalies"]["stale-read"]
    assert stale and all(row["op"].startswith("read() -> ") for row in stale)
    # each stale read names the controller that served it
    ops = load_history(out / "history.jsonl")
    assert all(ops[row["op_id"]].flag("node") in (1, 2, 3) for row in stale)
    assert (out / "linearizability.html").exists() and (out / "report.png").exists()
    [row] = read_dataset(out / "summary")
    assert row.metadata_linearizable is False and row.stale_reads == len(stale) > 0
    assert row.nemesis == "isolate-follower" and row.source == "jepsen"
    assert no_node_running(data_dir)
    # The linearizability checker, run on the file by its own command, agrees.
    check = subprocess.run(
        [sys.executable, "-m", "harness", "check", "linearizable", "--model", "kv",
         str(out / "history.jsonl")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert check.returncode == 1, check.stdout + check.stderr

"""`kraftlab compare` end to end: the live phase on real processes (the 3-controller check and
the three queue runs), a tiny matrix as Spark tasks on local[2] (every arm, two faults, 2 seeds),
the analysis in the same session, and the report's files; its exit code is 1 exactly when a
real-process run was not valid (or the live check failed). Also, without processes or Spark:
which outcomes make the command exit 1 (`problems`), and that `cmd_compare` returns it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.launcher import cluster as cl
from harness.results.schema import read_dataset, write_dataset
from harness.study import compare
from harness.study.compare import MatrixOutcome, problems
from harness.study.presets import preset_spec
from tests.needs import require_java
from tests.spark.conftest import clean_env
from tests.spark.fixture_runs import fixture_rows

ROOT = Path(__file__).resolve().parents[2]


def _kill_leftovers(live: Path) -> None:
    for cluster_json in live.rglob("cluster.json"):
        cluster = cl.ClusterFile.load(cluster_json.parent)
        for node in cluster.nodes:
            if cl.is_our_process(node.pid, node.config_file):
                assert node.pid is not None
                os.kill(node.pid, signal.SIGKILL)


@pytest.mark.integration
@pytest.mark.slow
def test_compare_end_to_end_with_the_live_phase(tmp_path: Path) -> None:
    require_java()
    out = tmp_path / "report"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "compare", "--preset", "tiny", "--seeds", "2",
             "--master", "local[2]", "--out", str(out)],
            cwd=tmp_path, env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True,
            text=True, timeout=1200)
    finally:
        _kill_leftovers(out / "live")
    said = done.stdout + done.stderr
    # Phase 1: the live check's report and the three real-process queue runs' files.
    live = json.loads((out / "live" / "report.json").read_text())
    assert (out / "live" / "report.md").is_file()
    verdicts = {}
    for mode in ("isr", "quorum", "raft"):
        run = out / "live" / "jepsen" / mode
        for name in ("report.html", "results.json", "history.jsonl"):
            assert (run / name).is_file(), f"{mode}: {name} missing\n{said[-3000:]}"
        verdicts[mode] = json.loads((run / "results.json").read_text())["verdict"]
    # Phase 2: 10 settings (raft's acks=all among them) x 2 faults x 2 seeds, written by Spark.
    rows = read_dataset(out / "runs")
    configs = preset_spec("tiny", 2).configs()
    assert sorted(r.run_id for r in rows) == sorted(c.key() for c in configs)
    assert len(rows) == 40 and list((out / "runs").glob("part-*.snappy.parquet"))
    # Phase 3: the analysis over both sources, and the index.
    analysis = out / "analysis"
    for name in ("compare.md", "groups.csv", "pairs.csv", "availability_vs_consistency.png",
                 "unavailability_by_nemesis.png", "loss_by_durability.png"):
        assert (analysis / name).stat().st_size > 0, name
    assert "jepsen: 2, sim: 36" in (analysis / "compare.md").read_text()
    index = (out / "report.md").read_text()
    assert "preset `tiny`, Spark tasks on `local[2]`" in index
    assert "[isr](live/jepsen/isr/report.html)" in index and "### sim" in index
    assert f"report: {out / 'report.md'}" in done.stdout
    # The exit code says whether every real-process run held.
    failed = not live["kv_all_ok"] or any(v != "valid" for v in verdicts.values())
    assert done.returncode == (1 if failed else 0), said[-3000:]
    for mode, verdict in verdicts.items():
        assert (f"FAILED: real-process queue run ({mode}) is {verdict}" in done.stdout) == (
            verdict != "valid")
    # Every process of the live phase's clusters is gone.
    for cluster_json in (out / "live").rglob("cluster.json"):
        assert not cl.running_nodes(cl.ClusterFile.load(cluster_json.parent))


@pytest.mark.integration
def test_compare_runs_matrix_and_analysis_in_one_spark_session(tmp_path: Path) -> None:
    require_java()
    # The default suite's smaller variant of the test above: no live phase, one run per arm of
    # the study, the rows given as a URI outside OUT (as `--rows hdfs://...` on a cluster).
    from harness.study.presets import preset_spec

    n = len(preset_spec("tiny", seeds=1, faults=("kill-leader",)).configs())
    out, rows = tmp_path / "report", tmp_path / "shared" / "rows"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "compare", "--preset", "tiny", "--faults",
         "kill-leader", "--seeds", "1", "--no-live", "--master", "local[2]", "--out", str(out),
         "--rows", rows.as_uri()],
        cwd=tmp_path, env=clean_env(PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(read_dataset(rows)) == n and not (out / "runs").exists()
    assert f"sim: {n}" in (out / "analysis" / "compare.md").read_text()
    lines = done.stderr.splitlines()
    # One session: started once, before the matrix; the analysis' stages follow in it.
    starts = [i for i, line in enumerate(lines) if line.endswith("] start Spark")]
    matrix = next(i for i, line in enumerate(lines)
                  if f"{n} runs as Spark tasks on local[2]" in line)
    assert len(starts) == 1 and starts[0] < matrix
    assert any(f"{n}/{n} runs" in line for line in lines[matrix:])
    index = (out / "report.md").read_text()
    assert "Spark tasks on `local[2]`" in index and f"`{rows.as_uri()}` ({n} runs" in index


def _run(mode: str, verdict: str, code: int) -> dict:
    return {"mode": mode, "out": Path("live/jepsen") / mode, "verdict": verdict,
            "exit_code": code, "row": {}}


MATRIX_OK = MatrixOutcome(Path("runs"), 36, 1.0, "spark", "local[2]")


@pytest.mark.parametrize(("live", "live_ok", "queue", "matrix", "expected"), [
    (Path("r.md"), True, [_run("isr", "valid", 0), _run("quorum", "valid", 0)], MATRIX_OK, []),
    (Path("r.md"), True, [_run("isr", "invalid", 1), _run("quorum", "valid", 0)], MATRIX_OK,
     ["real-process queue run (isr) is invalid (exit code 1; live/jepsen/isr/report.html)"]),
    (Path("r.md"), True, [_run("isr", "valid", 0), _run("quorum", "unknown", 2)], MATRIX_OK,
     ["real-process queue run (quorum) is unknown (exit code 2; "
      "live/jepsen/quorum/report.html)"]),
    (Path("r.md"), True, [{"mode": "isr", "out": Path("x"), "error": "no leader"}], MATRIX_OK,
     ["real-process queue run (isr) could not run: no leader",
      "real-process queue run (quorum) did not run"]),
    (None, True, [], MATRIX_OK,
     ["the live cluster check did not complete", "real-process queue run (isr) did not run",
      "real-process queue run (quorum) did not run"]),
    (Path("r.md"), False, [_run("isr", "valid", 0), _run("quorum", "valid", 0)], MATRIX_OK,
     ["a linearizable read on the live cluster did not return the written value"]),
    (Path("r.md"), True, [_run("isr", "valid", 0), _run("quorum", "valid", 0)],
     MatrixOutcome(Path("runs"), 36, 1.0, "spark", "local[2]", ("f1", "f2"), ("r: quorum-safety",)),
     ["2 simulated runs failed (replay commands above and in the report)",
      "1 simulator invariants broke (first: r: quorum-safety)"]),
])
def test_what_makes_compare_exit_1(live, live_ok, queue, matrix, expected) -> None:
    assert problems(True, live, live_ok, ("isr", "quorum"), queue, matrix) == expected


def test_a_skipped_live_phase_is_no_failure() -> None:
    assert problems(False, None, True, (), [], MATRIX_OK) == []


def test_cmd_compare_exits_1_when_a_real_run_is_invalid(tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "report"
    runs = out / "runs"
    write_dataset([r for r in fixture_rows() if r.source == "sim"], runs)
    (out / "analysis").mkdir(parents=True)
    (out / "analysis" / "compare.md").write_text("# compare\n")
    (out / "live").mkdir()
    monkeypatch.setattr(compare, "live_check", lambda where: (where / "report.md", True))
    monkeypatch.setattr(compare, "live_queue_runs", lambda where, modes, limit: [
        {**_run("isr", "invalid", 1), "out": where / "isr", "row": {"acked_writes": 9}},
        {**_run("quorum", "valid", 0), "out": where / "quorum", "row": {"acked_writes": 9}}])
    result = SimpleNamespace(report=out / "analysis" / "compare.md", sentences={"sim": ["x"]})
    monkeypatch.setattr(compare, "run_pipeline", lambda *a: (
        MatrixOutcome(runs, 16, 1.0, "spark", "local[2]"), result))
    parser = argparse.ArgumentParser()
    compare.add_options(parser)
    code = compare.cmd_compare(parser.parse_args(["--out", str(out), "--preset", "tiny"]))
    printed = capsys.readouterr().out
    assert code == 1
    assert "FAILED: real-process queue run (isr) is invalid (exit code 1;" in printed
    index = (out / "report.md").read_text()
    assert "## Failed (exit code 1)" in index and "queue run (isr) is invalid" in index

"""`kraftlab sim replay` without a browser: what it prints and writes, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.cli.sim_replay import SCENARIO_NAMES
from harness.sim.runs.recording import SCENARIOS


def test_the_parser_names_every_scenario_without_importing_the_simulator() -> None:
    assert tuple(sorted(SCENARIOS)) == SCENARIO_NAMES


def test_replay_of_a_scenario_prints_its_anomalies_and_writes_the_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "divergence.json"
    assert main(["sim", "replay", "--scenario", "kip101-divergence", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "leader.epoch.enable=false" in printed
    assert "  loss at frame 106 (2246 ms)" in printed
    assert "  divergence at frame 117 (2258 ms)" in printed
    doc = json.loads(out.read_text())
    assert doc["kind"] == "replay" and [a["frame"] for a in doc["anomalies"]] == [106, 117]
    assert doc["description"].startswith("RF 2, acks=all")


def test_replay_with_leader_epochs_finds_no_divergence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "replay", "--scenario", "kip101-loss", "--leader-epoch", "true"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "  no anomaly"


def test_an_unknown_nemesis_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "replay", "--seed", "1", "--nemesis", "meteor"]) == 2
    assert "unknown nemesis 'meteor'" in capsys.readouterr().err


def test_ui_refuses_a_missing_recording_or_cluster(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--replay", str(tmp_path / "none.json"), "--port", "0"]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main(["ui", "--data-dir", str(tmp_path), "--port", "0"]) == 1
    assert "no cluster in" in capsys.readouterr().err

"""The soak (harness/jepsen/soak.py, `kraftlab jepsen soak`): one cluster, Jepsen runs in rotation
under every nemesis group, the nodes' memory sampled.

- the memory verdict: growth per node from the start of the window (after the warm-up) to its
  end, medians of the edge samples so one outlier does not decide; a restart is counted; the
  bound holds only if every node stays under it;
- the rotation names, together, every fault the nemesis knows;
- a short soak (60 s, slow): every run valid with no anomaly, kv and queue both ran, faults of
  several kinds applied, every node sampled, the controllers judged (brokers restarted late by
  the broker faults may be too young to be), the plot and the CSV written, memory within a
  generous bound.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.jepsen.nemesis import FAULTS, STAGED_FAULTS, parse_nemesis
from harness.jepsen.soak import ROTATION, SoakOptions, anomaly_count, memory_report, soak


def _samples(node: int, pid: int, start_s: float, kbs: list[int]) -> list[tuple[float, int, int, int]]:
    return [(start_s + i, node, pid, kb) for i, kb in enumerate(kbs)]


def test_growth_is_the_median_of_the_last_samples_minus_the_first_after_warmup() -> None:
    steady = _samples(1, 100, 0, [90_000] * 10 + [51_200] * 5 + [51_300] * 10 + [52_224] * 5)
    leaking = _samples(2, 200, 0, [51_200] * 10 + [51_200 + 1024 * i for i in range(20)])
    report = memory_report(steady + leaking, warmup_s=10, max_growth_mb=10)
    one, two = report["nodes"]["1"], report["nodes"]["2"]
    assert (one["start_mb"], one["end_mb"], one["growth_mb"]) == (50.0, 51.0, 1.0)  # warm-up ignored
    assert two["growth_mb"] == 15.0 and two["peak_mb"] == 69.0
    assert report["max_growth_mb"] == 15.0 and report["within_bound"] is False
    assert memory_report(steady, warmup_s=10, max_growth_mb=10)["within_bound"] is True


def test_a_restarted_process_is_measured_once_past_its_own_climb() -> None:
    # node 3 restarts at 12 s; its new process climbs from 10 MB for 10 s, then holds 60 MB
    climb = [10_240 + 5_120 * i for i in range(10)] + [61_440] * 20
    restarted = _samples(3, 1, 0, [61_440] * 12) + _samples(3, 2, 12, climb)
    report = memory_report(restarted + _samples(4, 9, 0, [1] * 3), warmup_s=5, max_growth_mb=5)
    node = report["nodes"]["3"]
    assert node["restarts"] == 1 and node["growth_mb"] == 0.0  # steady state to steady state
    assert node["samples"] == 7 + 20  # the old process's 5-11 s, the new one's from 22 s
    assert report["nodes"]["4"] == {"samples": 0}  # too few samples: not judged, and named
    assert report["unjudged"] == ["4"] and report["within_bound"] is True
    assert memory_report(_samples(4, 9, 0, [1] * 3), 5, 5)["within_bound"] is False  # nobody judged


def test_the_rotation_covers_every_fault_and_both_workloads() -> None:
    named = {f for _, group in ROTATION for f in parse_nemesis(group)}
    # Every fault but the staged ones: those exist to show unsafe settings losing data
    # (docs/jepsen.md "Recipes"); the soak runs safe settings only.
    assert named == set(FAULTS) - set(STAGED_FAULTS)
    assert {w for w, _ in ROTATION} == {"kv", "queue"}


def test_anomalies_are_counted_from_either_checker() -> None:
    assert anomaly_count({"count": 3, "examples": []}) == 3  # the queue checker's entries
    assert anomaly_count([{"op": "read"}, {"op": "read"}]) == 2  # the kv checker's rows
    assert anomaly_count("stale") == 1


@pytest.mark.slow
@pytest.mark.integration
def test_a_short_soak_finds_no_anomaly_and_flat_memory(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    result = soak(SoakOptions(out_dir=out, duration_s=60, segment_s=15, warmup_s=20,
                              sample_s=0.5, max_growth_mb=40, seed=1))
    r = result.results
    assert result.exit_code == 0, json.dumps(
        {"verdicts": r["verdicts"], "memory": r["memory"], "errors": [
            (s["index"], s["verdict"], s["error"], s["anomalies"]) for s in r["segments"]]})
    assert r["anomalies"] == 0 and set(r["verdicts"]) == {"valid"}
    assert [s["workload"] for s in r["segments"]][:2] == ["kv", "queue"]
    assert len(r["faults_applied"]) >= 3  # several kinds of fault really ran
    memory = r["memory"]
    assert set(memory["nodes"]) == {"1", "2", "3", "101", "102", "103"}
    # broker faults never restart a controller: the three are judged whatever else happens
    assert not {"1", "2", "3"} & set(memory["unjudged"])
    assert all(memory["nodes"][n]["samples"] >= 10 for n in ("1", "2", "3"))
    assert memory["within_bound"] and memory["max_growth_mb"] < 40
    assert (out / "memory.png").stat().st_size > 0
    with (out / "memory.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {row["node"] for row in rows} == set(memory["nodes"])
    assert json.loads((out / "soak.json").read_text())["anomalies"] == 0
    for seg in r["segments"]:
        assert (out / seg["out_dir"] / "results.json").exists()

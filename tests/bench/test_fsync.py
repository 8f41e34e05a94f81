"""The fsync latency distribution: its quantile table and inverse-CDF draws on hand-made
samples, the file format, the shipped default, and `kraftlab bench fsync --write` end to end."""

from __future__ import annotations

import json

import pytest

from harness.cli.main import main
from harness.results import fsync as fs


def case_of(values: list[float], batch: int = 512, pre: bool = False) -> fs.FsyncCase:
    return fs.FsyncCase.from_samples(batch, pre, values)


def test_quantiles_and_draws_interpolate_the_samples():
    c = case_of([float(v) for v in range(101, 0, -1)])  # 1..101 in any order
    assert c.samples == 101 and c.mean_us == 51.0
    assert c.percentile_us(0.0) == 1.0
    assert c.percentile_us(0.5) == 51.0
    assert c.percentile_us(0.99) == 100.0
    assert c.percentile_us(1.0) == 101.0
    # Between the table's q=0.25 (26) and q=0.26 (27).
    assert c.draw_us(0.255) == pytest.approx(26.5)
    # Past p99: p99.5 = 100.5, p99.9 = 100.9.
    assert c.draw_us(0.997) == pytest.approx(100.5 + 0.4 * 2 / 4)
    assert c.to_json()["percentiles_us"] == {"p0": 1.0, "p50": 51.0, "p90": 91.0, "p99": 100.0,
                                             "p99.9": 100.9, "p99.99": 101.0, "p100": 101.0}


def test_draws_follow_a_skewed_distribution():
    # 90 fast syncs of 100 µs and 10 slow ones of 10 ms: a tenth of uniform draws are slow,
    # up to the table's resolution (the step is smeared over the percentiles 89 to 91).
    c = case_of([100.0] * 90 + [10_000.0] * 10)
    draws = [c.draw_us((i + 0.5) / 1000) for i in range(1000)]
    assert draws == sorted(draws)
    assert sum(d == 100.0 for d in draws) == 890
    assert sum(d == 10_000.0 for d in draws) == 90
    assert all(100.0 < d < 10_000.0 for d in draws[890:910])
    with pytest.raises(ValueError):
        c.draw_us(1.5)


def test_histogram_counts_every_sample_in_log_bins():
    h = fs.log_histogram(sorted([1.0, 5.0, 10.0, 99.0, 100.0, 1000.0]))
    assert sum(h["counts"]) == 6
    assert len(h["edges_us"]) == len(h["counts"]) + 1
    assert h["edges_us"][0] <= 1.0 and h["edges_us"][-1] >= 1000.0


def test_file_round_trip_and_refusals(tmp_path):
    profile = fs.FsyncProfile({"date": "d", "command": "c", "machine": {}},
                              (case_of([1.0, 2.0, 3.0]), case_of([5.0, 6.0], 1 << 20, True)))
    path = tmp_path / "d.json"
    path.write_text(profile.dumps())
    assert fs.load(path) == profile
    data = json.loads(path.read_text())
    data["version"] = 2
    with pytest.raises(fs.FsyncFileError, match="version"):
        fs.FsyncProfile.from_json(data)
    data["version"] = 1
    data["cases"][0]["quantiles_us"][3][1] = 0.5  # a decreasing table
    with pytest.raises(fs.FsyncFileError, match="must not decrease"):
        fs.FsyncProfile.from_json(data)


def test_case_picks_the_nearest_batch_size_with_that_preallocation():
    cases = tuple(case_of([float(b)], b, pre) for b in (512, 16_384, 1 << 20)
                  for pre in (False, True))
    profile = fs.FsyncProfile({}, cases)
    assert (profile.case(100).batch_bytes, profile.case(100).preallocated) == (512, False)
    assert profile.case(20_000, preallocated=True).batch_bytes == 16_384
    assert profile.case(600_000).batch_bytes == 1 << 20
    only_appended = fs.FsyncProfile({}, (case_of([1.0], 512, False),))
    assert only_appended.case(512, preallocated=True).preallocated is False


def test_the_shipped_default_says_how_it_was_measured():
    profile = fs.load_default()
    m = profile.measured
    assert m["command"].startswith("kraftlab bench fsync")
    assert m["date"] and m["machine"]["fs_type"] and m["machine"]["cpus"] >= 1
    appended = profile.case(16_384)
    assert (appended.batch_bytes, appended.preallocated) == (16_384, False)
    assert appended.samples >= 1000
    assert 0 < appended.percentile_us(0.5) <= appended.percentile_us(0.99)


def test_bench_writes_a_distribution_the_simulator_can_load(tmp_path, capsys):
    out = tmp_path / "fsync.json"
    code = main(["bench", "fsync", "--samples", "3", "--batch-bytes", "512,4096",
                 "--dir", str(tmp_path), "--write", str(out)])
    assert code == 0
    profile = fs.load(out)
    assert [(c.batch_bytes, c.preallocated, c.samples) for c in profile.cases] == [
        (512, False, 3), (512, True, 3), (4096, False, 3), (4096, True, 3)]
    assert profile.measured["command"] == (
        f"kraftlab bench fsync --batch-bytes 512,4096 --samples 3 --preallocated both "
        f"--dir {tmp_path} --write fsync.json")
    assert list(tmp_path.iterdir()) == [out]  # the case files are gone
    assert "written:" in capsys.readouterr().out

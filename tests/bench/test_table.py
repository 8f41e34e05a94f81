"""`kraftlab bench table`'s pieces that do not measure: the table it prints, the peers' cells read
from their runner's JSON, the section hook the produce rows use, and the floor's shape (its
numbers are never asserted)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.bench import table


def _lat(p50: float, p99: float) -> dict[str, float]:
    return {"n": 100, "p50": p50, "p99": p99}


PEER_RESULTS = {
    "etcd": {"seq_put_ms": {"grpc_to_leader": _lat(1.76, 3.1)},
             "tput_grpc_aio_to_leader": [{"clients": 32, "writes_per_s": 3070.2},
                                         {"clients": 64, "writes_per_s": 3595.4}],
             "failover": {"median_first_ok_after_kill_ms": 1438.0}},
    "zookeeper": {"seq_ms": {"to_leader": {"set": _lat(1.66, 11.7)}},
                  "tput_kazoo_async": [{"outstanding": 64, "writes_per_s": 2269.0}],
                  "failover": {"median_first_ok_after_kill_ms": 538.0}},
    "pysyncobj_nobatch": {"seq_ms": {"on_leader": _lat(0.74, 1.84)},
                          "tput_on_leader": [{"inflight": 64, "writes_per_s": 7662.0}]},
    "baseline_1_start": {"fsync_100B_ms": {"append_fsync": _lat(0.2, 0.4),
                                           "prealloc_fdatasync": _lat(0.14, 0.3)},
                         "loopback_rtt_100B_ms": {"asyncio_client_asyncio_server": _lat(0.16, 0.3)}},
}


def test_peer_cells_put_each_system_in_the_row_it_measured() -> None:
    cells = table.peer_cells(PEER_RESULTS)
    assert cells["seq"] == ("etcd 1.76 / 3.10; ZooKeeper 1.66 / 11.70; "
                            "pysyncobj (no fsync) 0.74 / 1.84")
    assert cells["tput"] == "etcd 3,595; ZooKeeper 2,269; pysyncobj 7,662"  # the 64 in flight
    assert cells["failover"] == "etcd (kill) 1438 ms; ZooKeeper (kill) 538 ms"  # none for pysyncobj
    assert cells["floor_fsync"] == "start 0.20 / 0.40"
    assert cells["floor_rtt"] == "start 0.16 / 0.30"
    assert table.peer_cells({}) == {"seq": "", "tput": "", "failover": ""}


def test_markdown_has_a_peers_column_only_when_peers_ran() -> None:
    figures = [table.Figure("seq", "commit p50 / p99", "native 1 / 2 ms", "< 1 ms", "etcd 2 / 3")]
    assert table.markdown(figures, False).splitlines() == [
        "| figure | kraftlab | aim |", "|---|---|---|", "| commit p50 / p99 | native 1 / 2 ms | < 1 ms |"]
    assert table.markdown(figures, True).splitlines()[2] == (
        "| commit p50 / p99 | native 1 / 2 ms | etcd 2 / 3 | < 1 ms |")


def test_a_registered_section_adds_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    def produce_rows(run: table.Run) -> None:
        run.figures.append(table.Figure("produce", "produce, RF 3", "1 records/s", "more"))

    table.register_section("produce-test", produce_rows)
    try:
        parser = argparse.ArgumentParser()
        parser.add_argument("--json", action="store_true")
        table.add_arguments(parser)
        assert table.run(parser.parse_args(["--only", "produce-test"])) == 0
    finally:
        table.SECTIONS[:] = [s for s in table.SECTIONS if s[0] != "produce-test"]
    out = capsys.readouterr().out
    assert "| produce, RF 3 | 1 records/s | more |" in out
    assert "load average" in out


def test_the_fsync_floor_measures_both_files(tmp_path: Path) -> None:
    floor = table.fsync_floor(tmp_path, 20)
    for kind in ("append_fsync", "prealloc_fdatasync"):
        assert 0 < floor[kind]["p50"] <= floor[kind]["p99"]

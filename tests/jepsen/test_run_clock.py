"""The clock nemesis on real processes (harness/runtime/clock.py, POST/DELETE /nemesis/clock,
the CLOCK_FAULTS of harness/jepsen/nemesis.py).

- a follower controller whose clock jumps past its fetch timeout starts an election at that very
  reading of its clock (its log's `quorum.became_prospective` carries the jumped `now_ms`); with
  pre-vote (KIP-996) the others still follow the leader and refuse, so the leader and its epoch
  stay, and the node follows again; DELETE puts the clock back in step (skew 0);
- `kraftlab nemesis clock` steps, drifts and resets one node by hand;
- a bad clock change is refused (400) and changes nothing;
- a kv run under every clock fault (jumps forward and back, drift) finds no anomaly with
  linearizable reads: time decides when nodes time out, never what is committed.
Every wait polls a condition with a deadline (tests/live.py `poll`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import NEMESIS, load_history
from harness.jepsen.nemesis import CLOCK_FAULTS, ClusterNemesis
from harness.jepsen.runner import DEFAULT_OVERRIDES, RunOptions, run
from harness.jepsen.workload_kv import KvOptions
from tests.live import (
    LiveCluster,
    cli,
    kraftlab,
    poll,
    started_cluster,
)

pytestmark = pytest.mark.integration

JUMP_MS = 10_000  # ten fetch timeouts (FAST: 1000 ms)
SKEW = re.compile(r"skew ([+-]\d+) ms, rate ([\d.]+)")  # the nemesis' record of an answer


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("clock")) as live:
        yield live


def events(live: LiveCluster, node_id: int, name: str) -> list[dict[str, Any]]:
    out = []
    for line in Path(live.file.node(node_id).log_file).read_text().splitlines():
        if f'"{name}"' in line:
            out.append(json.loads(line))
    return out


def test_a_follower_clock_jumping_forward_starts_an_election_the_leader_survives(
    live: LiveCluster,
) -> None:
    leader = live.agreed_leader()
    epoch = live.statuses()[leader]["leader_epoch"]
    follower = min(i for i in live.ids() if i != leader)
    client = live.client(follower)
    started = len(events(live, follower, "quorum.became_prospective"))

    status, clock = client.request("POST", "/nemesis/clock", {"jump_ms": JUMP_MS})
    assert status == 200 and clock["skew_ms"] == pytest.approx(JUMP_MS, abs=5)
    jumped_at_ms = clock["now_ms"]
    prospective = poll(
        lambda: events(live, follower, "quorum.became_prospective")[started:], 10,
        "the skewed follower's election")
    # At the jump itself: its fetch timeout (1 s) was due at once, not a second later.
    assert jumped_at_ms <= prospective[0]["now_ms"] < jumped_at_ms + 1000
    # Pre-vote refused by the peers that still hear the leader: it follows the same leader
    # again, in the same epoch.
    poll(lambda: live.statuses([follower])[follower]["role"] == "follower", 10,
         "the follower following again")
    assert live.agreed_leader() == leader
    assert {s["leader_epoch"] for s in live.statuses().values()} == {epoch}

    # Back in step: a jump back by 10 s, so its clock holds (its timeouts wait); it follows on.
    status, clock = client.request("DELETE", "/nemesis/clock")
    assert status == 200 and clock["skew_ms"] == pytest.approx(0, abs=5) and clock["rate"] == 1.0
    assert live.agreed_leader() == leader


def test_kraftlab_nemesis_clock_steps_drifts_and_resets_one_node(live: LiveCluster) -> None:
    node = live.ids()[-1]
    out = cli(live, "nemesis", "clock", str(node), "--jump-ms", "-2500", "--rate", "2")
    said = re.fullmatch(rf"controller {node}: clock skew ([+-]\d+) ms, rate 2.0", out.strip())
    assert said is not None and abs(int(said[1]) + 2500) <= 5, out  # (it runs fast meanwhile)
    clock = live.client(node).get_json("/nemesis/clock")
    assert clock["rate"] == 2.0 and clock["skew_ms"] > int(said[1])  # gaining since the step
    out = cli(live, "nemesis", "clock", str(node), "--reset")
    assert re.fullmatch(rf"controller {node}: clock skew [+-]0 ms, rate 1.0", out.strip()), out
    done = kraftlab("nemesis", "clock", str(node), "--data-dir", str(live.data_dir))
    assert done.returncode == 2 and "--reset" in done.stderr  # nothing asked: refused


@pytest.mark.parametrize("body", [{}, {"jump_ms": "1"}, {"rate": 0}, {"rate": -1},
                                  {"jump_ms": 10**9}, {"skew": 5}, {"rate": True}])
def test_a_bad_clock_change_is_refused_and_changes_nothing(
    live: LiveCluster, body: dict[str, Any]
) -> None:
    client = live.client(live.ids()[0])
    before = client.get_json("/nemesis/clock")
    status, answer = client.request("POST", "/nemesis/clock", body)
    assert status == 400 and answer["error"] == "INVALID_REQUEST"
    after = client.get_json("/nemesis/clock")
    assert (after["skew_ms"], after["rate"], after["changes"]) == (
        before["skew_ms"], before["rate"], before["changes"])


def every_clock_fault_healed(at_least: int) -> Callable[[ClusterNemesis], Awaitable[bool]]:
    """`RunOptions.stop_when`: each of CLOCK_FAULTS has been applied, at least `at_least`
    faults in all, and the last one is healed. The run ends there instead of idling to its
    time limit (which stays the bound); a fault lasts 1.5 s or more, so the 0.1 s polls see
    every one while it is active."""
    seen: set[str] = set()

    async def condition(nemesis: ClusterNemesis) -> bool:
        if nemesis.active is not None:
            seen.add(nemesis.active.name)
            return False
        return seen >= set(CLOCK_FAULTS) and nemesis.applied >= at_least

    return condition


def test_a_kv_run_under_every_clock_fault_finds_no_anomaly(tmp_path: Path) -> None:
    out = tmp_path / "out"
    options = RunOptions(
        out_dir=out, nemesis="clock", time_limit_s=14.0, seed=3, data_dir=tmp_path / "c",
        kv=KvOptions(keys=3, concurrency=4, rate=30.0, op_timeout_s=2.0),
        fault_s=(1.5, 2.5), quiet_s=(0.5, 1.0), lead_in_s=0.5,
        overrides=dict(DEFAULT_OVERRIDES), stop_when=every_clock_fault_healed(3),
    )
    result = run(options)
    r = result.results
    assert (result.exit_code, result.verdict, r["anomalies"]) == (0, "valid", {})
    assert r["faults"] == list(CLOCK_FAULTS) and r["faults_applied"] >= 3
    applied = [op.value for op in load_history(out / "history.jsonl")
               if op.process == NEMESIS and op.f == "start-clock" and "result" in op.value]
    assert len(applied) == r["faults_applied"]
    assert {fault["fault"] for fault in applied} == set(CLOCK_FAULTS)  # every one of them
    for fault in applied:  # each node answered with the skew or rate it was given
        [answer] = fault["result"].values()
        skew_ms, rate = SKEW.fullmatch(answer).groups()  # type: ignore[union-attr]
        if "jump_ms" in fault:
            assert abs(int(skew_ms) - fault["jump_ms"]) <= 5 and rate == "1.0", fault
        else:
            assert rate == str(fault["rate"]), fault
    healed = {k: SKEW.fullmatch(v) for k, v in r["heal"].items() if k.endswith("-clock")}
    assert healed and all(m is not None and abs(int(m[1])) <= 5 and m[2] == "1.0"
                          for m in healed.values()), r["heal"]

"""The pure parts of real-process runs: nemesis shapes, schedules' names, outcome rules, reports.

No processes here: grudges are pure functions of (nodes, rng), the kv outcome classifier is a
table, and the report is computed from a hand-made history.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.check.history import NEMESIS
from harness.check.report import summarise
from harness.cli.main import main
from harness.cli.nemesis import parse_groups, partition_grudge
from harness.jepsen.nemesis import (
    BROKER_FAULTS,
    FAULTS,
    PARTITIONS,
    PROCESS_FAULTS,
    Fault,
    Grudge,
    NemesisError,
    grudge_bridge,
    grudge_cut,
    grudge_halves,
    grudge_isolate,
    grudge_majorities_ring,
    grudge_majority_minority,
    parse_nemesis,
    sees_majority,
)
from harness.jepsen.recorder import ProcessIds
from harness.jepsen.workload_kv import KvWorkload
from harness.launcher.cluster import ClusterError
from harness.net.http_session import disable_idempotent_retry
from tests.jepsen.histories import ops


def symmetric(grudge: Grudge) -> bool:
    return all(a in grudge[b] for a, drops in grudge.items() for b in drops)


def test_isolate_cuts_exactly_the_target_both_ways() -> None:
    assert grudge_isolate([1, 2, 3], 2) == {
        1: frozenset({2}), 2: frozenset({1, 3}), 3: frozenset({2})
    }


def test_majority_minority_puts_the_leader_alone_in_a_minority() -> None:
    g5 = grudge_majority_minority([1, 2, 3, 4, 5], leader=4, rng=random.Random(1))
    assert len(g5[4]) == 3  # the leader sees one other node: a minority of two
    assert not sees_majority(g5, 4)
    assert sum(sees_majority(g5, n) for n in g5) == 3
    assert grudge_majority_minority([1, 2, 3], leader=1, rng=random.Random(1)) == grudge_isolate(
        [1, 2, 3], 1)


@pytest.mark.parametrize("n", [3, 5, 7])
def test_majorities_ring_every_node_sees_a_majority_but_something_is_cut(n: int) -> None:
    nodes = list(range(1, n + 1))
    for seed in range(20):
        g = grudge_majorities_ring(nodes, random.Random(seed))
        assert symmetric(g)
        assert all(sees_majority(g, node) for node in nodes)
        assert any(g.values())
        if n >= 5:  # no two nodes see the same majority
            views = {frozenset(set(nodes) - g[node]) for node in nodes}
            assert len(views) == n


def test_bridge_only_the_bridge_sees_both_sides() -> None:
    g = grudge_bridge([1, 2, 3, 4, 5], random.Random(3))
    assert symmetric(g)
    bridges = [node for node, drops in g.items() if not drops]
    assert len(bridges) == 1
    others = [node for node in g if node not in bridges]
    assert all(len(g[node]) == 2 for node in others)  # sees its partner and the bridge


@given(st.integers(min_value=2, max_value=9), st.integers(min_value=0, max_value=10_000))
def test_every_partition_shape_is_symmetric_and_leaves_no_node_seeing_itself_dropped(
    n: int, seed: int
) -> None:
    nodes = list(range(1, n + 1))
    shapes: list[Callable[[], Grudge]] = [
        lambda: grudge_halves(nodes, random.Random(seed)),
        lambda: grudge_majorities_ring(nodes, random.Random(seed)),
        lambda: grudge_bridge(nodes, random.Random(seed)),
        lambda: grudge_isolate(nodes, nodes[seed % n]),
    ]
    for make in shapes:
        g = make()
        assert set(g) == set(nodes)
        assert symmetric(g)
        assert all(node not in drops for node, drops in g.items())


NODES = [1, 2, 3, 101, 102, 103]


def test_cut_severs_only_the_links_between_the_two_sides() -> None:
    # leader-cut-from-followers-only: broker 101 from the other brokers; controllers see all.
    g = grudge_cut(NODES, [101], [102, 103])
    assert symmetric(g)
    assert g == {1: frozenset(), 2: frozenset(), 3: frozenset(), 101: frozenset({102, 103}),
                 102: frozenset({101}), 103: frozenset({101})}
    # zombie-leader: 101 from the controllers only.
    z = grudge_cut(NODES, [101], [1, 2, 3])
    assert z[101] == {1, 2, 3} and z[102] == frozenset() and z[1] == {101}


def test_fault_links_bodies_cut_clients_only_where_asked() -> None:
    f = Fault("isolate-partition-leader", "partition", grudge_isolate(NODES, 102),
              clients_cut=frozenset({102}), target={"topic": "t", "partition": 0, "leader": 102})
    assert f.links(102) == {"drop": [1, 2, 3, 101, 103], "drop_clients": True}
    assert f.links(1) == {"drop": [102], "drop_clients": False}
    assert f.describe()["drop_clients"] == [102] and f.describe()["leader"] == 102
    g = Fault("zombie-leader", "partition", grudge_cut(NODES, [101], [1, 2, 3]))
    assert g.links(102) is None and "drop_clients" not in g.describe()


def test_cli_partition_groups_unlisted_nodes_one_way_or_the_other() -> None:
    groups = parse_groups(["1,101", "2"], NODES)
    assert groups == [[1, 101], [2]]
    as_group = partition_grudge(NODES, groups, "group")  # 3,102,103 form a third side
    assert as_group[1] == {2, 3, 102, 103} and as_group[3] == {1, 101, 2}
    assert as_group[102] == {1, 101, 2} and symmetric(as_group)
    bridged = partition_grudge(NODES, groups, "connected")  # 3,102,103 see everyone
    assert bridged[1] == {2} and bridged[2] == {1, 101} and bridged[3] == frozenset()
    for bad, message in ((["1,x"], "not a node id"), (["1", "1,2"], "in two groups"),
                         (["7"], "no node 7")):
        with pytest.raises(ClusterError, match=message):
            parse_groups(bad, NODES)


def test_parse_nemesis_groups_and_errors() -> None:
    assert parse_nemesis("partition") == PARTITIONS
    assert parse_nemesis("kill,halves,kill") == ("kill", "halves")
    assert parse_nemesis("all") == PARTITIONS + PROCESS_FAULTS  # controller-side, as before
    assert parse_nemesis("broker") == BROKER_FAULTS
    assert parse_nemesis("everything") == FAULTS
    assert parse_nemesis("zombie-leader,crash-unflushed") == ("zombie-leader", "crash-unflushed")
    assert parse_nemesis("none") == ()
    with pytest.raises(NemesisError, match="unknown nemesis 'explode'"):
        parse_nemesis("kill,explode")


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (409, {"error": "CAS_FAILED"}, "fail"),
        (421, {"error": "NOT_CONTROLLER", "leader": 2}, "fail"),
        # no leader known: nothing was proposed
        (503, {"error": "LEADER_NOT_AVAILABLE", "leader_id": None}, "fail"),
        # even a refused forward may be aiohttp's resend of a PUT the leader already got
        (503, {"error": "LEADER_NOT_AVAILABLE", "leader_id": 1,
               "message": "forwarding to leader 1 failed: ClientConnectorError(...)"}, "info"),
        # the forward may have reached the leader: unknown
        (503, {"error": "LEADER_NOT_AVAILABLE", "leader_id": 1,
               "message": "forwarding to leader 1 failed: ServerDisconnectedError()"}, "info"),
        (504, {"error": "REQUEST_TIMED_OUT", "indeterminate": True}, "info"),
        (500, {"error": "UNKNOWN_SERVER_ERROR"}, "info"),
    ],
)
def test_kv_outcome_rules_fail_only_when_the_op_certainly_did_not_happen(
    status: int, body: dict[str, object], expected: str
) -> None:
    assert KvWorkload.classify(status, body).type == expected


def test_a_retired_process_id_keeps_its_worker_lane() -> None:
    pids = ProcessIds(3)
    assert [pids.current(w) for w in range(3)] == [0, 1, 2]
    assert pids.retire(1) == 4 and pids.retire(1) == 7
    assert pids.current(1) % 3 == 1


def test_summary_splits_availability_by_fault_phase() -> None:
    history = ops(
        (0, "invoke", "write", ["k", "a"]), (0, "ok", "write", ["k", "a"]),
        (NEMESIS, "info", "start-partition", {"fault": "isolate-one"}),
        (NEMESIS, "info", "start-partition", {"fault": "isolate-one", "result": {}}),
        (0, "invoke", "write", ["k", "b"]), (0, "info", "write", ["k", "b"],
                                             {"error": "REQUEST_TIMED_OUT"}),
        (3, "invoke", "cas", ["k", ["x", "c"]]), (3, "fail", "cas", ["k", ["x", "c"]],
                                                  {"error": "CAS_FAILED"}),
        (NEMESIS, "info", "stop-partition", {"fault": "isolate-one"}),
        (NEMESIS, "info", "stop-partition", {"fault": "isolate-one", "result": {}}),
        (3, "invoke", "read", ["k", None]), (3, "fail", "read", ["k", None],
                                             {"error": "LEADER_NOT_AVAILABLE"}),
        (NEMESIS, "info", "stop-all", None), (NEMESIS, "info", "stop-all", {}),
        (6, "invoke", "read", ["k", None]), (6, "ok", "read", ["k", "b"]),
    )
    s = summarise(history)
    assert s["counts"] == {"cas": {"ok": 0, "fail": 1, "info": 0},
                           "read": {"ok": 1, "fail": 1, "info": 0},
                           "write": {"ok": 1, "fail": 0, "info": 1}}
    assert [f["fault"] for f in s["faults"]] == ["isolate-one"]
    during, between, after = (s["phases"][p] for p in
                              ("during_fault", "between_faults", "after_heal"))
    # the timed-out write and the cas whose compare failed (an answer, not an outage)
    assert (during["attempted"], during["served"], during["availability"]) == (2, 1, 0.5)
    assert (between["attempted"], between["served"]) == (2, 1)
    assert (after["attempted"], after["ok"]) == (1, 1)
    # the helper's events are 1 us apart: everything falls in second 0
    assert s["per_second"] == [{"t": 0, "read": [1, 1, 0], "write": [1, 1, 1]}]
    assert s["errors"] == {"info:REQUEST_TIMED_OUT": 1, "fail:CAS_FAILED": 1,
                           "fail:LEADER_NOT_AVAILABLE": 1}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--time-limit", "0"], "--time-limit"),
        (["--nemesis", "kill,explode"], "unknown nemesis 'explode'"),
        (["--concurrency", "0"], "--concurrency"),
    ],
)
def test_jepsen_run_rejects_what_it_cannot_do_before_starting_anything(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["jepsen", "run", "--out", str(out), "--data-dir", str(tmp_path / "d"), *argv])
    assert code == 3
    err = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert err["error"] == "INVALID_REQUEST" and message in err["message"]
    assert not (tmp_path / "d").exists() and not out.exists()  # no cluster, no output


def test_client_sessions_never_resend_so_a_refusal_means_not_sent() -> None:
    async def check() -> bool:
        async with aiohttp.ClientSession() as session:
            disable_idempotent_retry(session)
            return bool(session._retry_connection)

    assert asyncio.run(check()) is False

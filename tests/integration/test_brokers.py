"""Control plane on real processes: 3 controllers + brokers 101-103 (Raft observers), topics through
the admin API and the CLI, and the Kafka operations demonstration: describe lines, kill -9 of a
broker (new leaders and ISRs within session timeout + 2 s), its restart (re-registered and
unfenced), preferred leader election, and kill -9 of the active controller losing nothing.

The tests share one cluster and run in file order (each builds on the previous state).
With the data plane, a restarted broker's replicas catch up and their leaders put it
back into the ISRs by themselves (AlterPartition from the replica cores), so preferred election
restores the preferred leaders with no special route.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminError
from harness.launcher import cluster as cl
from tests.live import (
    BROKER_SESSION_TIMEOUT_MS as SESSION_TIMEOUT_MS,
)
from tests.live import (
    LiveCluster,
    broker_cluster,
    cli,
    poll,
)

pytestmark = pytest.mark.integration

BROKERS = [101, 102, 103]


@pytest.fixture(scope="module")
def bcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with broker_cluster(tmp_path_factory.mktemp("brokers")) as live:
        yield live


def brokers_view(c: LiveCluster, node_id: int = 1) -> dict[int, dict[str, Any]]:
    return {b["id"]: b for b in c.client(node_id, 2.0).get_json("/cluster")["brokers"]}


def partitions(c: LiveCluster, topic: str, node_id: int = 1) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = c.client(node_id, 2.0).get_json(f"/topics/{topic}")["partitions"]
    return parts


def test_up_starts_brokers_that_register_and_are_unfenced(bcluster: LiveCluster) -> None:
    doc = json.loads((bcluster.data_dir / "cluster.json").read_text())
    assert [(n["id"], n["role"]) for n in doc["nodes"]] == [
        (1, "controller"), (2, "controller"), (3, "controller"),
        (101, "broker"), (102, "broker"), (103, "broker")]
    leader = bcluster.agreed_leader([1, 2, 3])
    for node_id in [1, 2, 3, *BROKERS]:  # every node answers /cluster (brokers forward)
        view = bcluster.client(node_id).get_json("/cluster")
        assert view["controller_id"] == leader
        assert {b["id"]: b["fenced"] for b in view["brokers"]} == dict.fromkeys(BROKERS, False)
    # Brokers are observers of the metadata quorum, not voters.
    status = bcluster.client(leader).get_json("/quorum/status")
    assert status["current_voters"] == [1, 2, 3]
    assert sorted(status["current_observers"]) == BROKERS
    out = cli(bcluster, "cluster", "status")
    assert "101     broker" in out and "(unfenced epoch" in out


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b'{"name": "t", "partitions": "3", "replication_factor": 1}', 400, "INVALID_REQUEST"),
        (b'{"name": "t", "partitions": 3}', 400, "INVALID_REQUEST"),
        (b'{"name": 7, "partitions": 3, "replication_factor": 1}', 400, "INVALID_REQUEST"),
        (b'{"name": "t", "partitions": 1, "replication_factor": 1, "configs": []}', 400,
         "INVALID_REQUEST"),
        (b'{"name": "t", "partitions": 1, "replication_factor": 1, "configs": null}', 400,
         "INVALID_REQUEST"),  # found by the OpenAPI fuzz: null was taken as "no configs"
        (b'{"name": "t", "partitions": 1, "replication_factor": 4}', 400,
         "INVALID_REPLICATION_FACTOR"),
        (b'{"name": "t", "partitions": 0, "replication_factor": 1}', 400, "INVALID_PARTITIONS"),
        (b'{"name": "t", "partitions": 1, "replication_factor": 1, '
         b'"configs": {"min.insync.replicas": "zero"}}', 400, "INVALID_CONFIG"),
        (b'{"name": "bad/name", "partitions": 1, "replication_factor": 1}', 400,
         "INVALID_TOPIC_EXCEPTION"),
        (b"not json", 400, "INVALID_REQUEST"),
        (b'{"name": "t", "partitions": 1000000000, "replication_factor": 1}', 400,
         "INVALID_PARTITIONS"),
        (b'{"name": "t", "partitions": 1, "replication_factor": 99999999999999999999}', 400,
         "INVALID_REPLICATION_FACTOR"),
    ],
)
def test_bad_topic_requests_are_400_with_the_kafka_error_on_every_node(
    bcluster: LiveCluster, body: bytes, status: int, error: str
) -> None:
    for node_id in (1, 2, 3, 102):
        port = bcluster.file.node(node_id).admin_port
        conn = http.client.HTTPConnection("127.0.0.1", port, 5)
        conn.request("POST", "/topics", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        conn.close()
        assert (resp.status, payload["error"]) == (status, error), (node_id, payload)


def test_topic_lifecycle_and_errors(bcluster: LiveCluster) -> None:
    client = bcluster.client(103)  # a broker: forwarded to the active controller
    status, created = client.request(
        "POST", "/topics", {"name": "scratch", "partitions": 2, "replication_factor": 2,
                            "configs": {"min.insync.replicas": "2"}})
    assert status == 201 and created["name"] == "scratch" and len(created["topic_id"]) == 22
    status, again = client.request(
        "POST", "/topics", {"name": "scratch", "partitions": 1, "replication_factor": 1})
    assert (status, again["error"]) == (409, "TOPIC_ALREADY_EXISTS")
    described = bcluster.client(2).get_json("/topics/scratch")
    assert described["configs"]["min.insync.replicas"] == "2"
    assert [len(p["replicas"]) for p in described["partitions"]] == [2, 2]
    assert all(p["leader"] == p["replicas"][0] and p["isr"] == p["replicas"]
               for p in described["partitions"])
    assert "scratch" in client.get_json("/topics")
    assert client.request("DELETE", "/topics/scratch")[0] == 200
    for node_id in (1, 101):
        with pytest.raises(AdminError) as missing:
            bcluster.client(node_id).get_json("/topics/scratch")
        assert (missing.value.status, missing.value.error) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    status, gone = client.request("DELETE", "/topics/scratch")
    assert (status, gone["error"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    for path, body in (("/elect-leaders", {"topic": "scratch", "election_type": "sideways"}),
                       ("/elect-leaders", {"topic": "first", "partition": -1}),
                       # found by the OpenAPI fuzz: null was taken as "every partition"
                       ("/elect-leaders", {"topic": "first", "partition": None}),
                       ("/partitions/first/x/isr", {"isr": [101]}),
                       ("/partitions/first/0/isr", {"isr": []})):
        status, bad = client.request("POST", path, body)
        assert (status, bad["error"]) == (400, "INVALID_REQUEST"), (path, bad)
    status, bad = client.request("GET", "/topics?format=xml")
    assert (status, bad["error"]) == (400, "INVALID_REQUEST")
    status, bad = client.request("POST", "/elect-leaders", {"topic": "nope"})
    assert (status, bad["error"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION"), bad
    # A broker's own endpoints.
    health = client.get_json("/health")
    assert health["process_roles"] == "broker" and health["broker"]["fenced"] is False
    assert client.request("GET", "/metrics")[0] == 200


def describe_lines(c: LiveCluster) -> list[str]:
    out = cli(c, "topic", "describe", "first")
    return [line.strip() for line in out.splitlines()[1:]]


def test_demo_create_describe_kill_broker_restart_and_preferred_election(
    bcluster: LiveCluster,
) -> None:
    assert "Created topic first." in cli(bcluster, "topic", "create", "first", "--partitions",
                                         "3", "--replication-factor", "3")
    assert cli(bcluster, "topic", "list").split() == ["first"]
    lines = describe_lines(bcluster)
    assert [line.split("\tElr")[0] for line in lines] == [
        "Topic: first\tPartition: 0\tLeader: 101\tReplicas: 101,102,103\tIsr: 101,102,103",
        "Topic: first\tPartition: 1\tLeader: 102\tReplicas: 102,103,101\tIsr: 102,103,101",
        "Topic: first\tPartition: 2\tLeader: 103\tReplicas: 103,101,102\tIsr: 103,101,102",
    ]
    before = brokers_view(bcluster)[102]
    # Each broker logs its own assignments.
    log_102 = Path(bcluster.file.node(102).log_file)
    poll(lambda: "broker.partition_leader" in log_102.read_text(), 30, "102's assignment log")

    # kill -9 broker 102: once its session times out its partitions have new leaders and it is
    # gone from every ISR; it is fenced. (How long that takes is a benchmark's business: a
    # loaded machine stretches it, so the wait is generous and nothing asserts the time.)
    killed_at = time.monotonic()
    cli(bcluster, "cluster", "kill", "102")

    def moved() -> list[dict[str, Any]] | None:
        parts = partitions(bcluster, "first")
        if any(p["leader"] == 102 or 102 in p["isr"] for p in parts):
            return None
        return parts

    parts = poll(moved, SESSION_TIMEOUT_MS / 1000 + 60, "102 out of every ISR and leadership")
    elapsed_s = time.monotonic() - killed_at
    print(f"broker 102 fenced and out of ISRs {elapsed_s:.2f} s after kill -9")
    assert [(p["leader"], p["isr"]) for p in parts] == [
        (101, [101, 103]), (103, [103, 101]), (103, [103, 101])]
    assert [p["leader_epoch"] for p in parts] == [0, 1, 0]  # only partition 1 changed leader
    assert brokers_view(bcluster)[102]["fenced"] is True

    # Restart: a new incarnation registers (new broker epoch) and is unfenced once caught up.
    cli(bcluster, "cluster", "restart", "102")
    after = poll(lambda: (b := brokers_view(bcluster).get(102)) and not b["fenced"] and b,
                 10, "102 registered and unfenced")
    assert after["epoch"] > before["epoch"]
    assert after["incarnation_id"] != before["incarnation_id"]
    # The data plane: 102's replicas catch up and each partition leader puts it back into the
    # ISR by itself (AlterPartition, KIP-497); then preferred election restores 102 as leader
    # of partition 1, with no special route.
    poll(lambda: all(102 in p["isr"] for p in partitions(bcluster, "first")), 30,
         "102 back in every ISR")
    status, refused = bcluster.client(101).request(  # not the leader of partition 1
        "POST", "/partitions/first/1/isr", {"isr": [103]})
    assert (status, refused["error"]) == (421, "NOT_LEADER_OR_FOLLOWER")
    out = cli(bcluster, "elect-leaders", "--topic", "first", "--election-type", "preferred")
    assert "Successfully completed leader election (PREFERRED) for partitions first-1" in out
    assert "Valid replica already elected for partitions first-0" in out
    lines = describe_lines(bcluster)
    assert lines[1].startswith(
        "Topic: first\tPartition: 1\tLeader: 102\tReplicas: 102,103,101\tIsr: 101,102,103")


def metadata_state(c: LiveCluster, node_id: int, consistency: str) -> dict[str, Any]:
    client = c.client(node_id, 2.0)
    cluster = client.get_json(f"/cluster?consistency={consistency}")
    topics = {name: client.get_json(f"/topics/{name}?consistency={consistency}")
              for name in client.get_json(f"/topics?consistency={consistency}")}
    brokers = {b["id"]: (b["epoch"], b["fenced"]) for b in cluster["brokers"]}
    return {"brokers": brokers, "topics": topics}


def test_kill_9_of_the_active_controller_loses_no_metadata(bcluster: LiveCluster) -> None:
    leader = bcluster.agreed_leader([1, 2, 3])
    before = metadata_state(bcluster, leader, "linearizable")
    cli(bcluster, "cluster", "kill", str(leader))
    others = [i for i in (1, 2, 3) if i != leader]

    def new_leader() -> int | None:
        named = cl.agreed_leader(dict(bcluster.statuses(others)), others)
        return named if named not in (None, leader) else None

    successor = poll(new_leader, 10, "a new active controller")
    after = poll(lambda: metadata_state(bcluster, successor, "linearizable"), 10,
                 "the new controller answering")
    assert after == before
    # The new active controller serves controller requests (brokers heartbeat to it; topics).
    cli(bcluster, "topic", "create", "second", "--partitions", "1", "--replication-factor", "3")
    assert cli(bcluster, "topic", "list").split() == ["first", "second"]
    assert all(not b["fenced"] for b in brokers_view(bcluster, successor).values())
    # The killed controller comes back and converges on the same metadata; so do the brokers.
    cli(bcluster, "cluster", "restart", str(leader))
    target = metadata_state(bcluster, successor, "linearizable")
    for node_id in (leader, *BROKERS):
        poll(lambda n=node_id: metadata_state(bcluster, n, "local") == target, 10,  # type: ignore[misc]
             f"node {node_id}'s image to converge")


def test_a_paused_broker_is_fenced_then_unfenced_when_it_resumes(bcluster: LiveCluster) -> None:
    epoch = brokers_view(bcluster)[103]["epoch"]
    cli(bcluster, "cluster", "pause", "103")
    try:
        poll(lambda: brokers_view(bcluster)[103]["fenced"], SESSION_TIMEOUT_MS / 1000 + 2,
             "paused 103 fenced")
        assert all(p["leader"] != 103 and 103 not in p["isr"]
                   for p in partitions(bcluster, "first"))
    finally:
        cli(bcluster, "cluster", "resume", "103")
    back = poll(lambda: (b := brokers_view(bcluster)[103]) and not b["fenced"] and b, 30,
                "103 unfenced after resume")
    assert back["epoch"] == epoch  # same registration: its session was fenced, not replaced


def test_kill_9_and_immediate_restart_retries_duplicate_registration(bcluster: LiveCluster) -> None:
    before = brokers_view(bcluster)[103]
    cli(bcluster, "cluster", "kill", "103")
    started = time.monotonic()
    node = bcluster.file.node(103)
    node.pid = cl.spawn_node(node)  # at once: the old incarnation's session is still live
    cluster_file = bcluster.file
    cluster_file.node(103).pid = node.pid
    cluster_file.save(bcluster.data_dir)
    after = poll(lambda: (b := brokers_view(bcluster)[103])["incarnation_id"]
                 != before["incarnation_id"] and not b["fenced"] and b,
                 SESSION_TIMEOUT_MS / 1000 + 60, "the new incarnation registered and unfenced")
    elapsed_s = time.monotonic() - started
    assert after["epoch"] > before["epoch"]
    log = Path(node.log_file).read_text().splitlines()
    retries = [line for line in log[-400:] if "broker.registration_retry" in line]
    assert retries and "DUPLICATE_BROKER_REGISTRATION" in retries[0]
    print(f"restarted broker registered {elapsed_s:.2f} s after kill -9 (session "
          f"{SESSION_TIMEOUT_MS} ms)")


def test_cluster_restart_right_after_kill_9_returns_once_the_new_registration_is_unfenced(
    bcluster: LiveCluster,
) -> None:
    # The killed incarnation's registration stays unfenced until its session times out; a
    # restart that returned on seeing it would return with a broker about to be fenced.
    poll(lambda: not brokers_view(bcluster)[103]["fenced"], 60, "103 unfenced")
    before = brokers_view(bcluster)[103]
    cli(bcluster, "cluster", "kill", "103")
    wait_s = SESSION_TIMEOUT_MS / 1000 + 60
    cli(bcluster, "cluster", "restart", "103", "--timeout", str(wait_s), timeout_s=3 * wait_s)
    after = brokers_view(bcluster)[103]  # no waiting here: the restart command did it
    assert after["epoch"] > before["epoch"] and not after["fenced"]
    assert after["incarnation_id"] != before["incarnation_id"]


def test_waiting_for_a_restarted_broker_skips_its_old_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What GET /cluster says, one answer per poll: the old registration (epoch 5) unfenced, then
    # still there, then the new one (epoch 9) fenced while it catches up, then unfenced.
    cluster = cl.create_cluster(tmp_path, 1, {}, brokers=1)
    answers = [{"brokers": [{"id": 101, "epoch": e, "fenced": f}]}
               for e, f in ((5, False), (5, False), (9, True), (9, False))]
    asked: list[int] = []

    def view(_: cl.ClusterFile, timeout_s: float = 1.0) -> dict[str, Any]:
        asked.append(1)
        return answers[min(len(asked), len(answers)) - 1]

    monkeypatch.setattr(cl, "broker_view", view)
    assert cl.broker_epochs(cluster, 1.0) == {101: 5}
    asked.clear()
    got = cl.wait_for_brokers(cluster, [101], 10.0, newer_than={101: 5})
    assert got["brokers"] == [{"id": 101, "epoch": 9, "fenced": False}] and len(asked) == 4
    asked.clear()
    # Without it the old registration would do, at the first answer.
    assert cl.wait_for_brokers(cluster, [101], 10.0)["brokers"][0]["epoch"] == 5
    assert len(asked) == 1


def test_sigterm_of_a_broker_is_a_controlled_shutdown(bcluster: LiveCluster) -> None:
    # 101 leads partition 0 with a full ISR (the replica cores keep it so), so its leadership
    # can move during the controlled shutdown.
    poll(lambda: partitions(bcluster, "first")[0]["isr"] == [101, 102, 103], 30, "a full ISR")
    assert partitions(bcluster, "first")[0]["leader"] == 101
    cli(bcluster, "cluster", "restart", "101")  # SIGTERM (controlled shutdown), then start
    log = Path(bcluster.file.node(101).log_file).read_text()
    assert "broker.controlled_shutdown_granted" in log
    # The controller moved the leadership away before 101 stopped (the next preferred replica);
    # back, re-registered and unfenced, 101 catches up and its leader puts it back in the ISR.
    assert partitions(bcluster, "first")[0]["leader"] == 102
    assert brokers_view(bcluster)[101]["fenced"] is False
    poll(lambda: 101 in partitions(bcluster, "first")[0]["isr"], 30, "101 back in the ISR")

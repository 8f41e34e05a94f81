"""Three real controller processes: agreement on the leader, kv writes and linearizable reads on
every controller, bad input on both ports, SIGKILL of the leader, quorum state across kill -9.

Tests in this module share one cluster and run in file order: the destructive ones come last.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import time
from pathlib import Path

import msgpack
import pytest

from harness.admin.client import AdminError
from harness.admin.server import build_app
from harness.bench.failover import write_until_success
from harness.launcher import cluster as cl
from harness.net.client import KvRequest
from quorum import codec
from tests.live import LiveCluster, kraftlab, poll

pytestmark = pytest.mark.integration


def test_up_writes_cluster_json_and_every_controller_names_the_same_leader(
    cluster: LiveCluster,
) -> None:
    doc = json.loads((cluster.data_dir / "cluster.json").read_text())
    assert [n["id"] for n in doc["nodes"]] == [1, 2, 3]
    assert all(n["host"] == "127.0.0.1" and n["pid"] for n in doc["nodes"])
    views = cluster.statuses()
    leaders = {(v["leader_id"], v["leader_epoch"]) for v in views.values()}
    assert len(leaders) == 1, views
    leader, epoch = leaders.pop()
    assert leader in (1, 2, 3) and epoch >= 1
    assert {v["cluster_id"] for v in views.values()} == {doc["cluster_id"]}
    assert views[leader]["role"] == "leader"
    assert sorted(v["role"] for v in views.values()) == ["follower", "follower", "leader"]
    # Refuses to start over a running cluster.
    again = kraftlab("cluster", "up", "--data-dir", str(cluster.data_dir))
    assert again.returncode == 1 and "already running" in again.stderr


def test_status_shows_who_voted_for_the_leader(cluster: LiveCluster) -> None:
    """/quorum/status `voted_id`: a leader was elected by a majority of votes in its epoch, and
    votes are durable, so while that epoch lasts a majority names the leader (itself included)."""
    leader = cluster.agreed_leader()
    views = cluster.statuses()
    epoch = views[leader]["leader_epoch"]
    assert views[leader]["voted_id"] == leader
    voters = [i for i, v in views.items() if v["leader_epoch"] == epoch and v["voted_id"] == leader]
    assert len(voters) >= 2, views


def test_put_then_linearizable_get_on_every_controller(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    follower = next(i for i in cluster.ids() if i != leader)
    written = cluster.client(follower).kv_put("x", "hello")  # forwarded to the leader
    assert written["key"] == "x" and written["version"] >= 1
    for node_id in cluster.ids():
        got = cluster.client(node_id).kv_get("x", "linearizable")
        assert (got["value"], got["version"]) == ("hello", written["version"])
    # cas: a stale expectation fails with 409 CAS_FAILED and changes nothing.
    with pytest.raises(AdminError) as failed:
        cluster.client(leader).kv_cas("x", "not-hello", "y")
    assert (failed.value.status, failed.value.error) == (409, "CAS_FAILED")
    swapped = cluster.client(follower).kv_cas("x", "hello", "world")
    assert swapped["version"] > written["version"]
    assert cluster.client(follower).kv_get("x")["value"] == "world"
    cluster.client(leader).kv_delete("x")
    for node_id in cluster.ids():
        with pytest.raises(AdminError) as missing:
            cluster.client(node_id).kv_get("x")
        assert (missing.value.status, missing.value.error) == (404, "KEY_NOT_FOUND")
    # The replication view (from the leader, also via a follower) lists the three voters.
    rows = cluster.client(follower).get_json("/quorum/replication")
    assert sorted(r["node_id"] for r in rows) == [1, 2, 3]
    assert {r["node_id"]: r["status"] for r in rows}[leader] == "Leader"
    describe = kraftlab("quorum", "describe", "--status", "--data-dir", str(cluster.data_dir))
    assert describe.returncode == 0, describe.stderr
    assert f"LeaderId:               {leader}" in describe.stdout
    assert "CurrentVoters:          [1,2,3]" in describe.stdout
    replication = kraftlab("quorum", "describe", "--replication", "--data-dir", str(cluster.data_dir))
    assert replication.returncode == 0, replication.stderr
    header, *lines = replication.stdout.splitlines()
    assert header.split() == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                              "LastCaughtUpTimestamp", "Status"]
    assert sorted(line.split()[-1] for line in lines) == ["Follower", "Follower", "Leader"]
    put = kraftlab("kv", "put", "cli-key", "cli-value", "--node", str(follower),
                   "--data-dir", str(cluster.data_dir))
    assert put.returncode == 0, put.stderr
    got = kraftlab("kv", "get", "cli-key", "--data-dir", str(cluster.data_dir))
    assert json.loads(got.stdout)["value"] == "cli-value"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("PUT", "/kv/k", b"{not json", 400, "INVALID_REQUEST"),
        ("PUT", "/kv/k", b"[1, 2]", 400, "INVALID_REQUEST"),
        ("PUT", "/kv/k", b'{"value": 5}', 400, "INVALID_REQUEST"),
        ("PUT", "/kv/k", b'{"other": "x"}', 400, "INVALID_REQUEST"),
        ("PUT", "/kv/k", b'{"value_b64": "%%%"}', 400, "INVALID_REQUEST"),
        ("POST", "/kv/k/cas", b'{"value": "x"}', 400, "INVALID_REQUEST"),
        ("POST", "/kv/k/cas", b'{"expected": 3, "value": "x"}', 400, "INVALID_REQUEST"),
        ("GET", "/kv/k?consistency=eventual", None, 400, "INVALID_REQUEST"),
        ("POST", "/nemesis/links", b'{"drop": "all"}', 400, "INVALID_REQUEST"),
        ("POST", "/nemesis/links", b'{"drop": [], "delay_ms": -1}', 400, "INVALID_REQUEST"),
        ("POST", "/nemesis/links", b'{"drop": [], "delay_to": null}', 400, "INVALID_REQUEST"),
        ("GET", "/no/such/route", None, 404, "UNKNOWN_ROUTE"),
    ],
)
def test_bad_http_input_is_a_400_with_a_kafka_error_name(
    cluster: LiveCluster, method: str, path: str, body: bytes | None, status: int, error: str
) -> None:
    for node_id in cluster.ids():  # leader and followers validate before forwarding
        conn = http.client.HTTPConnection("127.0.0.1", cluster.file.node(node_id).admin_port, 5)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = json.loads(resp.read())
        conn.close()
        assert (resp.status, payload["error"]) == (status, error), payload
        assert payload["message"]


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def _frame(obj: object) -> bytes:
    payload = msgpack.packb(obj)
    return struct.pack(">I", len(payload)) + payload


def test_garbage_on_the_rpc_port_closes_only_that_connection(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    node = cluster.file.node(leader)
    doc = cluster.file
    answer = _raw(node.rpc_port, _frame({"kraftlab": 1, "cluster_id": "someone-else", "node_id": 2}))
    assert b"INCONSISTENT_CLUSTER_ID" in answer
    assert _raw(node.rpc_port, os.urandom(64) + b"\xff\xff\xff\xff") == b""
    assert _raw(node.rpc_port, b"\x00\x00\x00\x10abc") == b""  # truncated frame, then EOF
    good_hello = _frame({"kraftlab": 1, "cluster_id": doc.cluster_id, "node_id": 3})
    _raw(node.rpc_port, good_hello + struct.pack(">I", 4) + b"\xc1\xc1\xc1\xc1")  # undecodable
    # A well-formed frame of a type peers never send (a client request on a peer connection).
    not_raft = codec.encode(KvRequest(1, "put", "k", "v"))
    _raw(node.rpc_port, good_hello + struct.pack(">I", len(not_raft)) + not_raft)
    metrics = cluster.client(leader).request("GET", "/metrics")[1]
    values = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines() if line and not line.startswith("#")
    }
    assert values["kraftlab_transport_refused_handshakes_total"] >= 1
    assert values["kraftlab_transport_bad_frames_total"] >= 4
    assert values["kafka_controller_active_controller_count"] == 1
    # Still the same leader, still committing.
    assert cluster.agreed_leader() == leader
    assert cluster.client(leader).kv_put("after-garbage", "ok")["version"] > 0


def test_native_client_path_and_openapi_document(cluster: LiveCluster) -> None:
    import asyncio

    from harness.net.client import ClientError, NativeKvClient

    leader = cluster.agreed_leader()
    follower = next(i for i in cluster.ids() if i != leader)

    async def exercise() -> None:
        client = NativeKvClient()
        node = cluster.file.node(follower)
        await client.connect(node.host, node.rpc_port, cluster.file.cluster_id)
        with pytest.raises(ClientError) as redirected:
            await client.call("put", "native", "v1")
        assert (redirected.value.response.error, redirected.value.response.leader_id) == (
            "NOT_CONTROLLER", leader)
        client.close()
        node = cluster.file.node(leader)
        client = NativeKvClient()
        await client.connect(node.host, node.rpc_port, cluster.file.cluster_id)
        answers = await asyncio.gather(*(client.call("put", f"native-{i}", str(i)) for i in range(50)))
        assert len({a.version for a in answers}) == 50
        got = await client.call("get", "native-7")
        assert (got.value, got.version) == ("7", answers[7].version)
        with pytest.raises(ClientError) as cas:
            await client.call("cas", "native-7", "8", expected="not-7")
        assert cas.value.response.error == "CAS_FAILED"
        client.close()

    asyncio.run(exercise())
    assert cluster.client(follower).kv_get("native-7")["value"] == "7"
    doc = cluster.client(leader).get_json("/openapi.json")
    documented = {(path, method.upper()) for path, item in doc["paths"].items()
                  for method in item if method != "parameters"}
    # Every route the app serves is documented, and nothing else.
    served = {(route.resource.canonical, route.method)
              for route in build_app(None).router.routes()  # type: ignore[arg-type]
              if route.method != "HEAD" and route.resource is not None}
    assert {("/kv/{key}", "PUT"), ("/topics", "POST"), ("/elect-leaders", "POST")} <= served
    assert documented == served

def test_nemesis_links_isolate_the_leader_then_heal(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    others = [i for i in cluster.ids() if i != leader]
    epoch = cluster.statuses()[leader]["leader_epoch"]
    assert cluster.client(leader).request("POST", "/nemesis/links", {"drop": others})[0] == 200
    for node_id in others:
        cluster.client(node_id).request("POST", "/nemesis/links", {"drop": [leader]})
    assert cluster.client(leader).get_json("/nemesis/links") == {"drop": others, "delay_ms": 0}
    try:
        def new_leader_among_others() -> int | None:
            named = cl.agreed_leader(dict(cluster.statuses(others)), others)
            return named if named not in (None, leader) else None

        poll(new_leader_among_others, 15, "the others to elect a new leader")
        # Check-quorum: the cut-off leader resigns (no fetches from a majority).
        poll(lambda: cluster.client(leader, 1).get_json("/quorum/status")["role"] != "leader",
             15, "the isolated leader to resign")
    finally:
        for node_id in cluster.ids():
            cluster.client(node_id).request("DELETE", "/nemesis/links")
    healed = cluster.agreed_leader(timeout_s=15)
    assert cluster.statuses()[healed]["leader_epoch"] > epoch
    assert cluster.client(leader).kv_put("healed", "yes")["version"] > 0

def test_graceful_restart_of_the_leader_resigns_with_end_quorum_epoch(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    node = cluster.file.node(leader)
    restart = kraftlab("cluster", "restart", str(leader), "--data-dir", str(cluster.data_dir))
    assert restart.returncode == 0, restart.stderr
    events = [json.loads(line) for line in Path(node.log_file).read_text().splitlines()
              if line.startswith("{")]
    resigned = [e for e in events if e["event"] == "quorum.resigned"]
    assert resigned and resigned[-1]["reason"] == "graceful"
    assert any(e["event"] == "node.stopped" for e in events)
    assert cluster.agreed_leader() != leader  # a successor took over while it was down

def test_paused_leader_is_replaced_then_rejoins_as_follower(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    others = [i for i in cluster.ids() if i != leader]
    data_dir = str(cluster.data_dir)
    assert kraftlab("cluster", "pause", str(leader), "--data-dir", data_dir).returncode == 0
    try:
        # No closed socket here: the followers notice by the fetch timeout (1 s in these tests).
        def replaced() -> int | None:
            named = cl.agreed_leader(dict(cluster.statuses(others)), others)
            return named if named not in (None, leader) else None

        new_leader = poll(replaced, 15, "a new leader while the old one is paused")
        assert cluster.client(new_leader).kv_put("while-paused", "v")["version"] > 0
    finally:
        assert kraftlab("cluster", "resume", str(leader), "--data-dir", data_dir).returncode == 0
    assert cluster.agreed_leader(timeout_s=15) == new_leader
    assert cluster.client(leader).kv_get("while-paused")["value"] == "v"

def test_quorum_state_survives_kill_9_of_a_follower(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    epoch = cluster.statuses()[leader]["leader_epoch"]
    follower = next(i for i in cluster.ids() if i != leader)
    node = cluster.file.node(follower)
    state_file = cl.Path(node.data_dir) / "__cluster_metadata-0" / "quorum-state"
    assert kraftlab("cluster", "kill", str(follower), "--data-dir", str(cluster.data_dir)).returncode == 0
    assert not cl.is_our_process(node.pid, node.config_file)
    persisted = json.loads(state_file.read_text())
    assert (persisted["leaderEpoch"], persisted["leaderId"]) == (epoch, leader)
    restart = kraftlab("cluster", "restart", str(follower), "--data-dir", str(cluster.data_dir))
    assert restart.returncode == 0, restart.stderr
    # It comes back in the same epoch under the same leader: its pre-vote did not disturb anyone.
    view = poll(lambda: (v := cluster.client(follower, 1).get_json("/quorum/status"))
                and v["leader_id"] == leader and v, 10, "the restarted follower to rejoin")
    assert view["leader_epoch"] == epoch


def test_kill_9_of_the_leader_elects_a_new_leader_that_accepts_writes(cluster: LiveCluster) -> None:
    leader = cluster.agreed_leader()
    old_epoch = cluster.statuses()[leader]["leader_epoch"]
    node = cluster.file.node(leader)
    state_file = cl.Path(node.data_dir) / "__cluster_metadata-0" / "quorum-state"
    assert node.pid is not None
    os.kill(node.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    # Liveness bound only (the failover time is measured by `kraftlab bench failover`, not here).
    _, _, answer = write_until_success(cluster.file, "after-failover", killed_at + 10)
    survivors = [i for i in cluster.ids() if i != leader]
    new_leader = cluster.agreed_leader(survivors)
    assert new_leader != leader
    assert cluster.statuses(survivors)[new_leader]["leader_epoch"] > old_epoch
    for node_id in survivors:
        assert cluster.client(node_id).kv_get("after-failover")["version"] == answer["version"]
    # The old leader's durable state: its epoch and its own vote, as of its last election.
    persisted = json.loads(state_file.read_text())
    assert persisted["leaderEpoch"] == old_epoch and persisted["leaderId"] == leader
    restart = kraftlab("cluster", "restart", str(leader), "--data-dir", str(cluster.data_dir))
    assert restart.returncode == 0, restart.stderr
    assert cluster.agreed_leader() == new_leader
    # Leader and one follower gone: the last controller answers 503 with what it knows.
    last = next(i for i in cluster.ids() if i != new_leader)
    for node_id in cluster.ids():
        if node_id != last:
            assert kraftlab("cluster", "kill", str(node_id), "--data-dir",
                            str(cluster.data_dir)).returncode == 0

    def unavailable() -> AdminError | None:
        try:
            cluster.client(last, 1).kv_put("no-quorum", "v")
        except AdminError as exc:
            return exc if exc.status == 503 else None
        return None

    refused = poll(unavailable, 10, "503 from the controller left alone")
    assert refused.error == "LEADER_NOT_AVAILABLE"
    assert refused.body["leader_epoch"] >= old_epoch + 1
    down = kraftlab("cluster", "down", "--data-dir", str(cluster.data_dir))
    assert down.returncode == 0, down.stderr
    assert all(n.pid is None for n in cluster.file.nodes)



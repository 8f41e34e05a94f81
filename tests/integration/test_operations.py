"""Operator features on real processes, one cluster per module (1 controller, brokers
101-102), laid out by `kraftlab cluster up` with:

- `kraftlab.bind.host=127.0.0.2`: every listener on a loopback alias that is NOT 127.0.0.1, so the
  admin API's real rule applies (writes need the bearer token); no "require token" switch is used;
- per-node overrides: `broker.101.rack=a`, `controller.1.controller.quorum.election.timeout.ms`.

The tests run in file order and build on each other's state: overrides, then security, then a
graceful `cluster down` / `cluster up` that must keep topics and records at the same offsets, then
a partition leader kill that must show in `cluster status` and in /metrics.
"""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminClient
from harness.launcher import cluster as cl
from tests.live import (
    LiveCluster,
    cli,
    kraftlab,
    poll,
    started_cluster,
)

pytestmark = pytest.mark.integration

BIND = "127.0.0.2"
SESSION_TIMEOUT_MS = 2000
RECORDS = 150  # per partition, produced before the restart


@pytest.fixture(scope="module")
def ocluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("ops"), controllers=1, brokers=2, configs=(
            f"kraftlab.bind.host={BIND}", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "broker.heartbeat.interval.ms=300", "broker.101.rack=a",
            "controller.1.controller.quorum.election.timeout.ms=600")) as live:
        yield live


def raw(port: int, method: str, path: str, body: Any = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request with exactly these headers (no token unless given)."""
    conn = http.client.HTTPConnection(BIND, port, timeout=10)
    try:
        payload = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=payload, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data.startswith(b"{") else {}, dict(resp.headers)
    finally:
        conn.close()


def metrics(c: LiveCluster, node_id: int) -> dict[str, float]:
    text = c.client(node_id, 2.0).request("GET", "/metrics")[1]
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def leaders(c: LiveCluster, topic: str) -> dict[int, int | None]:
    parts = c.client(1, 2.0).get_json(f"/topics/{topic}")["partitions"]
    return {p["partition"]: p["leader"] for p in parts}


# --- per-node overrides ----------------------------------------------------------------------

def test_per_node_overrides_apply_to_that_node_only(ocluster: LiveCluster) -> None:
    racks = {b["id"]: b["rack"] for b in ocluster.client(1).get_json("/cluster")["brokers"]}
    assert racks == {101: "a", 102: None}
    files = {n.id: Path(n.config_file).read_text() for n in ocluster.file.nodes}
    assert "broker.rack=a" in files[101] and "broker.rack" not in files[102]
    assert "controller.quorum.election.timeout.ms=600" in files[1]
    assert "controller.quorum.election.timeout.ms=500" in files[101]  # the cluster-wide value
    shown = cli(ocluster, "config", "show", "--node", "101")
    rows = {line.split()[0]: line.split()[1:] for line in shown.splitlines()[2:]}
    assert rows["broker.rack"] == ["a", "node"]
    assert rows["controller.quorum.election.timeout.ms"] == ["500", "cluster"]
    assert rows["replica.lag.time.max.ms"] == ["30000", "default"]
    assert rows["node.id"] == ["101", "layout"]
    overview = cli(ocluster, "config", "show")
    assert "  broker 101: broker.rack=a" in overview
    assert "  controller 1: controller.quorum.election.timeout.ms=600" in overview


# --- security --------------------------------------------------------------------------------

def test_writes_need_the_token_when_not_bound_to_127_0_0_1(ocluster: LiveCluster) -> None:
    token_path = ocluster.data_dir / "admin-token"
    assert stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
    token = token_path.read_text().strip()
    assert len(token) >= 32
    cf = ocluster.file
    assert {n.host for n in cf.nodes} == {BIND}
    writes = [("PUT", "/kv/sec", {"value": "v"}),
              ("POST", "/topics", {"name": "sec", "partitions": 1, "replication_factor": 1}),
              ("POST", "/elect-leaders", {"topic": "sec"}),
              ("POST", "/topics/sec/partitions/0/records", {"records": [{"value": "x"}]}),
              ("POST", "/nemesis/links", {"drop": [2]}),
              ("DELETE", "/kv/sec", None)]
    for node in cf.nodes:
        for method, path, body in writes:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}):
                status, answer, resp_headers = raw(node.admin_port, method, path, body, headers)
                assert status == 401, (node.id, method, path, headers, answer)
                assert answer["error"] == "SASL_AUTHENTICATION_FAILED"
                assert resp_headers["WWW-Authenticate"].startswith("Bearer")
        # Reads stay open (dashboards, status).
        assert raw(node.admin_port, "GET", "/cluster")[0] == 200
        assert raw(node.admin_port, "GET", "/metrics")[0] == 200
    assert ocluster.client(1).get_json("/cluster")["brokers"]  # nothing above changed state
    with pytest.raises(Exception, match="KEY_NOT_FOUND"):
        ocluster.client(1).kv_get("sec")
    # With the token: our own CLI and clients find it by themselves (cluster.json's directory).
    assert "Created topic data." in cli(ocluster, "topic", "create", "data", "--partitions", "2",
                                        "--replication-factor", "2",
                                        "--config", "min.insync.replicas=2")
    broker = cf.node(101)
    forwarded = AdminClient(broker.host, broker.admin_port).kv_put("sec", "v1")  # -> controller
    assert forwarded["version"] > 0
    status, _, _ = raw(broker.admin_port, "PUT", "/kv/sec", {"value": "v2"},
                       {"Authorization": f"Bearer {token}"})
    assert status == 200
    # The token never reaches a log, the state file or a properties file.
    for n in cf.nodes:
        for path in (n.log_file, n.config_file):
            assert token not in Path(path).read_text(), path
    assert token not in (ocluster.data_dir / "cluster.json").read_text()


def test_a_node_refuses_to_start_unprotected_without_a_token(ocluster: LiveCluster) -> None:
    """Broker 102's properties (bound to 127.0.0.2) with the token file missing, or not named at
    all: the node exits 2 before it listens anywhere."""
    node = ocluster.file.node(102)
    token_line = f"kraftlab.admin.token.file={ocluster.data_dir / 'admin-token'}"
    props = Path(node.config_file).read_text()
    assert token_line in props
    spare = ocluster.data_dir / "spare"  # never the live node's directory
    props = props.replace(f"metadata.log.dir={node.data_dir}", f"metadata.log.dir={spare}")
    for variant, message in (
        (props.replace("admin-token", "missing-token"), "cannot read the token file"),
        (props.replace(token_line, ""), "requires a token"),
    ):
        bad = ocluster.data_dir / "bad.properties"
        bad.write_text(variant)
        done = subprocess.run([sys.executable, "-m", "harness.node", "--config", str(bad)],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr, done.stderr
        assert not spare.exists()  # refused before opening its log


# --- down and up again from the data directory -------------------------------------------------

def produce(c: LiveCluster, topic: str, partition: int, values: list[str]) -> tuple[int, int]:
    def attempt() -> dict[str, Any] | None:
        leader = leaders(c, topic)[partition]
        if leader is None:
            return None
        status, body = c.client(leader, 10).request(
            "POST", f"/topics/{topic}/partitions/{partition}/records?acks=all",
            {"records": [{"value": v} for v in values]})
        return body if status == 200 else None

    done = poll(attempt, 20, f"produce to {topic}-{partition}")
    return done["base_offset"], done["last_offset"]


def consume(c: LiveCluster, topic: str, partition: int, count: int) -> list[tuple[int, str]]:
    def attempt() -> list[tuple[int, str]] | None:
        leader = leaders(c, topic)[partition]
        if leader is None:
            return None
        body = c.client(leader, 10).get_json(
            f"/topics/{topic}/partitions/{partition}/records?offset=0&max_records={count + 10}")
        got = [(r["offset"], r["value"]) for r in body["records"]]
        return got if len(got) >= count else None

    return poll(attempt, 30, f"{count} records of {topic}-{partition}")


def test_down_then_up_keeps_topics_and_records_at_the_same_offsets(ocluster: LiveCluster) -> None:
    before = ocluster.client(1).get_json("/topics/data")
    written: dict[int, list[tuple[int, str]]] = {}
    for p in (0, 1):
        values = [f"p{p}-{i}" for i in range(RECORDS)]
        first, last = produce(ocluster, "data", p, values[:100])
        second, end = produce(ocluster, "data", p, values[100:])
        assert (first, last, second, end) == (0, 99, 100, RECORDS - 1)
        written[p] = list(enumerate(values))
        assert consume(ocluster, "data", p, RECORDS) == written[p]
    down = kraftlab("cluster", "down", "--data-dir", str(ocluster.data_dir))
    assert down.returncode == 0, down.stderr
    assert not cl.running_nodes(ocluster.file)
    up = kraftlab("cluster", "up", "--data-dir", str(ocluster.data_dir))
    assert up.returncode == 0, up.stderr + up.stdout
    assert "restarting the stopped cluster" in up.stderr
    after = ocluster.client(1).get_json("/topics/data")
    assert after["topic_id"] == before["topic_id"]
    assert [p["replicas"] for p in after["partitions"]] == [
        p["replicas"] for p in before["partitions"]]
    for p in (0, 1):
        assert consume(ocluster, "data", p, RECORDS) == written[p]
    # ... and the restarted cluster keeps appending after the old log end.
    assert produce(ocluster, "data", 0, ["after-restart"]) == (RECORDS, RECORDS)


# --- a partition leader dies: status columns and metrics -------------------------------------

def test_leader_kill_shows_in_status_and_moves_the_metrics(ocluster: LiveCluster) -> None:
    # Both brokers back in both ISRs after the restart.
    poll(lambda: all(len(p["isr"]) == 2 for p in
                     ocluster.client(1).get_json("/topics/data")["partitions"]), 30, "full ISRs")
    status = cli(ocluster, "cluster", "status")
    assert "fenced brokers: none" in status
    assert "partitions: 2 total, 0 offline, 0 under-replicated, 0 under-min-ISR" in status
    victim = leaders(ocluster, "data")[0]
    assert victim is not None
    survivor = 203 - victim
    controller_before = metrics(ocluster, 1)
    survivor_before = metrics(ocluster, survivor)
    assert controller_before["kafka_controller_active_controller_count"] == 1
    assert controller_before["kafka_controller_fenced_broker_count"] == 0
    assert kraftlab("cluster", "kill", str(victim), "--data-dir",
                    str(ocluster.data_dir)).returncode == 0
    # Fenced after the session timeout; its partitions get the survivor as leader, ISR [survivor].
    poll(lambda: all(p["leader"] == survivor and p["isr"] == [survivor] for p in
                     ocluster.client(1).get_json("/topics/data")["partitions"]), 20,
         "the survivor leads both partitions alone")
    status = cli(ocluster, "cluster", "status")
    assert f"fenced brokers: [{victim}]" in status
    # min.insync.replicas=2 and ISR [survivor]: under-replicated AND under-min-ISR, not offline.
    assert "partitions: 2 total, 0 offline, 2 under-replicated, 2 under-min-ISR" in status
    assert "  under-min-ISR: data-0 data-1" in status
    controller = metrics(ocluster, 1)
    survivor_now = metrics(ocluster, survivor)
    elections = "kafka_controller_leader_elections_total"
    assert controller[elections] >= controller_before[elections] + 1
    assert controller["kafka_controller_unclean_leader_elections_total"] == 0
    assert controller["kafka_controller_fenced_broker_count"] == 1
    assert controller["kafka_controller_offline_partitions_count"] == 0
    shrinks = "kafka_server_replica_manager_isr_shrinks_total"
    assert survivor_now[shrinks] >= survivor_before[shrinks] + 2  # both partitions lost the victim
    assert survivor_now[elections] == controller[elections]  # same records, same count
    prefix = "kafka_server_replica_manager_"
    assert survivor_now[prefix + "leader_count"] == 2
    assert survivor_now[prefix + "under_replicated_partitions"] == 2
    assert survivor_now[prefix + "under_min_isr_partition_count"] == 2
    assert survivor_now["kafka_server_raft_metrics_high_watermark"] > 0
    route = 'kafka_network_request_metrics_total_time_ms_count{method="GET",route="/topics/{topic}"}'
    assert controller[route] >= 1
    # The last broker dies too: nobody left to lead, both partitions offline.
    assert kraftlab("cluster", "kill", str(survivor), "--data-dir",
                    str(ocluster.data_dir)).returncode == 0
    poll(lambda: metrics(ocluster, 1)["kafka_controller_offline_partitions_count"] == 2, 20,
         "both partitions offline")
    status = cli(ocluster, "cluster", "status")
    assert "partitions: 2 total, 2 offline" in status
    assert "  offline: data-0 data-1" in status

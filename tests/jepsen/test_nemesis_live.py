"""The nemesis on real processes: `kraftlab nemesis` and the broker faults of harness/jepsen/nemesis.py.

One cluster (3 controllers, brokers 101-103) with fast fencing, a short replica.lag.time.max.ms
and `kraftlab.log.unflushed.in.process=1` (brokers keep data-log appends in memory until a
flush), shared by the tests in file order. What is checked is what traffic does, not only what
the filters say:
- `nemesis isolate` of a partition leader shows in `nemesis status`; the controllers fence it and
  elect another leader, the ISR drops it; with clients not cut it still answers an acks=1
  produce (the zombie write), which is gone once `nemesis heal` lets it rejoin;
- `--clients-only` silences client HTTP but not the peers (the ISR stays whole); /nemesis/*
  stays reachable so the node can be healed;
- `nemesis partition` of the controller leader from the other controllers: it loses leadership;
- the Jepsen fault leader-cut-from-followers-only shrinks the ISR to the leader, heal_all
  restores it;
- crash-unflushed (all replicas killed at once) loses acknowledged acks=all records that were
  never flushed: the reason Kafka relies on replication, not fsync.
Every wait polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.admin.client import AdminClient, AdminError
from harness.check.history import NEMESIS
from harness.cli.main import main
from harness.jepsen.nemesis import ClusterNemesis, Schedule
from harness.jepsen.recorder import Recorder
from harness.net.pipelined import PipelinedConnection
from tests.live import (
    LiveCluster,
    broker_cluster,
    cli,
    kraftlab,
    poll,
)

pytestmark = pytest.mark.integration

BROKERS = [101, 102, 103]
CONTROLLERS = [1, 2, 3]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with broker_cluster(tmp_path_factory.mktemp("nemesis"), "replica.lag.time.max.ms=1500",
                        "kraftlab.log.unflushed.in.process=1") as live:
        yield live


def create_topic(c: LiveCluster, name: str) -> None:
    cli(c, "topic", "create", name, "--partitions", "1", "--replication-factor", "3")


def describe(c: LiveCluster, topic: str, via: int = 1) -> dict[str, Any]:
    p: dict[str, Any] = c.client(via, 2.0).get_json(f"/topics/{topic}")["partitions"][0]
    return p


def produce(c: LiveCluster, broker: int, topic: str, values: list[str], acks: str = "all",
            timeout_s: float = 5.0) -> dict[str, Any]:  # fmt: skip
    status, body = c.client(broker, timeout_s).request(
        "POST", f"/topics/{topic}/partitions/0/records?acks={acks}&timeout_ms=3000",
        {"records": [{"value": v} for v in values]})
    if status != 200:
        raise AdminError(status, body)
    return dict(body)


def consume(c: LiveCluster, broker: int, topic: str) -> list[str]:
    body = c.client(broker, 5.0).get_json(f"/topics/{topic}/partitions/0/records?offset=0"
                                          "&max_records=1000&max_wait_ms=0")
    return [r["value"] for r in body["records"]]


def replica(c: LiveCluster, broker: int, topic: str) -> dict[str, Any] | None:
    for r in c.client(broker, 2.0).get_json("/partitions"):
        if r["topic"] == topic:
            return dict(r)
    return None


def nemesis(c: LiveCluster, *args: str) -> str:
    """`kraftlab nemesis ARGS --data-dir DIR`, in this process (the same parser and handlers as
    the command; one test runs the real subprocess); it must succeed; its stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["nemesis", *args, "--data-dir", str(c.data_dir)])
    assert code == 0, out.getvalue()
    return out.getvalue()


def links_of(c: LiveCluster) -> dict[int, str]:
    """`nemesis status` parsed: node id -> the Links column."""
    out = nemesis(c, "status")
    rows = [line.split(None, 4) for line in out.splitlines()[1:]]
    return {int(r[0]): r[4] for r in rows}


def answers(client: AdminClient, path: str) -> bool:
    try:
        client.request("GET", path)
        return True
    except OSError:
        return False
    finally:
        client.close()


async def native_connect(c: LiveCluster, node_id: int) -> None:
    node = c.file.node(node_id)
    conn = PipelinedConnection(node.host, node.rpc_port, f"node {node_id}")
    try:
        await conn.connect(c.file.cluster_id, timeout_s=1.0)
    finally:
        conn.close()


def test_links_api_rejects_what_it_does_not_know(live: LiveCluster) -> None:
    client = live.client(1)
    for body, field in (({"drop": [2], "clients": True}, "clients"),
                        ({"drop_clients": "yes"}, "drop_clients"),
                        ({"drop": [True]}, "drop")):
        status, answer = client.request("POST", "/nemesis/links", body)
        assert (status, answer["error"]) == (400, "INVALID_REQUEST") and field in answer["message"]
    assert client.get_json("/nemesis/links") == {"drop": [], "delay_ms": 0}  # nothing was set
    status, answer = client.request("POST", "/nemesis/links", {"drop_clients": False})
    assert (status, answer) == (200, {"drop": [], "delay_ms": 0})


def test_isolated_leader_leaves_the_isr_and_its_zombie_write_is_lost(live: LiveCluster) -> None:
    create_topic(live, "iso")
    produce(live, describe(live, "iso")["leader"], "iso", ["a", "b"])
    old = describe(live, "iso")["leader"]
    nemesis(live, "isolate", str(old))
    shown = links_of(live)
    others = [n for n in CONTROLLERS + BROKERS if n != old]
    assert shown[old] == "drops " + ",".join(map(str, others))
    assert all(shown[n] == f"drops {old}" for n in others)

    # The controllers fence the silent broker and elect another leader; the ISR drops it.
    p: Any = poll(lambda: (d := describe(live, "iso"))["leader"] not in (None, old)
             and old not in d["isr"] and d, 15, "a new leader and an ISR without the cut broker")
    new = p["leader"]
    # Clients were not cut: the old leader, which heard nothing, still takes an acks=1 write.
    try:
        assert produce(live, old, "iso", ["zombie"], acks="1")["base_offset"] == 2
    except AdminError as exc:
        raise AssertionError(f"{exc}; the cut leader's view: {replica(live, old, 'iso')}, "
                             f"the metadata: {p}") from None
    produce(live, new, "iso", ["c"])

    nemesis(live, "heal")
    assert set(links_of(live).values()) == {"connected"}
    poll(lambda: set(describe(live, "iso")["isr"]) == set(BROKERS), 20, "the ISR whole again")
    def caught_up() -> bool:
        mine, theirs = replica(live, old, "iso"), replica(live, new, "iso")
        return bool(mine and theirs and mine["role"] == "follower"
                    and mine["log_end_offset"] == theirs["log_end_offset"])

    poll(caught_up, 20, "the old leader truncated and caught up")
    assert consume(live, new, "iso") == ["a", "b", "c"]  # the acks=1 zombie write is gone


def test_clients_only_cut_silences_clients_but_not_peers(live: LiveCluster) -> None:
    create_topic(live, "quiet")
    leader = describe(live, "quiet")["leader"]
    node = live.file.node(leader)
    out = nemesis(live, "isolate", str(leader), "--clients-only")
    assert "isolating" in out
    assert links_of(live)[leader] == "drops clients"
    assert not answers(AdminClient(node.host, node.admin_port, 1.0), "/health")
    with pytest.raises(OSError):
        produce(live, leader, "quiet", ["x"], timeout_s=1.0)
    # A native client's hello is never answered either (a timeout, not a refusal).
    with pytest.raises(TimeoutError):
        asyncio.run(native_connect(live, leader))
    # Peers still talk: the leader keeps its followers and its controller session.
    other = next(b for b in BROKERS if b != leader)
    p = describe(live, "quiet")
    assert p["leader"] == leader and set(p["isr"]) == set(BROKERS)
    assert replica(live, other, "quiet") is not None
    nemesis(live, "heal")
    assert answers(AdminClient(node.host, node.admin_port, 2.0), "/health")
    # Nothing sent during the cut was executed.
    assert consume(live, leader, "quiet") == []


def test_partition_cuts_the_controller_leader_from_its_voters(live: LiveCluster) -> None:
    leader = live.agreed_leader(CONTROLLERS)
    epoch = live.client(leader).get_json("/quorum/status")["leader_epoch"]
    rest = [n for n in CONTROLLERS if n != leader]
    out = nemesis(live, "partition", str(leader), ",".join(map(str, rest)),
              "--unlisted", "connected")
    assert "(unlisted, connected to all)" in out
    assert links_of(live)[leader] == "drops " + ",".join(map(str, rest))
    poll(lambda: all((s := live.client(n, 1.0).get_json("/quorum/status"))["leader_id"]
                     not in (None, leader) and s["leader_epoch"] > epoch for n in rest),
         15, "a new controller leader among the majority")
    poll(lambda: live.client(leader, 1.0).get_json("/quorum/status")["leader_id"] != leader,
         15, "the cut leader to give up (check-quorum)")
    nemesis(live, "heal")
    assert live.agreed_leader(CONTROLLERS, timeout_s=15) in rest


def run_fault(live: LiveCluster, name: str, topic: str) -> tuple[Recorder, dict[str, Any]]:
    """Plan and apply one Jepsen fault on `topic`; returns the recorder and the fault's value."""
    rec = Recorder()

    async def go() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            nemesis = ClusterNemesis(live.data_dir, session, rec, random.Random(7),
                                     Schedule((name,)), partitions=[(topic, 0)])
            fault = await nemesis.plan(name)
            await nemesis.start_fault(fault)
            return fault.describe()

    return rec, asyncio.run(go())


def heal_all(live: LiveCluster, rec: Recorder) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            nemesis = ClusterNemesis(live.data_dir, session, rec, random.Random(7),
                                     Schedule(()))
            return await nemesis.heal_all()

    return asyncio.run(go())


def test_leader_cut_from_followers_only_shrinks_the_isr_to_the_leader(live: LiveCluster) -> None:
    create_topic(live, "shrink")
    leader = describe(live, "shrink")["leader"]
    rec, fault = run_fault(live, "leader-cut-from-followers-only", "shrink")
    assert fault["leader"] == leader
    assert fault["drop"] == {str(leader): [b for b in BROKERS if b != leader],
                             **{str(b): [leader] for b in BROKERS if b != leader}}
    # The leader still reaches the controllers: once the followers lag (new records they cannot
    # fetch) for replica.lag.time.max.ms, it shrinks the ISR (Kafka: a follower at the leader's
    # log end offset is caught up however long ago it fetched, so a write is needed first).
    produce(live, leader, "shrink", ["lagging"], acks="1")
    poll(lambda: describe(live, "shrink")["isr"] == [leader], 15, "ISR = [leader]")
    assert describe(live, "shrink")["leader"] == leader
    produce(live, leader, "shrink", ["alone"])  # acks=all with the ISR of one (min ISR 1)
    heal = heal_all(live, rec)
    assert all(heal[str(n)] == "ok" for n in CONTROLLERS + BROKERS)
    poll(lambda: set(describe(live, "shrink")["isr"]) == set(BROKERS), 20, "the ISR whole again")
    nemesis_ops = [(e.type, e.f) for e in rec.events if e.process == NEMESIS]
    assert nemesis_ops == [("info", "start-partition")] * 2 + [("info", "stop-all")] * 2


def test_crash_unflushed_loses_the_acknowledged_unflushed_tail(live: LiveCluster) -> None:
    create_topic(live, "unflushed")
    leader = describe(live, "unflushed")["leader"]
    values = [f"v{i}" for i in range(20)]
    assert produce(live, leader, "unflushed", values)["last_offset"] == 19  # acks=all: on 3
    poll(lambda: all((r := replica(live, b, "unflushed")) and r["high_watermark"] == 20
                     for b in BROKERS), 10, "HW 20 on every replica")
    rec, fault = run_fault(live, "crash-unflushed", "unflushed")
    assert fault["nodes"] == BROKERS and fault["unflushed_in_process"] == {
        str(b): True for b in BROKERS}
    start = [e.value for e in rec.events if e.f == "start-kill"][-1]
    assert start["result"] == {str(b): "killed" for b in BROKERS}
    heal = heal_all(live, rec)
    assert all(heal[f"{b}-start"].startswith("started") for b in BROKERS)
    # Every replica restarts from what reached its disk: the 20 records had not been flushed.
    views: Any = poll(lambda: all(replica(live, b, "unflushed") is not None for b in BROKERS)
                 and [replica(live, b, "unflushed") for b in BROKERS], 30,
                 "every replica hosted again")
    assert all(v["log_end_offset"] < 20 for v in views), views
    new_leader = poll(lambda: describe(live, "unflushed")["leader"], 30, "a leader")
    (kept,) = poll(lambda: (consume(live, new_leader, "unflushed"),), 30, "reads served")
    assert len(kept) < len(values) and kept == values[: len(kept)], kept


def test_each_broker_fault_applies_its_shape_and_heals(live: LiveCluster) -> None:
    """Every other broker fault, one after the other on one partition: the filters (or the
    process state) `nemesis status` shows while it holds, one traffic check, then stop_fault."""
    create_topic(live, "faults")
    rec = Recorder()
    seen: dict[str, dict[str, Any]] = {}

    def status_of(node_id: int) -> tuple[str, str]:
        out = nemesis(live, "status")
        row = next(r.split(None, 4) for r in out.splitlines()[1:] if r.split()[0] == str(node_id))
        return row[3], row[4]

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            nemesis = ClusterNemesis(live.data_dir, session, rec, random.Random(3),
                                     Schedule(()), partitions=[("faults", None)])
            for name in ("isolate-partition-leader", "leader-cut-from-followers", "zombie-leader",
                         "isolate-controller-leader", "pause-partition-leader",
                         "kill-partition-leader"):
                fault = await nemesis.plan(name)
                await nemesis.start_fault(fault)
                target = fault.describe()
                seen[name] = target
                node = int(target.get("controller_leader", target.get("leader", -1)))
                process, links = await asyncio.to_thread(status_of, node)
                others = [n for n in CONTROLLERS + BROKERS if n != node]
                match name:
                    case "isolate-partition-leader":
                        assert links == f"drops {','.join(map(str, others))}; drops clients"
                        n = live.file.node(node)
                        assert not answers(AdminClient(n.host, n.admin_port, 0.5), "/health")
                    case "leader-cut-from-followers":
                        assert links == f"drops {','.join(map(str, others))}"
                        assert produce(live, node, "faults", ["cut"], acks="1")["base_offset"] >= 0
                    case "zombie-leader":
                        assert links == "drops 1,2,3"
                    case "isolate-controller-leader":
                        assert links == f"drops {','.join(map(str, others))}"
                    case "pause-partition-leader":
                        assert process == "paused"
                    case "kill-partition-leader":
                        assert process == "stopped"
                await nemesis.stop_fault()
                # A killed node is started again: it answers once it is up, with no filter.
                await asyncio.to_thread(poll, lambda n=node: status_of(n) == ("running", "connected"),
                                        15, f"{name}: node {node} running and connected")

    asyncio.run(go())
    assert {seen[n]["topic"] for n in seen if "topic" in seen[n]} == {"faults"}
    starts = [e.f for e in rec.events if e.process == NEMESIS and e.f.startswith("start-")]
    assert starts == ["start-partition"] * 8 + ["start-pause"] * 2 + ["start-kill"] * 2
    poll(lambda: set(describe(live, "faults")["isr"]) == set(BROKERS), 30, "the ISR whole again")


def test_heal_leaves_every_node_connected(live: LiveCluster) -> None:
    done = kraftlab("nemesis", "heal", "--data-dir", str(live.data_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(links_of(live).values()) == {"connected"}
    assert kraftlab("nemesis", "isolate", "999", "--data-dir", str(Path(live.data_dir))
                    ).returncode == 1

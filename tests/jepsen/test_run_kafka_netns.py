"""`kraftlab jepsen run --system kafka --net netns`: Apache Kafka's JVMs in network namespaces,
a partition the kernel dropping packets (harness/launcher/netns.py, harness/peers/kafka/cluster.py,
harness/jepsen/target_kafka.py, docs/kafka-peer.md "In network namespaces").

- the layout, without root or Kafka: each node's listeners bind and advertise its namespace's
  address, the voters name those addresses, the JVM starts through `ip netns exec`, peer.json
  records the namespaces; which faults `--net netns` adds and which stay refused; a run
  failing half-way (root, no Kafka) leaves no namespace behind;
- one bounded run (root, `kafka_peer`): the queue workload (acks=all, min.insync.replicas=2,
  RF 3, idempotent producers) under `isolate-partition-leader`, the first fault held until a
  write was acknowledged on every partition (`RunOptions.start_when`), the cut an nftables drop
  of every peer and the clients in the leader's namespace, the phase ended as soon as the
  brokers' Metadata names another leader while the old one is cut off (`RunOptions.stop_when`:
  `partition_leader_replaced`), then healed: no acknowledged write lost, the verdict valid,
  every JVM stopped and every namespace of the run deleted. Where namespaces cannot be had it
  skips with the reason, as tests/jepsen/test_run_netns.py does.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import NEMESIS, load_history
from harness.jepsen.nemesis import Schedule, parse_nemesis
from harness.jepsen.nemesis_kafka import KafkaNemesis, unsupported
from harness.jepsen.recorder import Recorder
from harness.jepsen.run_core import RunOptions
from harness.jepsen.runner import RunError, run
from harness.jepsen.target_kafka import check_options
from harness.launcher import netns
from harness.launcher.netns import Netns
from harness.peers.kafka import cluster as pk
from harness.peers.kafka.install import Install
from harness.runtime.config import parse_properties
from tests.jepsen.kafka_runs import kafka_options
from tests.peers.kafka_peer import require_install

MISSING = netns.missing()
needs_netns = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

TOPIC = "jepsen-kafka-netns"
TIME_LIMIT_S = 25.0  # bounds the fault phase if the election never shows
SPLIT_IDS = (1, 2, 3, 101, 102, 103)


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def props(node: pk.PeerNode) -> dict[str, str]:
    return parse_properties(Path(node.config_file).read_text())


# ------------------------------------------------------------ layout (no root, no Kafka)


def test_a_peer_in_namespaces_binds_and_advertises_each_nodes_own_address(
    tmp_path: Path,
) -> None:
    net = Netns(SPLIT_IDS, prefix="kl0a0b0c", subnet="10.222.7")  # never created
    peer = pk.lay_out(tmp_path, "4.4.0", layout="split", net=net)
    assert peer.net == {"prefix": "kl0a0b0c", "subnet": "10.222.7", "node_ids": list(SPLIT_IDS)}
    assert {n.id: (n.host, n.netns) for n in peer.nodes} == {
        i: (f"10.222.7.{k}", f"kl0a0b0c-n{i}") for k, i in enumerate(SPLIT_IDS, start=1)}
    voters = ",".join(f"{i}@10.222.7.{i}:{peer.node(i).controller_port}" for i in (1, 2, 3))
    for node in peer.nodes:
        p = props(node)
        assert p["controller.quorum.voters"] == voters
        if node.is_broker:
            listener = f"PLAINTEXT://{node.host}:{node.kafka_port}"
            assert p["listeners"] == p["advertised.listeners"] == listener
        else:
            assert p["listeners"] == f"CONTROLLER://{node.host}:{node.controller_port}"
    assert peer.bootstrap == ",".join(f"10.222.7.{k}:{peer.node(i).kafka_port}"
                                      for k, i in ((4, 101), (5, 102), (6, 103)))
    # recorded, so `status` and `down` find the namespaces again from peer.json alone
    peer.save(tmp_path)
    again = pk.PeerFile.load(tmp_path)
    assert again.nodes == peer.nodes
    found = again.netns()
    assert found is not None and found.hosts() == net.hosts()
    assert found.created == [net.switch, *(net.name(i) for i in SPLIT_IDS), net.client]


def test_a_node_in_a_namespace_starts_through_ip_netns_exec(tmp_path: Path) -> None:
    install = Install("4.4.0", tmp_path / "lib", "/usr/bin/java")
    net = Netns(SPLIT_IDS, prefix="kl0a0b0c", subnet="10.222.7")
    inside = pk.lay_out(tmp_path / "ns", "4.4.0", layout="split", net=net).node(102)
    cmd = pk.node_command(install, inside)
    assert cmd[:5] == ["ip", "netns", "exec", "kl0a0b0c-n102", "/usr/bin/java"]
    assert cmd[-2:] == ["kafka.Kafka", inside.config_file]
    plain = pk.lay_out(tmp_path / "lo", "4.4.0", layout="split").node(102)
    assert plain.host == pk.HOST and plain.netns is None
    assert pk.node_command(install, plain)[0] == "/usr/bin/java"


def test_a_layout_for_other_nodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(pk.PeerError, match="laid out for nodes"):
        pk.lay_out(tmp_path, "4.4.0", layout="combined", net=Netns(SPLIT_IDS))


def options(out: Path, data_dir: Path | None = None, **changes: Any) -> RunOptions:
    own: dict[str, Any] = {
        "topic": TOPIC, "nemesis": "isolate-partition-leader", "seed": 13, "net": "netns",
        "time_limit_s": TIME_LIMIT_S, "stop_when": KafkaNemesis.partition_leader_replaced,
    }
    return kafka_options(out, data_dir, **{**own, **changes})


@pytest.mark.parametrize(
    "nemesis",
    ["isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
     "partition", "broker", "staggered-isr-drop", "truncate-restart-then-leader-crash",
     "crash"],
)
def test_netns_takes_the_link_faults_and_the_staged_cut(tmp_path: Path, nemesis: str) -> None:
    check_options(options(tmp_path, nemesis=nemesis))  # does not raise
    assert unsupported(parse_nemesis(nemesis), netns=True) == []


def test_a_machine_without_namespaces_refuses_the_kafka_run_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netns, "missing", lambda: "real network partitions need root")
    with pytest.raises(RunError, match="--net netns: real network partitions need root"):
        run(options(tmp_path / "out", tmp_path / "peer"))
    assert not (tmp_path / "peer").exists()  # nothing was laid out


@needs_netns
@pytest.mark.integration
def test_a_kafka_run_failing_half_way_leaves_no_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, seen = namespaces(), []

    def up_then_fail(data_dir: Path, **kwargs: Any) -> pk.PeerFile:
        net = kwargs["net"]
        seen.append(net.prefix)
        assert net.client in namespaces()  # laid out before the peer
        raise pk.PeerError("planted failure")

    monkeypatch.setattr(pk, "up", up_then_fail)
    with pytest.raises(RunError, match="planted failure"):
        run(options(tmp_path / "out", tmp_path / "peer"))
    assert seen and namespaces() == before


# ----------------------------------------------------------------------- the Kafka run


@needs_netns
@pytest.mark.integration
@pytest.mark.kafka_peer
def test_isolating_a_partition_leader_in_the_kernel_elects_another_and_loses_nothing(
    tmp_path: Path,
) -> None:
    require_install()
    before = namespaces()
    data_dir, out = tmp_path / "peer", tmp_path / "out"
    started = time.monotonic()
    try:
        result = run(options(out, data_dir))
    finally:
        if pk.PeerFile.path_in(data_dir).exists():  # the run's own teardown, once more
            pk.down(data_dir, force=True)
    wall_s = time.monotonic() - started
    r = result.results
    assert (result.verdict, result.exit_code) == ("valid", 0), r["anomalies"]
    counts = r["checker"]["counts"]
    assert counts["lost-write"] == 0 and counts["duplicate"] == 0, counts
    assert r["drain_complete"] and r["recovered"] and not r["crashed_tasks"]
    assert r["faults_applied"] == 1
    assert r["stopped_early_s"] is not None  # a new leader while the old one was cut off

    # The JVMs lived on the namespaces' addresses, each in its own namespace.
    prefix, subnet = r["net"]["netns_prefix"], r["net"]["subnet"].removesuffix(".0/24")
    peer = pk.PeerFile.load(data_dir)
    assert {n.host.rsplit(".", 1)[0] for n in peer.nodes} == {subnet}
    assert {n.netns for n in peer.nodes} == {f"{prefix}-n{i}" for i in SPLIT_IDS}

    # The cut was the kernel's: the leader's namespace dropped every peer and the clients,
    # each peer's dropped the leader; the heal deleted the rules.
    ops = load_history(out / "history.jsonl")
    [applied] = [op.value for op in ops if op.process == NEMESIS and op.f == "start-partition"
                 and "result" in (op.value or {})]
    leader = applied["leader"]
    others = sorted(i for i in SPLIT_IDS if i != leader)
    assert applied["drop"][str(leader)] == others and applied["drop_clients"] == [leader]
    assert applied["result"][str(leader)] == "nft drop " + ",".join(map(str, others)) + (
        " +clients")
    assert all(applied["result"][str(i)] == f"nft drop {leader}" for i in others)
    [healed] = [op.value for op in ops if op.process == NEMESIS and op.f == "stop-partition"
                and "result" in (op.value or {})]
    assert set(healed["result"].values()) == {"healed"}

    # Writes were acknowledged on the cut leader's partition before the cut and after it
    # (by the new leader), and every one is in the final drain.
    tp = f"{applied['topic']}-{applied['partition']}"
    cut_at = next(op.invoke.index for op in ops if op.process == NEMESIS
                  and op.f == "start-partition")
    sends = [op for op in ops if op.is_client and op.f == "send" and op.type == "ok"
             and not op.flag("final") and op.value[0] == tp]
    assert [op for op in sends if op.completion.index < cut_at], "no write before the cut"
    drained = {value for op in ops if op.f == "poll" and op.type == "ok" and op.flag("final")
               for _offset, value in op.value.get(tp, [])}
    assert {op.value[1][1] for op in sends} <= drained
    check = r["replica_check"]  # the replicas' log files agree below their high watermarks
    assert check["counts"] == {} and check["compared_offsets"][tp] > 0, check

    # Teardown: every JVM stopped by PID, then every namespace of the run deleted.
    assert not any(pk.running(n) for n in peer.nodes)
    assert not {ns for ns in namespaces() if ns.startswith(prefix)}
    assert namespaces() == before
    print(f"kafka netns run: {wall_s:.1f} s wall")


def test_broker_epochs_count_the_nemesis_starts_and_unfence_on_the_jvms_own_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Kafka nemesis's stand-in for broker epochs (nemesis_kafka.py "Broker epochs"): a
    start raises the broker's incarnation; it stays fenced until that broker's own Metadata
    lists it. The JVMs and their answers are replaced here; the real sequence is checked on
    the session peer (tests/peers/test_kafka_peer.py, the kill -9 test)."""
    peer = pk.lay_out(tmp_path, "4.4.0", layout="split")
    peer.save(tmp_path)
    nemesis = KafkaNemesis(tmp_path, Recorder(), random.Random(1),
                           Schedule(("kill-broker",)))
    answers: dict[int, list[int] | None] = {101: [101, 102, 103], 102: None, 103: [101, 103]}
    monkeypatch.setattr(pk, "view", lambda _peer, _timeout: {"brokers_seen": answers})
    monkeypatch.setattr(pk, "running", lambda node: node.pid is not None)

    def start(_peer: pk.PeerFile, _dir: Path, node: pk.PeerNode) -> None:
        node.pid = 4242

    monkeypatch.setattr(pk, "start_node", start)
    assert asyncio.run(nemesis.broker_epochs()) == {
        101: (0, False), 102: (0, True), 103: (0, False)}
    assert asyncio.run(nemesis._process_action("start", 102)) == "started pid 4242"
    assert asyncio.run(nemesis.broker_epochs())[102] == (1, True)  # spawned, not yet listed
    answers[102] = [101, 103]  # a broker answering, listing others only, is still fenced
    assert asyncio.run(nemesis.broker_epochs())[102] == (1, True)
    answers[102] = [101, 102, 103]
    assert asyncio.run(nemesis.broker_epochs())[102] == (1, False)
    assert asyncio.run(nemesis._process_action("start", 102)) == "already running"
    assert asyncio.run(nemesis.broker_epochs())[102] == (1, False)

"""Real network partitions: the cluster in network namespaces the run creates and deletes, a
partition the kernel dropping packets (harness/launcher/netns.py, `kraftlab jepsen run --net
netns`).

- the namespaces' layout: a node's cut is an nftables drop of exactly its peers' addresses, a
  heal removes it, and teardown deletes every namespace the run created (and only those), also
  when creating them failed half-way;
- a kv run isolating the controller leader by the kernel: the others elect a new leader while
  the old one is cut off, the partition heals, and the Jepsen checker finds no anomaly with
  linearizable reads; the nodes bound their namespaces' addresses and every namespace is gone;
- where namespaces cannot be had (no root, no `ip`, no `nft`), the run refuses at once with
  the reason, and these tests skip with it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.check.history import NEMESIS, load_history
from harness.jepsen.nemesis import ClusterNemesis
from harness.jepsen.runner import DEFAULT_OVERRIDES, RunError, RunOptions, run
from harness.jepsen.workload_kv import KvOptions
from harness.launcher import cluster as cl
from harness.launcher import netns

pytestmark = pytest.mark.integration

MISSING = netns.missing()
needs_netns = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


@needs_netns
def test_a_cut_drops_exactly_the_peers_and_teardown_deletes_only_our_namespaces() -> None:
    before = namespaces()
    net = netns.Netns((1, 2, 3)).create()
    try:
        ours = {net.switch, net.client, net.name(1), net.name(2), net.name(3)}
        assert namespaces() == before | ours
        net.cut(1, [2, 3])
        rules = net.rules(1)
        assert f"ip daddr {{ {net.address(2)}, {net.address(3)} }} drop" in rules
        assert f"ip saddr {{ {net.address(2)}, {net.address(3)} }} drop" in rules
        assert net.client_address not in rules  # clients still reach it
        net.cut(2, [1], clients=True)
        assert net.client_address in net.rules(2)
        assert net.rules(3) == ""  # untouched
        net.heal(1)
        assert net.rules(1) == "" and net.cut_nodes == {2}
    finally:
        assert net.teardown() == []
    assert namespaces() == before


@needs_netns
def test_a_failed_layout_leaves_no_namespace_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    before = namespaces()
    net = netns.Netns((1, 2))
    real = net._attach
    calls = []

    def attach_then_fail(name: str, port: str, address: str) -> None:
        calls.append(name)
        if len(calls) == 2:
            raise netns.NetnsError("planted failure")
        real(name, port, address)

    monkeypatch.setattr(net, "_attach", attach_then_fail)
    with pytest.raises(netns.NetnsError, match="planted"):
        net.create()
    assert net.created == [] and namespaces() == before


def test_a_machine_without_namespaces_refuses_the_run_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netns, "missing", lambda: "real network partitions need root")
    options = RunOptions(out_dir=tmp_path / "out", net="netns", data_dir=tmp_path / "c")
    with pytest.raises(RunError, match="--net netns: real network partitions need root"):
        run(options)
    assert not (tmp_path / "c" / "cluster.json").exists()  # nothing was started


async def leader_replaced_while_cut(nemesis: ClusterNemesis) -> bool:
    """The isolate-leader fault holds and the majority side has elected another leader."""
    fault = nemesis.active
    if fault is None or fault.name != "isolate-leader":
        return False
    isolated = max(fault.grudge, key=lambda n: len(fault.grudge[n]))
    leader = await nemesis.leader()  # the highest epoch any controller reports
    return leader is not None and leader != isolated


@needs_netns
def test_isolating_the_leader_in_the_kernel_elects_another_and_loses_nothing(
    tmp_path: Path, data_dir: Path
) -> None:
    before = namespaces()
    out = tmp_path / "out"
    options = RunOptions(
        out_dir=out, nemesis="isolate-leader", time_limit_s=40.0, seed=5, data_dir=data_dir,
        kv=KvOptions(keys=3, concurrency=4, rate=30.0, op_timeout_s=2.0),
        fault_s=(30.0, 30.0), lead_in_s=1.0, net="netns",
        overrides=dict(DEFAULT_OVERRIDES), stop_when=leader_replaced_while_cut,
    )
    result = run(options)
    r = result.results
    assert (result.exit_code, result.verdict, r["anomalies"]) == (0, "valid", {})
    assert r["stopped_early_s"] is not None  # a new leader was elected under the cut
    assert r["controller_leader_elections"] >= 1 and r["recovered"]
    # The nodes lived on the namespaces' addresses; the cut was nftables, not our filter.
    subnet = r["net"]["subnet"].removesuffix(".0/24")
    nodes = cl.ClusterFile.load(data_dir).nodes
    assert {n.host.rsplit(".", 1)[0] for n in nodes} == {subnet}
    assert all(n.netns and n.netns.startswith(r["net"]["netns_prefix"]) for n in nodes)
    ops = load_history(out / "history.jsonl")
    [applied] = [op.value for op in ops if op.process == NEMESIS and op.f == "start-partition"
                 and "result" in (op.value or {})]
    isolated = next(k for k, v in applied["drop"].items() if len(v) == 2)
    assert applied["result"][isolated] == "nft drop " + ",".join(
        str(n) for n in sorted(applied["drop"][isolated]))
    assert r["heal"][isolated] == "healed"
    assert namespaces() == before  # every namespace of the run deleted
    assert not cl.running_nodes(cl.ClusterFile.load(data_dir))

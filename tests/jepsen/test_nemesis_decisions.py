"""Whom the nemesis believes, and what a cancelled process fault leaves behind.

- `active_controller` picks the controller to ask about partition leaders from hand-made
  /quorum/status answers: a lagging follower (old epoch, old leader) and a deposed leader still
  claiming an old epoch are never chosen; `leader_replaced` (the `stop_when` decision of the
  broker faults) only says yes on the active fault's own partition with another leader.
- `heal_all` after a kill whose caller was cancelled while its SIGKILL had not landed yet: the
  heal waits for the kill, then starts the node (before: it saw the still-running process, sent
  SIGCONT, and the node died right after, left down). A stand-in process (its argv names
  `harness.node` and the node's config file, as the launcher's check wants) plays the node.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.jepsen.nemesis import (
    ClusterNemesis,
    Fault,
    PartitionLeader,
    Schedule,
    active_controller,
    leader_replaced,
    leaders_in,
)
from harness.jepsen.recorder import Recorder
from harness.launcher import cluster as cl


def view(node_id: int, role: str, leader_id: int | None, epoch: int) -> dict[str, Any]:
    return {"node_id": node_id, "role": role, "leader_id": leader_id, "leader_epoch": epoch}


def test_active_controller_is_the_self_declared_leader_of_the_highest_epoch() -> None:
    views = {
        1: view(1, "leader", 1, 4),     # deposed: still claims epoch 4, has not heard of 5
        2: view(2, "follower", 1, 4),   # lagging follower: names the old leader
        3: view(3, "leader", 3, 5),     # the real leader
    }
    assert active_controller(views) == 3
    # the lagging follower and the deposed leader alone: node 1 is the best claim there is
    assert active_controller({1: views[1], 2: views[2], 3: None}) == 1
    # a follower that knows epoch 5 outranks the deposed leader's claim: nobody to ask yet
    assert active_controller({1: views[1], 2: view(2, "follower", 3, 5), 3: None}) is None
    # a follower naming a leader is not a claim (only the leader's own word counts)
    assert active_controller({2: view(2, "follower", 3, 5), 3: None}) is None
    assert active_controller({1: view(1, "candidate", None, 6), 3: views[3]}) is None
    assert active_controller({1: None, 2: None}) is None
    # two claims in one epoch cannot both be right: believe neither
    assert active_controller({1: view(1, "leader", 1, 5), 3: views[3]}) is None


def doc(*parts: tuple[int, int | None]) -> dict[str, Any]:
    return {"partitions": [{"partition": p, "leader": lead, "replicas": [4, 5, 6],
                            "isr": [] if lead is None else [lead]} for p, lead in parts]}


def test_leaders_in_keeps_the_wanted_led_partitions() -> None:
    docs = {"q": doc((0, 4), (1, None), (2, 6)), "other": doc((0, 5))}
    assert [(p.topic, p.partition, p.leader) for p in leaders_in(docs, [("q", None)])] == [
        ("q", 0, 4), ("q", 2, 6)]
    assert [(p.topic, p.partition) for p in leaders_in(docs, [("q", 2), ("other", 0)])] == [
        ("other", 0), ("q", 2)]
    assert leaders_in({}, [("q", None)]) == []


def test_leader_replaced_only_on_the_faulted_partition_with_another_leader() -> None:
    cut = Fault("leader-cut-from-followers", "partition",
                target={"topic": "q", "partition": 1, "leader": 4})

    def led(topic: str, partition: int, leader: int) -> PartitionLeader:
        return PartitionLeader(topic, partition, leader, (4, 5, 6), (leader,))

    assert not leader_replaced(cut, [led("q", 1, 4), led("q", 0, 5)])  # same leader still
    assert not leader_replaced(cut, [led("q", 0, 5)])  # the partition has no leader now
    assert not leader_replaced(cut, [led("other", 1, 5)])  # same number, another topic
    assert not leader_replaced(cut, [])  # no linearizable answer
    assert leader_replaced(cut, [led("q", 1, 5)])
    assert not leader_replaced(None, [led("q", 1, 5)])
    assert not leader_replaced(Fault("halves", "partition"), [led("q", 1, 5)])


def test_heal_all_waits_for_a_cancelled_kill_then_starts_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = cl.create_cluster(tmp_path, 3, {})
    victim = cluster.controllers[0]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()",
                             "harness.node", victim.config_file], stdin=subprocess.PIPE)
    try:
        victim.pid = proc.pid
        cluster.save(tmp_path)
        deadline = time.monotonic() + 10.0  # its /proc cmdline can read empty at first
        while not cl.is_our_process(proc.pid, victim.config_file):
            assert time.monotonic() < deadline, "the stand-in process never looked like the node"
            time.sleep(0.01)  # poll interval of a condition with a deadline
        heal_checked = threading.Event()  # set when the heal first asks "is the victim running?"
        entered = threading.Event()
        real_stop, real_check = cl.stop_node, cl.is_our_process

        def slow_stop(node: cl.NodeEntry, *, force: bool, timeout_s: float = 10.0) -> bool:
            entered.set()
            # the SIGKILL lands late: after the heal has looked (the bug), or, when the heal
            # waits for it (the fix), once this bounded wait is over
            heal_checked.wait(timeout=1.0)
            return real_stop(node, force=force, timeout_s=timeout_s)

        def check(pid: int | None, config_file: str) -> bool:
            if threading.current_thread() is threading.main_thread() and pid == proc.pid:
                heal_checked.set()
            return real_check(pid, config_file)

        started: list[int] = []

        def fake_start(c: cl.ClusterFile, data_dir: Path, node: cl.NodeEntry) -> None:
            started.append(node.id)

        monkeypatch.setattr(cl, "stop_node", slow_stop)
        monkeypatch.setattr(cl, "is_our_process", check)
        monkeypatch.setattr(cl, "start_node", fake_start)

        async def scenario() -> dict[str, Any]:
            async with aiohttp.ClientSession() as session:
                nemesis = ClusterNemesis(tmp_path, session, Recorder(), random.Random(1),
                                         Schedule(()))
                kill = asyncio.create_task(nemesis._process("kill", victim.id))
                assert await asyncio.to_thread(entered.wait, 5.0)
                kill.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await kill
                healed = await nemesis.heal_all()
                assert not nemesis._in_flight
                return healed

        healed = asyncio.run(scenario())
        assert proc.wait(timeout=5.0) == -9  # the kill did land
        assert victim.id in started, healed  # and the heal started the node again
        assert healed[f"{victim.id}-start"].startswith("started")
        assert cl.ClusterFile.load(tmp_path).node(victim.id).pid is None  # kill recorded
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5.0)

"""replication.mode=raft on real processes (3 controllers + brokers 101-103 on loopback): the
replicas of a raft partition elect their own leader, so

- kill -9 of the leader's broker: a surviving replica leads and takes acks=all writes while the
  dead broker is still registered and unfenced at the controller (no broker session timeout on
  the way), and the controller learns the new leader and its Raft epoch from it;
- with every controller killed: an idempotent producer keeps writing, the leader's broker is
  killed, leadership moves, the client finds the new leader through a broker's Metadata answer
  (the brokers' own Raft state), and every record is consumed exactly once, in order.

On the suite's shared broker cluster (tests/conftest.py `brokers`: the next module finds every
node started again), on topics of its own. Every wait polls a condition with a deadline;
processes are killed by their recorded PID. The failover times are printed (run with -s), never
asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from harness.admin.client import AdminError
from harness.launcher import cluster as cl
from tests.live import BROKER_SESSION_TIMEOUT_MS, BROKERS, CONTROLLERS, LiveCluster, cli, poll

pytestmark = pytest.mark.integration



def described(c: LiveCluster, topic: str) -> dict[str, Any]:
    """Partition 0 as the metadata image has it (linearizable, via the active controller)."""
    p: dict[str, Any] = c.client(CONTROLLERS[0], 2.0).get_json(f"/topics/{topic}")["partitions"][0]
    return p


def raft_row(c: LiveCluster, broker: int, topic: str) -> dict[str, Any] | None:
    for row in c.client(broker, 2.0).get_json("/partitions"):
        if row["topic"] == topic and row["partition"] == 0:
            return dict(row)
    return None


def raft_leader(c: LiveCluster, topic: str, among: list[int]) -> tuple[int, int] | None:
    """(broker, Raft epoch) of the replica that leads partition 0, asking the brokers."""
    for b in among:
        try:
            row = raft_row(c, b, topic)
        except (AdminError, OSError):
            continue
        if row is not None and row["role"] == "leader" and row["high_watermark"] > 0:
            return b, row["leader_epoch"]
    return None


def produce(c: LiveCluster, broker: int, topic: str, value: str) -> dict[str, Any] | None:
    """One acks=all record through `broker`'s admin API; None unless it leads and commits."""
    status, body = c.client(broker, 10.0).request(
        "POST", f"/topics/{topic}/partitions/0/records?acks=all&timeout_ms=5000",
        {"records": [{"value": value}]})  # fmt: skip
    return body if status == 200 else None


def kill_broker(c: LiveCluster, broker: int) -> None:
    node = c.file.node(broker)
    assert node.pid is not None and cl.is_our_process(node.pid, node.config_file)
    os.kill(node.pid, signal.SIGKILL)


def broker_state(c: LiveCluster, broker: int) -> dict[str, Any]:
    brokers = c.client(CONTROLLERS[0], 2.0).get_json("/cluster")["brokers"]
    return next(b for b in brokers if b["id"] == broker)


def test_describe_status_and_metrics_show_the_raft_groups(brokers: LiveCluster) -> None:
    c = brokers
    topic = "raft-shown"
    cli(c, "topic", "create", topic, "--partitions", "2", "--replication-factor", "3",
        "--config", "replication.mode=raft")  # fmt: skip
    for p in (0, 1):
        poll(lambda p=p: c.client(1, 2.0).get_json(f"/topics/{topic}")["partitions"][p]["leader"]
             is not None, 20, f"a leader of partition {p}")  # fmt: skip
    for i in range(3):
        assert poll(lambda i=i: produce(c, described(c, topic)["leader"], topic, f"d{i}"), 10,
                    "acks=all")  # fmt: skip
    image = described(c, topic)
    leader = image["leader"]
    # acks=1: answered with its offset once the leader appended it; acks=0: nothing to wait for.
    path = f"/topics/{topic}/partitions/0/records"
    status, body = c.client(leader).request("POST", f"{path}?acks=1", {"records": [{"value": "one"}]})
    assert (status, body["base_offset"]) == (200, 4)  # after the epoch marker and d0-d2
    status, _ = c.client(leader).request("POST", f"{path}?acks=0", {"records": [{"value": "zero"}]})
    assert status == 200
    follower = next(b for b in BROKERS if b != leader)
    status, body = c.client(follower).request("POST", f"{path}?acks=all",
                                              {"records": [{"value": "x"}]})  # fmt: skip
    assert (status, body["error"], body["leader"]) == (421, "NOT_LEADER_OR_FOLLOWER", leader)
    read = poll(lambda: (page := c.client(leader).get_json(f"{path}?offset=0"))["high_watermark"]
                == 6 and page, 10, "acks=1 and acks=0 writes committed")  # fmt: skip
    # The LeaderChange control batch at offset 0 is skipped: data records only.
    assert [(r["offset"], r["value"]) for r in read["records"]] == [
        (1, "d0"), (2, "d1"), (3, "d2"), (4, "one"), (5, "zero")]  # fmt: skip

    def shown() -> str | None:
        out = cli(c, "topic", "describe", topic)
        # Every voter fetched recently once the leader heard from all of them: no "unknown".
        return out if out.count("(follower, lag 0)") == 4 else None

    out = poll(shown, 20, "both partitions' followers caught up in describe")
    lines = out.splitlines()
    assert "Configs: replication.mode=raft" in lines[0]
    assert lines[1] == ("\tNote: min.insync.replicas does not apply: acks=all waits for a "
                        "majority of the voters (replication.mode=raft)")
    raft0 = next(line for line in lines if line.startswith("\t  Raft:"))
    fields = dict(f.split(": ", 1) for f in raft0.strip().removeprefix("Raft: ").split("\t"))
    assert fields["Leader"] == str(image["leader"])
    assert fields["Epoch"] == str(image["leader_epoch"])
    assert fields["HighWatermark"] == fields["LogEndOffset"] == "6"  # marker + 5 records
    assert f"{image['leader']} (leader)" in fields["Voters"] and fields["AcksAllNeeds"] == "2"
    status = cli(c, "cluster", "status")
    assert "0 offline, 0 under-replicated, 0 under-min-ISR" in status

    def leader_count() -> float | None:
        metrics = c.client(leader, 2.0).request("GET", "/metrics")[1]
        led = next(line for line in metrics.splitlines()
                   if line.startswith("kraftlab_raft_partition_leader_count "))  # fmt: skip
        return float(led.split()[1]) or None

    # The gauge is read from the broker's raft driver; on a loaded machine a scrape can land
    # before the driver's round that counts the new leadership, so wait for it (bounded).
    assert poll(leader_count, 10, "the leader's raft_partition_leader_count gauge") >= 1
    metrics = c.client(leader, 2.0).request("GET", "/metrics")[1]
    assert f'kraftlab_replica_high_watermark{{partition="0",topic="{topic}"}}' in metrics


def test_kill_minus_9_of_the_leader_moves_leadership_before_the_session_expires(
    brokers: LiveCluster,
) -> None:
    c = brokers
    topic = "raft-failover"
    cli(c, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3",
        "--config", "replication.mode=raft")  # fmt: skip
    # The replicas elect a leader; its broker reports it, the image records it.
    first = poll(lambda: (p := described(c, topic))["leader"] is not None and p, 20,
                 "the first Raft leader in the image")  # fmt: skip
    old, old_epoch = first["leader"], first["leader_epoch"]
    assert old_epoch >= 1  # the Raft epoch (epoch 0 has no leader), not a controller bump
    acked = [f"v{i}" for i in range(20)]
    for value in acked:
        assert poll(lambda v=value: produce(c, old, topic, v), 10, f"acks=all {value}")
    others = [b for b in BROKERS if b != old]

    killed_at = time.monotonic()
    kill_broker(c, old)
    # A surviving replica accepts an acks=all write (a majority of 3 commits it).
    committed = poll(lambda: next((body for b in others
                                   if (body := produce(c, b, topic, "after"))), None),
                     20, "an acks=all write on a new leader")  # fmt: skip
    failover_ms = (time.monotonic() - killed_at) * 1000
    # Causality, not a clock: the controller recorded the new leader at a newer Raft epoch, and
    # a linearizable read AFTER that still shows the killed broker registered and unfenced (a
    # dead broker is never unfenced again), so no session timeout was on the leadership path.
    now = poll(lambda: (p := described(c, topic))["leader"] in others and p, 20,
               "the new leader in the image")  # fmt: skip
    state = broker_state(c, old)
    assert not state["fenced"], "the new leader waited for the dead broker's fencing"
    assert now["leader_epoch"] > old_epoch
    assert committed["leader_epoch"] == now["leader_epoch"]
    print(f"\nraft failover (kill -9 of broker {old} -> acks=all ok on the new leader): "
          f"{failover_ms:.0f} ms; broker.session.timeout.ms={BROKER_SESSION_TIMEOUT_MS}")
    # Every acknowledged write survived, in order, then the new one.
    out = cli(c, "consume", topic, "--from-beginning", "--max-messages", str(len(acked) + 1),
              "--timeout-ms", "10000")  # fmt: skip
    assert out.splitlines() == [*acked, "after"]
    # The session expires later: the controller then takes it out of the ISR, and nothing else.
    poll(lambda: broker_state(c, old)["fenced"], 30, "the dead broker fenced")
    after = described(c, topic)
    assert (after["leader"], after["leader_epoch"]) == (now["leader"], now["leader_epoch"])
    assert old not in after["isr"]

    cli(c, "cluster", "restart", str(old))

    def converged() -> bool:
        rows = [raft_row(c, b, topic) for b in BROKERS]
        ends = {(r["log_end_offset"], r["high_watermark"]) if r else None for r in rows}
        return len(ends) == 1 and (pair := ends.pop()) is not None and pair[0] == pair[1]

    poll(converged, 30, "every replica at the same LEO = HW")
    assert (raft_row(c, old, topic) or {}).get("role") == "follower"
    poll(lambda: old in described(c, topic)["isr"], 30, "the restarted broker back in the ISR")


def test_with_every_controller_down_writes_go_on_and_leadership_moves(
    brokers: LiveCluster,
) -> None:
    c = brokers
    topic = "raft-headless"
    count = 4000
    cli(c, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3",
        "--config", "replication.mode=raft")  # fmt: skip
    leader, epoch = poll(lambda: raft_leader(c, topic, BROKERS), 20, "a Raft leader")
    values = [f"h{i:05d}" for i in range(count)]
    third = count // 3
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "produce", topic, "--partition", "0", "--acks", "all",
         "--data-dir", str(c.data_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(("\n".join(values[:third]) + "\n").encode())
        proc.stdin.flush()
        poll(lambda: (raft_row(c, leader, topic) or {}).get("high_watermark", 0) > third // 2,
             30, "the producer's first records committed")  # fmt: skip
        for controller in CONTROLLERS:
            cli(c, "cluster", "kill", str(controller))  # kill -9 by recorded PID
        proc.stdin.write(("\n".join(values[third:2 * third]) + "\n").encode())
        proc.stdin.flush()
        poll(lambda: (raft_row(c, leader, topic) or {}).get("high_watermark", 0) > third,
             30, "writes committed with no controller")  # fmt: skip
        killed_at = time.monotonic()
        kill_broker(c, leader)
        survivors = [b for b in BROKERS if b != leader]
        new, new_epoch = poll(lambda: raft_leader(c, topic, survivors), 20, "a new Raft leader")
        moved_ms = (time.monotonic() - killed_at) * 1000
        assert new != leader and new_epoch > epoch
        proc.stdin.write(("\n".join(values[2 * third:]) + "\n").encode())
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"produced {count} records".encode() in err
    print(f"\nraft leader moved with every controller down: {moved_ms:.0f} ms")
    # A consumer with no controller: Metadata from a surviving broker names the new leader.
    out = cli(c, "consume", topic, "--partition", "0", "--from-beginning", "--max-messages",
              str(count), "--timeout-ms", "20000", timeout_s=120)  # fmt: skip
    assert out.splitlines() == values  # nothing lost, duplicated or reordered

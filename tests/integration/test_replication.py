"""Replication on real processes: 3 controllers + 3 brokers, RF 3 topics, the data plane end to end.

- `kraftlab produce` / `kraftlab consume` round trip with acks=all, and every replica ends with
  the same log end offset and high watermark;
- kill -9 of the partition leader in the middle of a CLI produce (idempotent producer retries):
  consuming everything gives exactly the produced sequence, nothing lost or duplicated;
- the killed broker, restarted, truncates/catches up and rejoins the ISR by itself (its leader's
  AlterPartition), after which `elect-leaders --election-type preferred` restores the preferred
  leader (the demonstration of docs/operations.md, with no special route);
- NOT_ENOUGH_REPLICAS for acks=all with min.insync.replicas=2 once both followers are down, while
  acks=1 is still accepted (and not visible to consumers: strict min ISR).

The tests run in file order on the suite's shared broker cluster (tests/conftest.py `brokers`),
each on topics of its own. Every wait polls a condition with a deadline; processes are killed by
their recorded PID.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from harness.admin.client import AdminError
from harness.launcher import cluster as cl
from tests.live import BROKERS, LiveCluster, cli, poll

pytestmark = pytest.mark.integration


def wait_replicas_converged(c: LiveCluster, topic: str, end: int, brokers: list[int],
                            timeout_s: float = 20) -> None:  # fmt: skip
    """Every replica has the same LEO, equal to its HW, and at least `end` (a leader change may add
    an epoch marker after the records)."""

    def converged() -> bool:
        views = [c.replica_view(b, topic) for b in brokers]
        ends = {(v["log_end_offset"], v["high_watermark"]) if v else None for v in views}
        return len(ends) == 1 and (pair := ends.pop()) is not None and pair[0] == pair[1] >= end

    poll(converged, timeout_s, f"{topic}: LEO = HW >= {end}, the same on {brokers}")


def consume_all(c: LiveCluster, topic: str, count: int) -> list[str]:
    out = cli(c, "consume", topic, "--from-beginning", "--max-messages", str(count),
              "--timeout-ms", "20000", timeout_s=120)  # fmt: skip
    return out.splitlines()


def produce_process(c: LiveCluster, topic: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "produce", topic, "--acks", "all",
         "--data-dir", str(c.data_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def kill(c: LiveCluster, node_id: int) -> None:
    node = c.file.node(node_id)
    assert cl.is_our_process(node.pid, node.config_file)
    assert node.pid is not None
    os.kill(node.pid, signal.SIGKILL)
    assert cl.wait_dead(node, 10)


def test_produce_consume_round_trip_acks_all(brokers: LiveCluster) -> None:
    brokers.create_topic("roundtrip")
    values = [f"r{i:05d}" for i in range(3000)]
    done = subprocess.run(
        [sys.executable, "-m", "harness", "produce", "roundtrip", "--acks", "all",
         "--data-dir", str(brokers.data_dir)],
        input="\n".join(values).encode() + b"\n", capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert b"produced 3000 records (partition 0 offsets 0..2999)" in done.stderr
    assert consume_all(brokers, "roundtrip", 3000) == values
    wait_replicas_converged(brokers, "roundtrip", 3000, BROKERS)
    leader = brokers.partition("roundtrip")["leader"]
    view = brokers.replica_view(leader, "roundtrip")
    assert view is not None and view["role"] == "leader" and view["isr"] == BROKERS


def test_http_produce_and_consume_with_errors(brokers: LiveCluster) -> None:
    p = brokers.partition("roundtrip")
    leader = p["leader"]
    follower = next(b for b in BROKERS if b != leader)
    path = "/topics/roundtrip/partitions/0/records"
    client = brokers.client(leader)
    status, ok = client.request("POST", f"{path}?acks=all",
                                {"records": [{"key": "k", "value": "h1"}, {"value": "h2"}]})
    assert status == 200 and (ok["base_offset"], ok["last_offset"]) == (3000, 3001)
    got = client.get_json(f"{path}?offset=3000&max_records=5")
    assert [(r["offset"], r["key"], r["value"]) for r in got["records"]] == [
        (3000, "k", "h1"), (3001, None, "h2")]
    assert got["high_watermark"] == 3002
    status, moved = brokers.client(follower).request("POST", path, {"records": [{"value": "x"}]})
    assert (status, moved["error"], moved["leader"]) == (421, "NOT_LEADER_OR_FOLLOWER", leader)
    # Idempotence: the same (producer id, epoch, sequence) twice is written once.
    batch = {"records": [{"value": "i"}], "producer_id": 777, "producer_epoch": 0,
             "base_sequence": 0}
    first = client.request("POST", path, batch)[1]
    assert client.request("POST", path, batch)[1] == first
    status, gap = client.request("POST", path, {**batch, "base_sequence": 5})
    assert (status, gap["error"]) == (409, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    for bad in (f"{path}?acks=2", f"{path}?timeout_ms=x", "/topics/roundtrip/partitions/x/records"):
        status, body = client.request("POST", bad, {"records": [{"value": "v"}]})
        assert (status, body["error"]) == (400, "INVALID_REQUEST"), bad
    for body in ({}, {"records": []}, {"records": [{"key": "no value"}]},
                 {"records": [{"value": "v"}], "producer_id": 1},
                 # explicit nulls are wrong types (the OpenAPI fuzz found such a case on topics)
                 {"records": [{"value": "v", "headers": None}]},
                 {"records": [{"value": "v"}], "producer_id": None, "producer_epoch": None,
                  "base_sequence": None}):
        status, answer = client.request("POST", path, body)
        assert (status, answer["error"]) == (400, "INVALID_REQUEST"), body
    with pytest.raises(AdminError) as out_of_range:
        client.get_json(f"{path}?offset=999999")
    assert (out_of_range.value.status, out_of_range.value.error) == (416, "OFFSET_OUT_OF_RANGE")
    with pytest.raises(AdminError) as unknown:
        client.get_json("/topics/nope/partitions/0/records")
    assert (unknown.value.status, unknown.value.error) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


def run_kill_leader_midway(c: LiveCluster, topic: str, count: int) -> None:
    c.create_topic(topic)
    leader = c.partition(topic)["leader"]
    values = [f"m{i:06d}" for i in range(count)]
    half = count // 2
    proc = produce_process(c, topic)
    try:
        assert proc.stdin is not None
        proc.stdin.write(("\n".join(values[:half]) + "\n").encode())
        proc.stdin.flush()
        # Kill the leader once part of the first half is committed: batches are in flight.
        poll(lambda: (c.replica_view(leader, topic) or {}).get("high_watermark", 0) >= half // 2,
             30, "half of the first half committed")
        kill(c, leader)
        proc.stdin.write(("\n".join(values[half:]) + "\n").encode())
        _, err = proc.communicate(timeout=120)  # flushes and closes stdin: EOF
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"produced {count} records".encode() in err
    new_leader = c.partition(topic)["leader"]
    assert new_leader not in (leader, None)
    consumed = consume_all(c, topic, count)
    assert len(consumed) == count and consumed == values  # nothing lost, duplicated or reordered
    survivors = [b for b in BROKERS if b != leader]
    wait_replicas_converged(c, topic, count, survivors)

    # The killed broker restarts, catches up and rejoins the ISR through its leader alone.
    cli(c, "cluster", "restart", str(leader))
    poll(lambda: sorted(c.partition(topic)["isr"]) == BROKERS, 30, f"{leader} back in the ISR")
    wait_replicas_converged(c, topic, count, BROKERS)
    # The demonstration of docs/operations.md, complete: the preferred replica takes the lead back.
    out = cli(c, "elect-leaders", "--topic", topic, "--election-type", "preferred")
    assert "Successfully completed leader election (PREFERRED)" in out
    poll(lambda: c.partition(topic)["leader"] == leader, 10, "the preferred leader restored")
    status, ok = c.client(leader).request(
        "POST", f"/topics/{topic}/partitions/0/records?acks=all", {"records": [{"value": "end"}]})
    # At or after `count`: a new leader may have appended an epoch marker (a control record).
    assert status == 200 and ok["base_offset"] >= count


def test_kill_leader_midway_100k_nothing_lost_or_duplicated(brokers: LiveCluster) -> None:
    # 100k records, leader killed; about 7 s here (well under the ~60 s budget of the default run).
    run_kill_leader_midway(brokers, "failover", 100_000)


def test_not_enough_replicas_when_both_followers_are_down(brokers: LiveCluster) -> None:
    brokers.create_topic("strict", 1, "min.insync.replicas=2")
    p = brokers.partition("strict")
    leader = p["leader"]
    followers = [b for b in p["replicas"] if b != leader]
    path = "/topics/strict/partitions/0/records"
    client = brokers.client(leader)
    status, _ = client.request("POST", f"{path}?acks=all", {"records": [{"value": "ok"}]})
    assert status == 200
    for b in followers:
        kill(brokers, b)
    poll(lambda: brokers.partition("strict")["isr"] == [leader], 20, "ISR shrunk to the leader")
    poll(lambda: brokers.replica_view(leader, "strict")["isr"] == [leader], 10, "leader saw it")
    status, refused = client.request("POST", f"{path}?acks=all", {"records": [{"value": "no"}]})
    assert (status, refused["error"]) == (503, "NOT_ENOUGH_REPLICAS")
    status, accepted = client.request("POST", f"{path}?acks=1", {"records": [{"value": "one"}]})
    assert status == 200 and accepted["base_offset"] == 1
    # Strict min ISR: the HW does not move while the ISR is below min.insync.replicas.
    assert client.get_json(f"{path}?offset=0")["high_watermark"] == 1
    for b in followers:
        cli(brokers, "cluster", "restart", str(b))
    poll(lambda: sorted(brokers.partition("strict")["isr"]) == sorted(p["replicas"]), 30,
         "followers back in the ISR")
    poll(lambda: client.get_json(f"{path}?offset=0")["high_watermark"] == 2, 10, "HW moves again")


def test_a_topic_deleted_and_created_again_starts_empty(brokers: LiveCluster) -> None:
    brokers.create_topic("reborn")
    path = "/topics/reborn/partitions/0/records"
    leader = brokers.partition("reborn")["leader"]
    status, _ = brokers.client(leader).request("POST", path, {"records": [{"value": "old"}]})
    assert status == 200
    cli(brokers, "topic", "delete", "reborn")
    poll(lambda: all(brokers.replica_view(b, "reborn") is None for b in BROKERS), 10,
         "replicas of the deleted topic removed")
    brokers.create_topic("reborn")
    leader = brokers.partition("reborn")["leader"]
    status, ok = brokers.client(leader).request("POST", path, {"records": [{"value": "new"}]})
    assert status == 200 and ok["base_offset"] == 0
    got = brokers.client(leader).get_json(f"{path}?offset=0")
    assert [r["value"] for r in got["records"]] == ["new"]

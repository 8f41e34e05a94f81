"""`kraftlab jepsen run --system kafka`: the queue workload, nemesis and checker against Apache
Kafka (harness/jepsen/target_kafka.py, docs/kafka-peer.md "Jepsen runs against Kafka").

One bounded run (`kafka_run`, once for the module) boots its own peer in the split layout
(controllers 1-3, brokers 101-103) with the run's settings, so the session's `kafka_peer` is
never faulted; the run tears it down by PID, and the fixture kills by recorded PID whatever
would still run. Its workload: acks=all, min.insync.replicas=2, RF 3, idempotent producers,
under `kill-partition-leader` (kill -9 of a partition leader's JVM), started once a write was
acknowledged on every partition (`RunOptions.start_when`), held until the
brokers' Metadata names another leader for that partition and the workload has written for
POST_ELECTION_S since (`RunOptions.stop_when`: no guessed durations), then healed (the JVM
started again). A missing Kafka install fails the module, saying to run `bash .ci/install`.

The refusals (kv workload, link faults on loopback) need no Kafka and run
first; the runs in network namespaces are tests/jepsen/test_run_kafka_netns.py's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.check.history import load_history
from harness.jepsen.nemesis_kafka import KafkaNemesis
from harness.jepsen.runner import RunError, RunOptions, RunResult, run
from harness.jepsen.workload_queue import QueueOptions
from harness.peers.kafka import cluster as pk
from harness.peers.kafka.install import KAFKA_VERSION
from harness.results.schema import read_dataset
from tests.jepsen.kafka_runs import kafka_options
from tests.peers.kafka_peer import require_install

TOPIC = "jepsen-kafka"
POST_ELECTION_S = 1.0  # writes after the new leader was seen, before the heal
TIME_LIMIT_S = 20.0  # bounds the fault phase if the election never shows


def leader_replaced_then_written(seconds: float) -> Callable[[KafkaNemesis], Awaitable[bool]]:
    """The active kill's partition has another leader in the brokers' Metadata, and the
    workload has written for `seconds` since."""
    seen: list[float] = []

    async def condition(nemesis: KafkaNemesis) -> bool:
        if not seen:
            if not await nemesis.partition_leader_replaced():
                return False
            seen.append(time.monotonic())
        return time.monotonic() - seen[0] >= seconds

    return condition


def options(out: Path, data_dir: Path | None = None, **changes: Any) -> RunOptions:
    own: dict[str, Any] = {
        "topic": TOPIC, "nemesis": "kill-partition-leader", "seed": 11,
        "time_limit_s": TIME_LIMIT_S, "stop_when": leader_replaced_then_written(POST_ELECTION_S),
    }
    return kafka_options(out, data_dir, **{**own, **changes})


# ------------------------------------------------------------------ refusals (no Kafka needed)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"nemesis": "isolate-partition-leader"}, "use --net netns for isolate-partition"),
        ({"nemesis": "partition"}, "use --net netns for isolate-one"),
        ({"nemesis": "staggered-isr-drop"}, "use --net netns for staggered-isr-drop"),
        (
            {"nemesis": "truncate-restart-then-leader-crash"},
            "use --net netns for truncate-restart-then-leader-crash",
        ),
        ({"net": "bogus"}, "unknown net 'bogus'"),
        ({"workload": "kv"}, "needs --consistency local: a Kafka broker answers DescribeConfigs"),
        ({"workload": "bank"}, "runs the queue and kv workloads"),
        ({"queue": QueueOptions(topic=TOPIC, replication_mode="quorum")}, "ISR with leader epochs"),
    ],
)
def test_the_kafka_target_refuses_what_it_cannot_do_before_starting(
    tmp_path: Path, changes: dict[str, Any], words: str
) -> None:
    with pytest.raises(RunError, match=words):
        run(options(tmp_path / "out", tmp_path / "peer", **changes))
    assert not (tmp_path / "peer").exists()  # nothing was laid out, let alone started


def test_an_unknown_system_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="unknown system 'redpanda'"):
        run(options(tmp_path / "out", system="redpanda"))


# -------------------------------------------------------------------------- the Kafka run


@pytest.fixture(scope="module")
def kafka_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunResult]:
    require_install()
    root = tmp_path_factory.mktemp("jepsen-kafka")
    data_dir = root / "peer"
    try:
        yield run(options(root / "out", data_dir))
    finally:
        if pk.PeerFile.path_in(data_dir).exists():  # the run's own teardown, once more
            stuck = pk.down(data_dir, force=True)
            assert not stuck, f"Kafka nodes {stuck} did not stop"


@pytest.mark.kafka_peer
def test_acks_all_under_leader_kill_9_loses_no_acknowledged_write(kafka_run: RunResult) -> None:
    r = kafka_run.results
    assert (kafka_run.verdict, kafka_run.exit_code) == ("valid", 0), r["anomalies"]
    assert r["acks"] == "all" and r["min_insync_replicas"] == 2 and r["idempotence"]
    counts = r["checker"]["counts"]
    assert counts["lost-write"] == 0 and counts["duplicate"] == 0, counts
    assert r["drain_complete"] and r["recovered"] and not r["crashed_tasks"]

    # The fault really happened: one kill -9 of the partition's leader, healed by a restart,
    # and the partition was led by another broker before the heal (the stop condition).
    ops = load_history(kafka_run.out_dir / "history.jsonl")
    kills = [op for op in ops if op.f == "start-kill" and op.completion is not None]
    assert len(kills) == 1 and r["faults_applied"] == 1
    fault = kills[0].completion.value
    victim, tp = fault["leader"], f"{fault['topic']}-{fault['partition']}"
    assert fault["result"] == {str(victim): "killed"}
    assert r["stopped_early_s"] is not None  # a new leader was seen: no guessed duration
    assert r["partition_leader_elections"] >= 1

    # Writes were acknowledged on the killed leader's partition before the kill and after
    # it, and every one of them is in the final drain (what "no lost write" means here).
    sends = [
        op
        for op in ops
        if op.is_client
        and op.f == "send"
        and op.type == "ok"
        and not op.flag("final")
        and op.value[0] == tp
    ]
    kill_at = kills[0].invoke.index
    before = [op for op in sends if op.completion.index < kill_at]
    after = [op for op in sends if op.invoke.index > kill_at]
    assert before and after, (len(before), len(after))
    drained = {
        value
        for op in ops
        if op.f == "poll" and op.type == "ok" and op.flag("final")
        for offset, value in op.value.get(tp, [])
    }
    assert {op.value[1][1] for op in before + after} <= drained

    # The brokers' replicas, read from their log directories, agree below their checkpointed
    # high watermarks on every partition, the killed leader's among them after its restart.
    check = r["replica_check"]
    assert check["counts"] == {} and check["compared_offsets"][tp] > 0, check


@pytest.mark.kafka_peer
def test_the_result_names_the_system_it_ran_against(kafka_run: RunResult) -> None:
    out = kafka_run.out_dir
    results = json.loads((out / "results.json").read_text())
    assert results["system"] == "kafka" and results["options"]["system"] == "kafka"
    assert results["peer"]["system"] == "apache-kafka"
    assert results["peer"]["version"] == KAFKA_VERSION and results["peer"]["layout"] == "split"
    assert results["cluster"] == {"controllers": 3, "brokers": 3}
    assert results["summary_row"]["system"] == "kafka"
    assert json.loads((out / "summary.json").read_text())["system"] == "kafka"
    (row,) = read_dataset(out / "summary")
    assert row.system == "kafka" and row.run_id.startswith("jepsen-kafka-queue-")
    assert row.lost_writes == 0 and row.acked_writes > 0
    assert f"on Apache Kafka {KAFKA_VERSION} under" in (out / "report.html").read_text()
    # the peer's node logs, named as a kraftlab run names its nodes'
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "broker-101.log",
        "broker-102.log",
        "broker-103.log",
        "controller-1.log",
        "controller-2.log",
        "controller-3.log",
    ]

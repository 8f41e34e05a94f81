"""Dynamic topic configs from the outside, on real processes (1 controller + 2 brokers, RF 2).

`kraftlab config alter --topic T --add-config k=v --delete-config k` (kafka-configs.sh --alter)
sends PATCH /topics/{topic}/configs (IncrementalAlterConfigs) to a broker, which forwards it to
the active controller; the committed Config records reach the leader's open log, so on a live
topic with data:
- segment.bytes=4096 makes the next appends roll 4 KiB segments (the old 1 GiB-limit segment is
  closed by the first append that does not fit);
- retention.bytes then deletes the oldest segments on the leader (its log start offset moves past
  0 and the first segment file goes), within a few retention checks
  (log.retention.check.interval.ms, short here);
- `kraftlab topic describe` shows the overrides as kafka-topics.sh does (`Configs: k=v,...`) and
  `kraftlab config describe` lists them with their source; deleting one removes it.
Rejected alters (unknown key, bad value, unknown topic) are 400 INVALID_CONFIG naming the key /
404 UNKNOWN_TOPIC_OR_PARTITION and change nothing (all or nothing).

Every wait polls a condition with a deadline; processes are killed by their recorded PID.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live import (
    LiveCluster,
    cli,
    kraftlab,
    poll,
    started_cluster,
)

pytestmark = pytest.mark.integration

TOPIC = "altered"
BROKERS = [101, 102]
SEGMENT_BYTES = 4096
RETENTION_BYTES = 2 * SEGMENT_BYTES


@pytest.fixture(scope="module")
def ccluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("topic-configs"), controllers=1, brokers=2,
                         configs=("log.retention.check.interval.ms=200",
                                  "log.segment.delete.delay.ms=500",
                                  # Kafka's "unlimited" broker defaults (refused by `cluster
                                  # up` before).
                                  "log.retention.ms=-1", "log.retention.bytes=-1")) as live:
        yield live


def leader_view(c: LiveCluster) -> dict[str, Any] | None:
    for broker in BROKERS:
        for r in c.client(broker, 2.0).get_json("/partitions"):
            if r["topic"] == TOPIC and r["role"] == "leader":
                return {**r, "broker": broker}
    return None


def segments(c: LiveCluster, broker: int) -> list[str]:
    data = Path(c.file.node(broker).data_dir) / "data"
    dirs = [p for p in data.glob(f"{TOPIC}-0*") if p.is_dir() and not p.name.endswith("-delete")]
    assert len(dirs) == 1, dirs
    return sorted(p.name for p in dirs[0].glob("*.log"))


def local_overrides(c: LiveCluster, broker: int, topic: str) -> dict[str, str]:
    """The topic's overrides in this broker's own metadata image."""
    configs = c.client(broker, 2.0).get_json(f"/topics/{topic}/configs?consistency=local")
    return {e["name"]: e["value"] for e in configs["configs"] if not e["is_default"]}


def produce(c: LiveCluster, broker: int, start: int, count: int, per_batch: int) -> None:
    client = c.client(broker, 10.0)
    for first in range(start, start + count, per_batch):
        records = [{"value": f"r{i:05d}-" + "x" * 90} for i in range(first, first + per_batch)]
        status, body = client.request("POST", f"/topics/{TOPIC}/partitions/0/records?acks=all",
                                      {"records": records})  # fmt: skip
        assert status == 200, body


def alter(c: LiveCluster, *args: str) -> Any:
    return kraftlab("config", "alter", "--topic", TOPIC, *args, "--data-dir", str(c.data_dir))


def test_altering_a_live_topic_rolls_segments_and_applies_retention(ccluster: LiveCluster) -> None:
    c = ccluster
    cli(c, "topic", "create", TOPIC, "--partitions", "1", "--replication-factor", "2")
    lv = poll(lambda: leader_view(c), 30, "a leader for the topic")
    leader = lv["broker"]
    produce(c, leader, 0, 300, 30)  # ~33 KB, one batch of ~3.3 KB per request
    assert segments(c, leader) == ["00000000000000000000.log"]  # 1 GiB segments: never rolled
    assert "\tConfigs: \n" in cli(c, "topic", "describe", TOPIC)  # no overrides yet

    # Through a broker that is not the controller: forwarded to the active controller.
    done = alter(c, "--add-config", f"segment.bytes={SEGMENT_BYTES}", "--node", str(BROKERS[1]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Completed updating config for topic {TOPIC}."
    # The broker applies the Config record when its image has it; appends after that roll.
    poll(lambda: all(local_overrides(c, b, TOPIC) == {"segment.bytes": str(SEGMENT_BYTES)}
                     for b in BROKERS), 10, "the override in both brokers' images")
    produce(c, leader, 300, 300, 10)  # ~1.1 KB batches: a new 4 KiB segment every ~3 batches
    rolled = segments(c, leader)
    assert rolled[0] == "00000000000000000000.log"
    assert len(rolled) >= 8, rolled  # ~33 KB more in 4 KiB segments
    assert all(len(s) == 24 for s in rolled)

    out = cli(c, "topic", "describe", TOPIC)
    assert f"Configs: segment.bytes={SEGMENT_BYTES}\n" in out, out

    done = alter(c, "--add-config", f"retention.bytes={RETENTION_BYTES}")
    assert done.returncode == 0, done.stderr

    def retained() -> dict[str, Any] | None:
        v = leader_view(c)
        if v is None or v["log_start_offset"] == 0 or v["high_watermark"] != 600:
            return None
        left = segments(c, leader)
        if left[0] == "00000000000000000000.log" or len(left) > 5:
            return None  # retention.bytes 8 KiB keeps 2-3 segments of ~3.3 KB (+ the active one)
        return v

    v = poll(retained, 30, "the oldest segments deleted on the leader by retention.bytes")
    assert 300 <= v["log_start_offset"] < 600  # the whole first segment (0..299) went
    first = c.client(leader).get_json(
        f"/topics/{TOPIC}/partitions/0/records?offset={v['log_start_offset']}&max_records=1")
    assert first["records"][0]["offset"] == v["log_start_offset"]

    out = cli(c, "topic", "describe", TOPIC)
    assert f"Configs: retention.bytes={RETENTION_BYTES},segment.bytes={SEGMENT_BYTES}\n" in out
    described = cli(c, "config", "describe", "--topic", TOPIC)
    assert described.splitlines() == [
        f"Dynamic configs for topic {TOPIC} are:",
        f"  retention.bytes={RETENTION_BYTES} sensitive=false "
        f"synonyms={{DYNAMIC_TOPIC_CONFIG:retention.bytes={RETENTION_BYTES}}}",
        f"  segment.bytes={SEGMENT_BYTES} sensitive=false "
        f"synonyms={{DYNAMIC_TOPIC_CONFIG:segment.bytes={SEGMENT_BYTES}}}",
    ]

    # --delete-config: back to the default (Kafka's retention.bytes=-1, unlimited).
    done = alter(c, "--delete-config", "retention.bytes")
    assert done.returncode == 0, done.stderr
    out = cli(c, "topic", "describe", TOPIC)
    assert f"Configs: segment.bytes={SEGMENT_BYTES}\n" in out, out
    every = c.client(BROKERS[0]).get_json(f"/topics/{TOPIC}/configs")["configs"]
    by_name = {e["name"]: e for e in every}
    assert by_name["retention.bytes"] == {"name": "retention.bytes", "value": "-1",
                                          "source": "DEFAULT_CONFIG", "is_default": True}
    assert by_name["segment.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"


def test_rejected_alters_name_the_problem_and_change_nothing(ccluster: LiveCluster) -> None:
    c = ccluster
    name = "guarded"
    cli(c, "topic", "create", name, "--partitions", "1", "--replication-factor", "1",
        "--config", "retention.ms=60000")
    client = c.client(BROKERS[0])
    path = f"/topics/{name}/configs"

    def overrides() -> dict[str, str]:
        return {e["name"]: e["value"] for e in client.get_json(path)["configs"]
                if not e["is_default"]}

    assert overrides() == {"retention.ms": "60000"}
    cases = [
        ({"set": {"segment.bytes": "4096", "no.such.config": "1"}}, "no.such.config"),
        ({"set": {"segment.bytes": "4096", "retention.ms": "soon"}}, "retention.ms"),
        ({"set": {"segment.bytes": "10"}}, "segment.bytes"),  # Kafka's minimum is 14
        ({"delete": ["retention.ms", "not.a.config"]}, "not.a.config"),
        ({"set": {"cleanup.policy": "compact"}}, "cleanup.policy"),
    ]
    for body, key in cases:
        status, answer = client.request("PATCH", path, body)
        assert (status, answer["error"], answer.get("config")) == (400, "INVALID_CONFIG", key), (
            body, answer)
        assert key in answer["message"]
    for body in ({}, {"set": {"a": True}}, {"delete": "retention.ms"}, {"sett": {}}):
        status, answer = client.request("PATCH", path, body)
        assert (status, answer["error"]) == (400, "INVALID_REQUEST"), (body, answer)
    status, answer = client.request("PATCH", "/topics/nope/configs", {"set": {"retention.ms": "1"}})
    assert (status, answer["error"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    status, answer = client.request("GET", "/topics/nope/configs")
    assert (status, answer["error"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
    assert overrides() == {"retention.ms": "60000"}  # all or nothing: segment.bytes not set

    done = kraftlab("config", "alter", "--topic", name, "--add-config", "retention.ms=x",
                    "--data-dir", str(c.data_dir))
    assert done.returncode == 1
    assert "INVALID_CONFIG (config retention.ms)" in done.stderr, done.stderr
    done = kraftlab("config", "alter", "--topic", name, "--data-dir", str(c.data_dir))
    assert done.returncode == 1 and "--add-config" in done.stderr
    # Both in one request: set one, delete another (kafka-configs.sh --add-config + --delete-config)
    done = kraftlab("config", "alter", "--topic", name, "--add-config",
                    "segment.bytes=8192,max.message.bytes=2048", "--delete-config", "retention.ms",
                    "--data-dir", str(c.data_dir))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert overrides() == {"segment.bytes": "8192", "max.message.bytes": "2048"}
    described = cli(c, "config", "describe", "--entity-type", "topics", "--entity-name", name)
    assert described.splitlines()[1:] == [  # kafka-configs.sh's spelling works too
        "  max.message.bytes=2048 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2048}",
        "  segment.bytes=8192 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes=8192}",
    ]
    # The lowered max.message.bytes reaches the leader's replica: a bigger batch is 413.
    def leader() -> int | None:
        for b in BROKERS:
            for r in c.client(b, 2.0).get_json("/partitions"):
                if r["topic"] == name and r["role"] == "leader":
                    return b
        return None

    led_by = poll(leader, 30, "the leader of the guarded topic")

    def too_large() -> bool:
        status, answer = c.client(led_by).request(
            "POST", f"/topics/{name}/partitions/0/records?acks=1",
            {"records": [{"value": "y" * 4000}]})
        return status == 413 and answer["error"] == "MESSAGE_TOO_LARGE"

    poll(too_large, 10, "413 MESSAGE_TOO_LARGE over the altered max.message.bytes")

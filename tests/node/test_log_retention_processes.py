"""Topic log configs on real processes (3 controllers + 3 brokers, RF 3): a topic created with a
small segment.bytes and retention.bytes rolls segments on every replica, the retention check
(log.retention.check.interval.ms, short here) deletes the old ones on the leader, and the followers
follow the leader's log start and delete theirs; a consumer below the new log start gets
OFFSET_OUT_OF_RANGE; a batch over max.message.bytes is MESSAGE_TOO_LARGE; a deleted topic's
directories are renamed `-delete` at once and gone after log.segment.delete.delay.ms.

On the suite's shared broker cluster (tests/conftest.py `brokers`, whose settings include the short
retention check and delete delay), on topics of its own. Every wait polls a condition with a
deadline; processes are killed by their recorded PID.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.admin.client import AdminError
from tests.live import BROKERS, SEGMENT_DELETE_DELAY_MS, LiveCluster, cli, poll

pytestmark = pytest.mark.integration

TOPIC = "retained"
SEGMENT_BYTES = 4096
RETENTION_BYTES = 3 * SEGMENT_BYTES
COUNT = 3000  # ~110 bytes each with framing: ~80 segments of 4 KiB
DELETE_DELAY_MS = SEGMENT_DELETE_DELAY_MS


def replica_dirs(c: LiveCluster, name: str) -> dict[int, list[Path]]:
    """Broker id -> its directories under `<node dir>/data` whose name starts with `name`."""
    out: dict[int, list[Path]] = {}
    for broker in BROKERS:
        data = Path(c.file.node(broker).data_dir) / "data"
        out[broker] = sorted(p for p in data.glob(f"{name}*") if p.is_dir())
    return out


def views(c: LiveCluster) -> dict[int, dict[str, Any]]:
    out = {}
    for broker in BROKERS:
        for r in c.client(broker, 2.0).get_json("/partitions"):
            if r["topic"] == TOPIC:
                out[broker] = r
    return out


def test_small_segments_roll_and_retention_deletes_them_on_every_replica(brokers: LiveCluster) -> None:
    c = brokers
    cli(c, "topic", "create", TOPIC, "--partitions", "1", "--replication-factor", "3",
        "--config", f"segment.bytes={SEGMENT_BYTES}", "--config", f"retention.bytes={RETENTION_BYTES}",
        "--config", "max.message.bytes=2048")  # fmt: skip
    values = [f"r{i:05d}-" + "x" * 90 for i in range(COUNT)]
    done = subprocess.run(
        [sys.executable, "-m", "harness", "produce", TOPIC, "--acks", "all", "--batch-size", "1024",
         "--data-dir", str(c.data_dir)],
        input="\n".join(values) + "\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"produced {COUNT} records" in done.stderr

    def retained() -> dict[int, dict[str, Any]] | None:
        v = views(c)
        if len(v) != 3 or any(r["high_watermark"] != COUNT or r["log_start_offset"] == 0 for r in v.values()):
            return None
        dirs = replica_dirs(c, f"{TOPIC}-0")
        segments = {b: sorted(p.name for p in d[0].glob("*.log")) for b, d in dirs.items()}
        # retention.bytes keeps >= 12 KiB: 3 closed segments of <= 4 KiB plus the active one
        # (at most 5 with a partly filled one), and the first segment is gone everywhere.
        if any(not 3 <= len(s) <= 5 or s[0] == "00000000000000000000.log" for s in segments.values()):
            return None
        return v

    v = poll(retained, 60, "old segments deleted on the leader and both followers")
    leader = next(b for b, r in v.items() if r["role"] == "leader")
    start = v[leader]["log_start_offset"]
    assert 0 < start < COUNT
    for r in v.values():  # followers follow the leader's log start (or passed it themselves)
        assert 0 < r["log_start_offset"] <= COUNT

    client = c.client(leader, 5.0)
    with pytest.raises(AdminError) as below:
        client.get_json(f"/topics/{TOPIC}/partitions/0/records?offset=0&max_records=1")
    assert below.value.error == "OFFSET_OUT_OF_RANGE"

    def read_at_log_start() -> dict[str, Any] | None:
        # Read at the leader's log start as it is now: a retention check (every 300 ms) may
        # still move it on after the poll above (up to 5 segments can be over retention.bytes),
        # and a read below the new start is OFFSET_OUT_OF_RANGE (counted as "not yet").
        now = views(c)[leader]["log_start_offset"]
        page: dict[str, Any] = client.get_json(
            f"/topics/{TOPIC}/partitions/0/records?offset={now}&max_records=1")
        return page if page["log_start_offset"] == now else None

    first = poll(read_at_log_start, 30, "a read at the leader's log start")
    start_now = first["log_start_offset"]
    assert start <= start_now < COUNT
    assert first["records"][0]["offset"] == start_now
    assert first["records"][0]["value"] == values[start_now]

    status, body = client.request("POST", f"/topics/{TOPIC}/partitions/0/records?acks=1",
                                  {"records": [{"value": "y" * 4000}]})  # fmt: skip
    assert status == 413 and body["error"] == "MESSAGE_TOO_LARGE"


def test_a_deleted_topics_directories_are_removed_after_the_delay(brokers: LiveCluster) -> None:
    c = brokers
    name = "doomed"
    cli(c, "topic", "create", name, "--partitions", "2", "--replication-factor", "3")
    poll(lambda: all(len(d) == 2 for d in replica_dirs(c, f"{name}-").values()), 30,
         "both partitions' directories on every broker")  # fmt: skip
    cli(c, "topic", "delete", name)

    def renamed() -> bool:
        dirs = replica_dirs(c, f"{name}-")
        return all(len(d) == 2 and all(p.name.endswith("-delete") for p in d) for d in dirs.values())

    # Either seen renamed (the usual case: the delay is 1.5 s) or already gone.
    poll(lambda: renamed() or all(not d for d in replica_dirs(c, f"{name}-").values()), 30,
         "renamed to <topic>-<partition>.<uuid>-delete")  # fmt: skip
    poll(lambda: all(not d for d in replica_dirs(c, f"{name}-").values()), 30,
         "removed after log.segment.delete.delay.ms")  # fmt: skip

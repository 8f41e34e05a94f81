"""The definitions behind `cluster status` and /metrics, without processes (fast; no marker).

`partition_health` (harness/runtime/status.py) must count offline / under-replicated /
under-min-ISR / at-min-ISR the way Kafka defines them; `MetadataCounters` (harness/runtime/metrics.py)
must count elections, unclean elections and ISR shrinks/expands from PartitionChange records, never
records replayed from before the process started, and never a change the image refused. The
real-process versions of these checks are in test_operations.py.
"""

from __future__ import annotations

from harness.runtime.metrics import MetadataCounters
from harness.runtime.status import partition_health
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, Partition, PartitionChange, Topic


class Log:
    """Applies records to an image at consecutive offsets, feeding the counters."""

    def __init__(self, counters: MetadataCounters | None = None) -> None:
        self.image = MetadataImage()
        self.counters = counters
        self.offset = 0

    def apply(self, record: object) -> None:
        result = self.image.apply_record(self.offset, 1, record)  # type: ignore[arg-type]
        self.offset += 1
        if self.counters is not None:
            self.counters.observe(result, self.image)


def topic(log: Log, name: str, min_isr: int | None = None) -> str:
    topic_id = f"id-{name}"
    configs = () if min_isr is None else (("min.insync.replicas", str(min_isr)),)
    log.apply(Topic(name, topic_id, configs))
    return topic_id


def test_partition_health_uses_kafkas_definitions() -> None:
    log = Log()
    t = topic(log, "t", min_isr=2)
    log.apply(Partition(t, 0, (1, 2, 3), (1, 2, 3), 1))      # healthy
    log.apply(Partition(t, 1, (1, 2, 3), (1, 2), 1))         # under-replicated, at min ISR
    log.apply(Partition(t, 2, (1, 2, 3), (2,), 2))           # under-replicated and under min ISR
    log.apply(Partition(t, 3, (1, 2, 3), (3,), NO_LEADER))   # offline (so also under min ISR)
    u = topic(log, "u")                                      # min.insync.replicas default 1
    log.apply(Partition(u, 0, (1, 2), (2,), 2))
    health = partition_health(log.image)
    assert health.total == 5
    assert health.offline == ("t-3",)
    assert health.under_replicated == ("t-1", "t-2", "t-3", "u-0")
    assert health.under_min_isr == ("t-2", "t-3")
    assert health.at_min_isr == ("t-1", "u-0")
    led_by_2 = partition_health(log.image, led_by=2)
    assert (led_by_2.total, led_by_2.under_replicated, led_by_2.under_min_isr) == (
        2, ("t-2", "u-0"), ("t-2",))


def test_counters_count_elections_and_isr_changes_from_records() -> None:
    counters = MetadataCounters(node_id=2, count_from_offset=0)
    log = Log(counters)
    t = topic(log, "t")
    log.apply(Partition(t, 0, (1, 2, 3), (1, 2, 3), 1))
    assert counters.leader_elections == 0  # creation is not an election
    log.apply(PartitionChange(t, 0, leader=2, isr=(2, 3)))  # 1 fenced: clean election + shrink
    assert (counters.leader_elections, counters.unclean_leader_elections) == (1, 0)
    assert (counters.isr_shrinks, counters.isr_expands) == (1, 0)
    log.apply(PartitionChange(t, 0, isr=(1, 2, 3)))  # 1 caught up again
    assert (counters.isr_shrinks, counters.isr_expands) == (1, 1)
    log.apply(PartitionChange(t, 0, leader=NO_LEADER, isr=(2,), elr=(3,)))
    assert counters.leader_elections == 1  # going offline elects nobody
    log.apply(PartitionChange(t, 0, leader=3, isr=(3,), elr=()))  # from the ELR: clean (KIP-966)
    assert (counters.leader_elections, counters.unclean_leader_elections) == (2, 0)
    assert counters.isr_shrinks == 1  # leader 3 is not node 2: not this broker's shrink
    log.apply(PartitionChange(t, 0, leader=1, isr=(1,)))  # 1 was in neither ISR nor ELR
    assert (counters.leader_elections, counters.unclean_leader_elections) == (3, 1)
    # A change built on a stale image is refused by the image (INVALID_UPDATE_VERSION): no count.
    log.apply(PartitionChange(t, 0, leader=2, isr=(2,), expected_partition_epoch=0))
    assert counters.leader_elections == 3


def test_records_replayed_from_before_the_start_are_not_counted() -> None:
    log = Log()
    t = topic(log, "t")
    log.apply(Partition(t, 0, (1, 2), (1, 2), 1))
    log.apply(PartitionChange(t, 0, leader=2, isr=(2,)))
    restart = MetadataCounters(node_id=2, count_from_offset=log.offset + 1)
    replay = Log(restart)
    replay.apply(Topic("t", t))
    replay.apply(Partition(t, 0, (1, 2), (1, 2), 1))
    replay.apply(PartitionChange(t, 0, leader=2, isr=(2,)))  # offset 2: replayed
    replay.apply(PartitionChange(t, 0, isr=(1, 2)))  # offset 3: replayed (log end was 4)
    assert (restart.leader_elections, restart.isr_shrinks, restart.isr_expands) == (0, 0, 0)
    replay.apply(PartitionChange(t, 0, leader=1, isr=(1,)))  # offset 4: new
    assert (restart.leader_elections, restart.unclean_leader_elections) == (1, 0)

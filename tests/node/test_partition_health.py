"""partition_health (harness/runtime/status.py) per replication mode: ISR mode uses the topic's
min.insync.replicas (Kafka's definitions); quorum mode uses the majority of the replicas, since
min.insync.replicas does not apply there and a majority is what acks=all needs."""

from __future__ import annotations

from typing import Any

from harness.runtime.status import partition_health
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, Partition, Topic


def _image(*records: Any) -> MetadataImage:
    image = MetadataImage()
    for offset, record in enumerate(records, start=1):
        image.apply_record(offset, 1, record)
    return image


def test_quorum_mode_min_isr_is_the_majority_and_isr_mode_uses_min_insync() -> None:
    configs = (("min.insync.replicas", "3"),)
    image = _image(
        Topic("isr", "I", configs),
        Partition("I", 0, (1, 2, 3), (1, 2), 1),  # under min ISR (3)
        Partition("I", 1, (1, 2, 3), (1, 2, 3), 1),  # at min ISR
        Topic("q", "Q", configs + (("replication.mode", "quorum"),)),
        Partition("Q", 0, (1, 2, 3), (1, 2), 1),  # after a failover: a majority, writes commit
        Partition("Q", 1, (1, 2, 3), (1,), 1),  # below a majority: acks=all cannot commit
        Partition("Q", 2, (1, 2, 3), (1, 2, 3), 1),
        Partition("Q", 3, (1, 2, 3, 4, 5), (1, 2, 3, 4), 1),
        Partition("Q", 4, (1, 2, 3), (1, 2), NO_LEADER, leader_epoch=1),  # fenced
    )
    h = partition_health(image)
    assert h.total == 7
    assert h.offline == ("q-4",)
    assert h.under_replicated == ("isr-0", "q-0", "q-1", "q-3", "q-4")
    assert h.under_min_isr == ("isr-0", "q-1", "q-4")
    assert h.at_min_isr == ("isr-1", "q-0", "q-4")

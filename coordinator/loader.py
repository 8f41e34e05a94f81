"""Loading: the broker that becomes leader of a `__consumer_offsets` partition rebuilds that
partition's groups and offsets from its records (Kafka's CoordinatorLoaderImpl +
GroupMetadataManager/OffsetMetadataManager.replay), then serves them.

What the driver passes: every record of the partition's log from its log start offset up to its
log end offset at the moment it became leader, in offset order. (The leader's whole log: Kafka
loads to the log end, not the high watermark; a new leader never truncates its own log, so its
uncommitted tail becomes committed as its followers catch up.) Control records and records of
aborted transactions are not ours (this coordinator writes neither); records of group types it
does not know are skipped.

The result is the shard the coordinator would have had after the same records were committed:
the last value of every offset key (a tombstone removes it), each group as its last
GroupMetadata record says (Stable with its members and assignments, or Empty; a tombstone
removes it), and a simple group for offsets whose group has no metadata record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from coordinator.config import GroupCoordinatorConfig
from coordinator.effects import Effect
from coordinator.records import CoordinatorRecord
from coordinator.shard import GroupCoordinatorShard

__all__ = ["load_shard"]


def load_shard(partition: int, leader_epoch: int, records: Iterable[CoordinatorRecord],
               now_ms: int, config: GroupCoordinatorConfig, *, append_ids: Iterator[int],
               member_id_suffix: Callable[[], str]) -> tuple[GroupCoordinatorShard, list[Effect]]:  # fmt: skip
    """The shard of `partition` rebuilt from `records` (in log order), and the effects of
    starting it (appends when a loaded group is over group.max.size and rebalances)."""
    shard = GroupCoordinatorShard(partition, leader_epoch, config, append_ids=append_ids,
                                  member_id_suffix=member_id_suffix)  # fmt: skip
    for record in records:
        shard.replay(record, now_ms)
    return shard, shard.on_loaded(now_ms)

"""Partition leader elections of a queue run, counted from the leader states the metadata went
through, by the same rule as the simulation and the nodes' metrics.

Rule (harness/sim/checks/replicas.py `count_change`, harness/runtime/metrics.py `MetadataCounters`): an
election is a change of a partition's leader to a real broker; a change to no leader (-1) is
not one. A partition's leader_epoch grows by exactly one with every change of its leader
(quorum/metadata/records.py: `leader` is set in a PartitionChange only when it changes, Kafka
since KAFKA-15021), so the leader epoch counts leader *changes*, not elections: a quorum-mode
failover is two changes (FENCE: leader -1 at epoch E; ELECT: a leader at E+1,
quorum/controller/partition_change.py) and one election, an ISR-mode failover usually one change
and one election. Counting the rise of the epoch doubled the quorum rows.

Input: observed (leader_epoch, leader) states of each partition, from any source that shows
committed metadata: the topic described by the controllers during the run (the queue workload's
watcher) and the brokers' `broker.partition_leader|follower|offline` log events (every broker
logs the (leader, leader_epoch) it applies, harness/runtime/broker.py). States are merged by epoch
(one epoch has one leader); the first state at or after the run's start is the baseline, so
elections before the run are not counted.

Gaps: two consecutive observed states whose epochs differ by d > 1 hide d - 1 states. Quorum
mode always fences before it elects, so the hidden changes alternate through -1 and the count is
exact; in ISR mode a failover moves the leader straight to an ISR member (no -1 unless no
member is eligible), so the hidden changes are counted as elections. With a watcher sampling
every 100 ms and three brokers' logs, a gap needs every source to miss a state.

Raft mode (replication.mode=raft): the leader epoch is the Raft group's, which also grows with
elections nobody won (a candidate's epoch), and the metadata shows an epoch only once its leader
reported it (quorum/controller/raft_leaders.py). So every observed epoch with a real leader after
the baseline is one election, and hidden epochs are not counted (most are failed candidacies).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

NO_LEADER = -1
LEADER_EVENTS = frozenset({"broker.partition_leader", "broker.partition_follower",
                           "broker.partition_offline"})

States = dict[int, dict[int, int]]  # partition -> leader_epoch -> leader (-1: none)


def add_state(states: States, partition: int, leader_epoch: int, leader: int | None) -> None:
    """Record one observed state (None and -1 both mean no leader). The first report of an
    epoch stands: committed metadata gives every epoch a single leader."""
    states.setdefault(partition, {}).setdefault(
        leader_epoch, NO_LEADER if leader is None else leader)


def merge(*sources: Mapping[int, Mapping[int, int]]) -> States:
    out: States = {}
    for source in sources:
        for partition, by_epoch in source.items():
            for epoch, leader in by_epoch.items():
                add_state(out, partition, epoch, leader)
    return out


def count_elections(states: Iterable[tuple[int, int]], *, quorum_mode: bool,
                    from_epoch: int | None = None, raft_mode: bool = False) -> int:  # fmt: skip
    """Elections (changes to a real leader) between the observed (leader_epoch, leader) states
    of one partition. The lowest epoch at or above `from_epoch` is the baseline."""
    seq = sorted((e, leader) for e, leader in dict(states).items()
                 if from_epoch is None or e >= from_epoch)
    count = 0
    for (e0, l0), (e1, l1) in zip(seq, seq[1:], strict=False):
        d = e1 - e0
        if d == 1 or raft_mode:
            count += l1 != NO_LEADER
        elif quorum_mode:
            # hidden changes alternate real, -1 (fence before every election)
            count += (d + (l0 == NO_LEADER)) // 2
        else:
            # ISR mode: hidden changes move the leader straight to another replica
            count += d - (l1 == NO_LEADER)
    return count


def epoch_changes(states: Mapping[int, int], from_epoch: int | None = None) -> int:
    """The rise of the leader epoch over the observed states: leader changes, including those
    to -1 (the old, doubled measure; kept in results.json beside the elections)."""
    epochs = [e for e in states if from_epoch is None or e >= from_epoch]
    return max(epochs) - min(epochs) if epochs else 0


def broker_log_states(logs_dir: Path, topic: str) -> States:
    """The (leader_epoch, leader) states of `topic`'s partitions the brokers logged on applying
    metadata (DIR/logs/broker-*.log, JSON lines)."""
    states: States = {}
    for path in sorted(logs_dir.glob("broker-*.log")):
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if "broker.partition_" not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if (event.get("event") in LEADER_EVENTS and event.get("topic") == topic
                        and isinstance(event.get("partition"), int)
                        and isinstance(event.get("leader_epoch"), int)):
                    leader = event.get("leader")
                    add_state(states, event["partition"], event["leader_epoch"],
                              leader if isinstance(leader, int) else None)
    return states


def leader_elections(observed: Mapping[int, Mapping[int, int]], start: Mapping[int, int],
                     *, quorum_mode: bool, raft_mode: bool = False) -> dict[int, int]:  # fmt: skip
    """Elections per partition since `start` (partition -> its leader epoch when the run
    began), from the merged observed states."""
    return {p: count_elections(observed.get(p, {}).items(), quorum_mode=quorum_mode,
                               from_epoch=e, raft_mode=raft_mode)
            for p, e in sorted(start.items())}

"""The arms of the study and the comparisons its verdicts make, as data (docs/compare.md).

An arm is a set of settings (run-summary columns and the values they must have); a comparison
names a baseline arm `a`, a challenger `b`, and whether the two acknowledge a write under the
same rule (`equal-safety`: the verdicts the report leads with) or trade durability for
availability (`trade-off`: reported as the trade they are, never as a win). Adding an arm, for
instance a new replication mode, is one entry in ARMS and one line per comparison.

Invariants: every comparison names two arms of ARMS; arms of one comparison differ in at least
one setting; `equal-safety` comparisons hold acks=all, the replication factor and the number of
copies a write needs before its acknowledgement equal (2 of RF 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EQUAL_SAFETY, TRADE_OFF = "equal-safety", "trade-off"
AXES = ("mode", "raft", "elr", "flush", "unclean", "min-isr", "acks")
# Rows written before the flush policy was recorded ran ISR on the page cache and quorum with a
# free fsync per append: an arm's flush policy also accepts null.
_SAFE = {"acks": "all", "unclean_leader_election": False, "leader_epoch_enable": True}


@dataclass(frozen=True, slots=True)
class Arm:
    key: str
    label: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Values of flush_policy this arm accepts (None: rows that did not record one).
    flush_policies: tuple[str | None, ...] = ()

    def matches(self, row: Mapping[str, Any]) -> bool:
        if any(row.get(k) != v for k, v in self.settings.items()):
            return False
        return not self.flush_policies or row.get("flush_policy") in self.flush_policies


ARMS: dict[str, Arm] = {a.key: a for a in (
    Arm("isr-min2", "ISR, acks=all, min.insync.replicas=2",
        {"replication_mode": "isr", "min_insync_replicas": 2, "eligible_leader_replicas": False,
         **_SAFE}, ("page-cache", None)),
    Arm("isr-min2-elr", "ISR, acks=all, min.insync.replicas=2, ELR",
        {"replication_mode": "isr", "min_insync_replicas": 2, "eligible_leader_replicas": True,
         **_SAFE}, ("page-cache", None)),
    Arm("isr-min2-flush", "ISR, acks=all, min.insync.replicas=2, flush.messages=1",
        {"replication_mode": "isr", "min_insync_replicas": 2, "eligible_leader_replicas": False,
         **_SAFE}, ("flush-every-message",)),
    Arm("quorum", "quorum (majority of the replicas), acks=all",
        {"replication_mode": "quorum", "eligible_leader_replicas": False, **_SAFE},
        ("fsync-before-ack", None)),
    Arm("quorum-nofsync", "quorum, acks=all, no fsync before counting (unsafe)",
        {"replication_mode": "quorum", "eligible_leader_replicas": False, **_SAFE},
        ("no-fsync",)),
    Arm("raft", "Raft per partition, acks=all",
        {"replication_mode": "raft", **_SAFE}, ("fsync-before-ack", None)),
    Arm("isr-min1", "ISR, acks=all, min.insync.replicas=1",
        {"replication_mode": "isr", "min_insync_replicas": 1, "eligible_leader_replicas": False,
         **_SAFE}, ("page-cache", None)),
    Arm("isr-min1-unclean", "ISR, acks=all, min.insync.replicas=1, unclean election",
        {"replication_mode": "isr", "min_insync_replicas": 1, "eligible_leader_replicas": False,
         "acks": "all", "unclean_leader_election": True, "leader_epoch_enable": True},
        ("page-cache", None)),
    Arm("isr-acks1", "ISR, acks=1",
        {"replication_mode": "isr", "acks": "1", "min_insync_replicas": 1,
         "unclean_leader_election": False, "eligible_leader_replicas": False,
         "leader_epoch_enable": True}, ("page-cache", None)),
)}


@dataclass(frozen=True, slots=True)
class Comparison:
    a: str  # the baseline arm's key
    b: str  # the challenger's
    kind: str  # EQUAL_SAFETY or TRADE_OFF
    why: str  # what makes them equal, or what is traded
    # What differs between the arms (the key of harness/spark/verdicts.py's mechanisms): the
    # replication mode, Raft partitions against a controller-elected leader, ELR, the flush
    # policy, unclean election, min.insync.replicas, acks.
    axis: str = "mode"

    @property
    def key(self) -> str:
        return f"{self.b}-vs-{self.a}"


_TWO_COPIES = "both acknowledge a write once 2 of the 3 replicas hold it"
COMPARISONS: tuple[Comparison, ...] = (
    Comparison("isr-min2", "quorum", EQUAL_SAFETY, _TWO_COPIES),
    Comparison("isr-min2-elr", "quorum", EQUAL_SAFETY, _TWO_COPIES),
    Comparison("isr-min2", "raft", EQUAL_SAFETY, _TWO_COPIES, "raft"),
    Comparison("isr-min2-elr", "raft", EQUAL_SAFETY, _TWO_COPIES, "raft"),
    Comparison("quorum", "raft", EQUAL_SAFETY, "both commit on a majority of the replicas",
               "raft"),
    Comparison("isr-min2", "isr-min2-elr", EQUAL_SAFETY,
               "the same acknowledgement rule; ELR changes only who may be elected", "elr"),
    Comparison("isr-min2", "isr-min2-flush", EQUAL_SAFETY,
               "the same acknowledgement rule; flush.messages=1 adds an fsync before the ack",
               "flush"),
    Comparison("quorum", "quorum-nofsync", TRADE_OFF,
               "quorum without its fsync: faster acknowledgements, unsafe on power loss",
               "flush"),
    Comparison("quorum", "isr-min1", TRADE_OFF,
               "ISR acknowledges with a single in-sync copy: writable with fewer replicas, "
               "lossy when that copy fails", "min-isr"),
    Comparison("isr-min1", "isr-min1-unclean", TRADE_OFF,
               "unclean election elects an out-of-sync replica: available sooner, loses what "
               "it lacked", "unclean"),
    Comparison("isr-min2", "isr-acks1", TRADE_OFF,
               "acks=1 acknowledges on the leader alone", "acks"),
)


def check_comparisons(arms: Mapping[str, Arm] = ARMS,
                      comparisons: tuple[Comparison, ...] = COMPARISONS) -> None:
    """Raise ValueError when a comparison names an unknown arm or two identical arms."""
    for c in comparisons:
        for key in (c.a, c.b):
            if key not in arms:
                raise ValueError(f"comparison {c.key}: unknown arm {key!r}")
        a, b = arms[c.a], arms[c.b]
        if (dict(a.settings), a.flush_policies) == (dict(b.settings), b.flush_policies):
            raise ValueError(f"comparison {c.key}: the two arms are the same settings")
        if c.kind not in (EQUAL_SAFETY, TRADE_OFF):
            raise ValueError(f"comparison {c.key}: kind {c.kind!r}")
        if c.axis not in AXES:
            raise ValueError(f"comparison {c.key}: axis {c.axis!r}")


check_comparisons()

"""Consumer group checker: what a group of subscribed consumers did with a queue history (the
queue workload's `--subscribe` mode, harness/jepsen/workload_subscribe.py), beside the log
anomalies of harness/check/queue.py.

Operations of group members carry `"group": true`:
- `assign` ok, value [tp, ...]: the member's assignment after a rebalance (eager: a revoke
  records [] first);
- `poll` ok, value {tp: [[offset, value], ...]}: records handed to the member;
- `commit`, value {tp: next offset}: ok once the coordinator acknowledged it (the offsets are
  in `__consumer_offsets`, committed); fail when certainly not written; info when unknown.
The final drain (polls flagged `"final": true`, complete partition contents) says what each
partition holds.

Anomalies:
- `group-lost`: a record of the final drain below its partition's highest acknowledged commit
  that no member ever polled: the group moved past it without processing it;
- `group-rewind`: a member's first poll of a partition after being assigned it returned an
  offset below a commit of that partition acknowledged before the assignment: the group
  resumed below an acknowledged commit (a committed offset was lost), so records were
  processed twice where Kafka promises they are not.
Stats: records redelivered otherwise (a commit not acknowledged before a rebalance or a
failover: at-least-once allows it), the highest acknowledged commit per partition and whether
it reached the partition's end.

Invariant: `check_groups` is a pure function of the operations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.check.history import Operation
from harness.check.models import freeze

GROUP_ANOMALIES = ("group-lost", "group-rewind")
MAX_EXAMPLES = 8


@dataclass(slots=True)
class GroupResult:
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.anomalies.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(example)


def _ended(op: Operation) -> int:
    return op.return_index if op.return_index is not None else 1 << 62


def check_groups(ops: Sequence[Operation]) -> GroupResult:
    result = GroupResult()
    drained: dict[str, dict[int, Hashable]] = {}
    polled: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # offset -> times
    acked: list[tuple[int, str, int]] = []  # (completion index, tp, next offset)
    group_ops = [op for op in ops if op.is_client and op.flag("group")]
    for op in ops:
        if op.is_client and op.f == "poll" and op.type == "ok" and op.flag("final"):
            for tp, rows in (op.completion.value or {}).items() if op.completion else ():
                drained.setdefault(str(tp), {}).update({o: freeze(v) for o, v in rows})
    for op in group_ops:
        if op.f == "commit" and op.type == "ok" and isinstance(op.invoke.value, dict):
            acked += [(_ended(op), str(tp), int(o)) for tp, o in op.invoke.value.items()]
    acked.sort()
    assigned_at: dict[tuple[Hashable, str], int] = {}  # (process, tp) -> assign's call index
    first_poll_done: set[tuple[Hashable, str]] = set()
    for op in sorted(group_ops, key=lambda o: o.call_index):
        if op.f == "assign" and op.type == "ok":
            for tp in op.invoke.value or []:
                assigned_at[(op.process, str(tp))] = op.call_index
                first_poll_done.discard((op.process, str(tp)))
        if op.f != "poll" or op.type != "ok" or op.completion is None:
            continue
        for tp, rows in (op.completion.value or {}).items():
            tp = str(tp)
            for offset, _ in rows:
                polled[tp][offset] += 1
            key = (op.process, tp)
            if not rows or key in first_poll_done:
                continue
            first_poll_done.add(key)
            since = assigned_at.get(key)
            if since is None:
                continue
            before = max((o for end, t, o in acked if t == tp and end < since), default=None)
            first = min(o for o, _ in rows)
            if before is not None and first < before:
                result.add("group-rewind", {"tp": tp, "process": op.process,
                                            "first_offset": first, "acknowledged_commit": before,
                                            "op_id": op.id})  # fmt: skip
    highest: dict[str, int] = {}
    for _, tp, offset in acked:
        highest[tp] = max(highest.get(tp, 0), offset)
    for tp, rows in sorted(drained.items()):
        for offset, value in sorted(rows.items()):
            if offset < highest.get(tp, 0) and not polled[tp].get(offset):
                result.add("group-lost", {"tp": tp, "offset": offset, "value": value,
                                          "acknowledged_commit": highest[tp]})  # fmt: skip
    ends = {tp: max(rows) + 1 if rows else 0 for tp, rows in drained.items()}
    result.stats = {
        "group_polled_records": sum(sum(c.values()) for c in polled.values()),
        "group_redelivered": sum(n - 1 for c in polled.values() for n in c.values() if n > 1),
        "group_acknowledged_commits": len({(end, tp) for end, tp, _ in acked}),
        "group_committed": dict(sorted(highest.items())),
        "group_caught_up": all(highest.get(tp, 0) >= end for tp, end in ends.items()),
    }
    for name in GROUP_ANOMALIES:
        result.counts.setdefault(name, 0)
    return result

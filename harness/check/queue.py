"""Queue/log checker: the anomalies of Jepsen's Kafka checker over a send/poll history.

Operations (docs/jepsen.md has the full shapes):
- `send`: invoke [tp, value]; an ok completion carries the offset, as [tp, [offset, value]]
  (Jepsen's shape), [tp, value, offset], or [tp, value] with an `"offset"` field;
- `poll`: ok value {tp: [[offset, value], ...]}. A poll whose event has `"final": true` (or an
  op with f `drain`) is part of the final drain: after healing, a reader consumed every listed
  partition from the beginning to its end. A drained partition that is empty is listed as [];
- `assign` / `subscribe`: value [tp, ...]; a process keeps its poll position only for the
  partitions still assigned (`"seek_to_beginning": true` forgets all of them).

From every acknowledged send and every ok poll the checker builds each partition's version
order (offset -> values, value -> offsets) and reports, with examples:
- `inconsistent-offsets`: two values observed at one offset;
- `duplicate`: one value at two offsets;
- `lost-write`: an acknowledged send (or a value some poll observed) missing from the final
  drain of its partition; without a final drain, Jepsen's rule: an acknowledged send never
  polled although some poll read past its offset;
- `unseen`: an acknowledged send never polled, in a partition with no final drain, above the
  highest offset read (it may only be late; still reported: the run did not show it durable);
- `G1a`: a poll observed a value whose send failed (fail means it did not happen);
- `precommitted-read`: a poll observed a value before its send was invoked, or a value no send
  wrote (Kafka consumers only see records already committed by a producer's append);
- `nonmonotonic-send`: one process's successive acknowledged sends to a partition got offsets
  that did not increase;
- `nonmonotonic-poll` / `poll-skip`: one process's successive polls of a partition went back
  (or repeated), or jumped over an offset known to hold a value; `int-nonmonotonic-poll` /
  `int-poll-skip` are the same inside one poll.

Invariant: `check_queue` is a pure function of the operations; examples are capped per anomaly
but counts are exact.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.check.history import HistoryError, Operation
from harness.check.models import freeze

ANOMALIES: tuple[str, ...] = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "G1a",
    "precommitted-read",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "int-nonmonotonic-poll",
    "int-poll-skip",
)
MAX_EXAMPLES = 8
_STRENGTH = {"fail": 0, "info": 1, "ok": 2}


@dataclass(frozen=True, slots=True)
class Send:
    op: Operation
    tp: str
    value: Hashable
    offset: int | None  # known only for an acknowledged send


@dataclass(frozen=True, slots=True)
class Poll:
    op: Operation
    records: dict[str, list[tuple[int, Hashable]]]
    final: bool


@dataclass(slots=True)
class QueueResult:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def add(self, name: str, example: dict[str, Any]) -> None:
        assert name in ANOMALIES, name
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.anomalies.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(example)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "anomaly_types": sorted(k for k, v in self.counts.items() if v),
            "counts": dict(sorted(self.counts.items())),
            "anomalies": {k: v for k, v in sorted(self.anomalies.items())},
            "stats": self.stats,
        }


def _returned(op: Operation) -> int:
    return op.return_index if op.return_index is not None else 1 << 62


def _ref(op: Operation) -> dict[str, Any]:
    return {"op_id": op.id, "process": op.process, "type": op.type, "index": op.call_index}


# ------------------------------------------------------------------------------------ parsing


def _parse_send(op: Operation) -> Send:
    inv = op.invoke.value
    if not isinstance(inv, list) or len(inv) != 2:
        raise HistoryError(
            f"send needs value [topic-partition, value], got {inv!r}", index=op.call_index
        )
    tp, value = str(inv[0]), freeze(inv[1])
    offset: Any = None
    if op.type == "ok" and op.completion is not None:
        out = op.completion.value
        if (
            isinstance(out, list)
            and len(out) == 2
            and isinstance(out[1], list)
            and len(out[1]) == 2
        ):
            offset, value = out[1][0], freeze(out[1][1])
        elif isinstance(out, list) and len(out) == 3:
            offset = out[2]
        else:
            offset = op.completion.extra.get("offset")
        if not isinstance(offset, int):
            raise HistoryError(
                f"ok send carries no integer offset: {out!r}", index=op.completion.index
            )
    return Send(op, tp, value, offset)


def _parse_poll(op: Operation) -> Poll:
    out = op.completion.value if op.completion is not None else None
    if not isinstance(out, dict):
        raise HistoryError(
            f"ok poll needs {{tp: [[offset, value], ...]}}, got {out!r}", index=op.call_index
        )
    records: dict[str, list[tuple[int, Hashable]]] = {}
    for tp, pairs in out.items():
        rows: list[tuple[int, Hashable]] = []
        for pair in pairs:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], int):
                raise HistoryError(
                    f"poll record must be [offset, value], got {pair!r}", index=op.call_index
                )
            rows.append((pair[0], freeze(pair[1])))
        records[str(tp)] = rows
    return Poll(op, records, final=op.f == "drain" or bool(op.flag("final")))


# ----------------------------------------------------------------------------------- checking


@dataclass(slots=True)
class _Partition:
    """One partition's evidence: its version order and who wrote and read each value."""

    values_at: dict[int, set[Hashable]] = field(default_factory=lambda: defaultdict(set))
    offsets_of: dict[Hashable, set[int]] = field(default_factory=lambda: defaultdict(set))
    sends: dict[Hashable, Send] = field(default_factory=dict)
    polled: dict[Hashable, Operation] = field(default_factory=dict)  # value -> earliest reader
    drained: set[Hashable] | None = None  # values in the final drain; None if never drained
    max_polled: int = -1
    known: list[int] = field(default_factory=list)  # sorted offsets holding some value

    def observe(self, offset: int, value: Hashable) -> None:
        self.values_at[offset].add(value)
        self.offsets_of[value].add(offset)


def check_queue(ops: Sequence[Operation]) -> QueueResult:
    """Check a paired send/poll history. See the module docstring for each anomaly."""
    sends: list[Send] = []
    polls: list[Poll] = []
    for op in ops:
        if not op.is_client:
            continue
        if op.f == "send":
            sends.append(_parse_send(op))
        elif op.f in ("poll", "drain") and op.type == "ok":
            polls.append(_parse_poll(op))
    parts: dict[str, _Partition] = defaultdict(_Partition)
    for send in sends:
        part = parts[send.tp]
        known = part.sends.get(send.value)
        # A value sent more than once (a client retry) counts by its strongest outcome.
        if known is None or _STRENGTH[send.op.type] > _STRENGTH[known.op.type]:
            part.sends[send.value] = send
        if send.offset is not None:
            part.observe(send.offset, send.value)
    for poll in polls:
        for tp, rows in poll.records.items():
            part = parts[tp]
            if poll.final and part.drained is None:
                part.drained = set()
            for offset, value in rows:
                part.observe(offset, value)
                if poll.final:
                    part.drained.add(value)  # type: ignore[union-attr]
                else:
                    part.max_polled = max(part.max_polled, offset)
                first = part.polled.get(value)
                if first is None or _returned(poll.op) < _returned(first):
                    part.polled[value] = poll.op  # the earliest reader, for precommitted-read
    for part in parts.values():
        part.known = sorted(part.values_at)
    result = QueueResult()
    for tp in sorted(parts):
        _check_version_order(result, tp, parts[tp])
        _check_reads(result, tp, parts[tp])
        _check_durability(result, tp, parts[tp])
    _check_sends_per_process(result, sends)
    _check_polls_per_process(result, ops, polls, parts)
    result.stats = {
        "partitions": len(parts),
        "sends": {t: sum(1 for s in sends if s.op.type == t) for t in ("ok", "fail", "info")},
        "polls": len(polls),
        "final_polls": sum(1 for p in polls if p.final),
        "drained_partitions": sorted(tp for tp, p in parts.items() if p.drained is not None),
    }
    for name in ANOMALIES:
        result.counts.setdefault(name, 0)
    return result


def _check_version_order(result: QueueResult, tp: str, part: _Partition) -> None:
    for offset in part.known:
        values = part.values_at[offset]
        if len(values) > 1:
            result.add(
                "inconsistent-offsets",
                {"partition": tp, "offset": offset, "values": sorted(values, key=repr)},
            )
    for value, offsets in part.offsets_of.items():
        if len(offsets) > 1:
            result.add("duplicate", {"partition": tp, "value": value, "offsets": sorted(offsets)})


def _check_reads(result: QueueResult, tp: str, part: _Partition) -> None:
    for value, reader in part.polled.items():
        send = part.sends.get(value)
        example = {
            "partition": tp,
            "value": value,
            "offsets": sorted(part.offsets_of[value]),
            "poll": _ref(reader),
        }
        if send is None:
            result.add("precommitted-read", {**example, "reason": "no send wrote this value"})
        elif send.op.type == "fail":
            result.add("G1a", {**example, "send": _ref(send.op)})
        elif reader.return_index is not None and reader.return_index < send.op.call_index:
            result.add(
                "precommitted-read",
                {**example, "send": _ref(send.op), "reason": "read before the send was invoked"},
            )


def _check_durability(result: QueueResult, tp: str, part: _Partition) -> None:
    if part.drained is not None:
        must_survive = {v for v, s in part.sends.items() if s.op.type == "ok"}
        must_survive |= {
            v for v in part.polled if v in part.sends and part.sends[v].op.type != "fail"
        }
        for value in sorted(must_survive - part.drained, key=repr):
            send = part.sends[value]
            seen_by = part.polled.get(value)  # a reader before the drain, if any
            result.add(
                "lost-write",
                {
                    "partition": tp,
                    "value": value,
                    "offset": send.offset,
                    "send": _ref(send.op),
                    "rule": "missing from the final drain",
                    "read_before_by": None if seen_by is None else _ref(seen_by),
                },
            )
        return
    for value, send in part.sends.items():
        if send.op.type != "ok" or value in part.polled:
            continue
        example = {"partition": tp, "value": value, "offset": send.offset, "send": _ref(send.op)}
        if send.offset is not None and send.offset < part.max_polled:
            result.add(
                "lost-write",
                {
                    **example,
                    "rule": "never polled, offset below the highest polled",
                    "max_polled_offset": part.max_polled,
                },
            )
        else:
            result.add("unseen", {**example, "max_polled_offset": part.max_polled})


def _check_sends_per_process(result: QueueResult, sends: list[Send]) -> None:
    last: dict[tuple[Hashable, str], Send] = {}
    for send in sorted(
        (s for s in sends if s.offset is not None), key=lambda s: s.op.return_index or 0
    ):
        key = (send.op.process, send.tp)
        prev = last.get(key)
        if (
            prev is not None
            and prev.offset is not None
            and send.offset is not None
            and send.offset <= prev.offset
        ):
            result.add(
                "nonmonotonic-send",
                {
                    "process": send.op.process,
                    "partition": send.tp,
                    "offsets": [prev.offset, send.offset],
                    "values": [prev.value, send.value],
                    "ops": [_ref(prev.op), _ref(send.op)],
                },
            )
        last[key] = send


def _skipped(part: _Partition, lo: int, hi: int) -> list[int]:
    """Offsets known to hold a value strictly between lo and hi."""
    i = bisect.bisect_right(part.known, lo)
    j = bisect.bisect_left(part.known, hi)
    return part.known[i:j]


def _check_polls_per_process(
    result: QueueResult, ops: Sequence[Operation], polls: list[Poll], parts: dict[str, _Partition]
) -> None:
    poll_of = {p.op.id: p for p in polls}
    # A process's operations are sequential: their invoke order is their real order.
    ordered = sorted(
        (op for op in ops if op.is_client and op.completion is not None),
        key=lambda o: o.call_index,
    )
    last_read: dict[Hashable, dict[str, tuple[int, Operation]]] = defaultdict(dict)
    for op in ordered:
        if op.f in ("assign", "subscribe") and op.type != "fail":
            keep = {str(tp) for tp in (op.value or [])}
            positions = last_read[op.process]
            if op.flag("seek_to_beginning"):
                positions.clear()
            for tp in list(positions):
                if tp not in keep:
                    del positions[tp]
            continue
        poll = poll_of.get(op.id)
        if poll is None:
            continue
        for tp, rows in poll.records.items():
            _check_inside_poll(result, tp, rows, parts[tp], op)
            if not rows or poll.final:
                continue
            prev = last_read[op.process].get(tp)
            if prev is not None:
                prev_offset, prev_op = prev
                first = rows[0][0]
                example = {
                    "process": op.process,
                    "partition": tp,
                    "offsets": [prev_offset, first],
                    "ops": [_ref(prev_op), _ref(op)],
                }
                if first <= prev_offset:
                    result.add("nonmonotonic-poll", example)
                elif skipped := _skipped(parts[tp], prev_offset, first):
                    result.add("poll-skip", {**example, "skipped_offsets": skipped[:20]})
            last_read[op.process][tp] = (rows[-1][0], op)


def _check_inside_poll(
    result: QueueResult, tp: str, rows: list[tuple[int, Hashable]], part: _Partition, op: Operation
) -> None:
    for (a, _), (b, _) in zip(rows, rows[1:], strict=False):
        example = {"process": op.process, "partition": tp, "offsets": [a, b], "op": _ref(op)}
        if b <= a:
            result.add("int-nonmonotonic-poll", example)
        elif skipped := _skipped(part, a, b):
            result.add("int-poll-skip", {**example, "skipped_offsets": skipped[:20]})

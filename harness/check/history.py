"""Histories: events as recorded, and operations paired from them.

A history is a sequence of events (one JSON object per line, see docs/jepsen.md):

    {"index": 0, "time": 1234567, "process": 3, "type": "invoke", "f": "write", "value": ["x", 5]}

`type` is invoke, ok, fail (the operation did not happen) or info (unknown: it may or may not
have happened). Events from the same process are sequential: each invoke is followed by exactly
one completion (ok / fail / info) before that process invokes again. `pair_operations` turns the
events into `Operation`s and enforces that rule.

Invariants this module guarantees to the checkers:
- operations are numbered 0..n-1 in invoke order and `call_index < return_index`;
- an `info` completion, or an invoke with no completion at all, gives an operation with
  `return_index is None`: it stays open to the end of the history (Jepsen's rule: an
  indeterminate call may take effect at any point after its invoke, or never);
- events are ordered by their history position (`index`), not by wall-clock `time`: the order
  in which the recorder saw them is the real-time order the checkers rely on.

`parse_jepsen_log` imports Jepsen's log-line format (`INFO jepsen.util - 2 :invoke :write 4`),
as used by the etcd histories in tests/data/jepsen-etcd (tab- or space-separated).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

EventType = Literal["invoke", "ok", "fail", "info"]
CompletionType = Literal["ok", "fail", "info"]
EVENT_TYPES: frozenset[str] = frozenset({"invoke", "ok", "fail", "info"})
COMPLETION_TYPES: frozenset[str] = frozenset({"ok", "fail", "info"})
NEMESIS = "nemesis"
FORMATS = ("jsonl", "jepsen-log")


class HistoryError(ValueError):
    """A history that cannot be read or does not follow the invoke/complete discipline.

    Carries the 1-based file line, or the event's `index`, so the user can find the culprit.
    """

    def __init__(self, message: str, *, line: int | None = None, index: int | None = None) -> None:
        self.line = line
        self.index = index
        if line is not None:
            message = f"line {line}: {message}"
        elif index is not None:
            message = f"event index {index}: {message}"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Event:
    """One history line. `extra` keeps fields this module does not interpret (e.g. `final`)."""

    index: int
    time: int
    process: Hashable
    type: EventType
    f: str
    value: Any
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            out["error"] = self.error
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class Operation:
    """An invoke paired with its completion. `type` is the completion's type (info if none)."""

    id: int
    process: Hashable
    f: str
    type: CompletionType
    invoke: Event
    completion: Event | None

    @property
    def call_index(self) -> int:
        return self.invoke.index

    @property
    def return_index(self) -> int | None:
        """History position of the completion; None while the operation is open (info)."""
        if self.type == "info" or self.completion is None:
            return None
        return self.completion.index

    @property
    def value(self) -> Any:
        """The completion's value when it carries one, else the invoke's."""
        if self.completion is not None and self.completion.value is not None:
            return self.completion.value
        return self.invoke.value

    @property
    def error(self) -> str | None:
        return self.completion.error if self.completion is not None else None

    @property
    def is_client(self) -> bool:
        return self.process != NEMESIS

    def flag(self, name: str) -> Any:
        """A field of the completion (or invoke) this module does not interpret, e.g. `final`."""
        for event in (self.completion, self.invoke):
            if event is not None and name in event.extra:
                return event.extra[name]
        return None


# --------------------------------------------------------------------------------------- JSONL

_KNOWN_FIELDS = frozenset({"index", "time", "process", "type", "f", "value", "error"})


def event_from_json(obj: Any, *, position: int, line: int | None = None) -> Event:
    """Validate one decoded JSON object as an event. `position` is used when `index` is absent."""
    if not isinstance(obj, dict):
        raise HistoryError(f"expected a JSON object, got {type(obj).__name__}", line=line)
    for name in ("process", "type", "f"):
        if name not in obj:
            raise HistoryError(f"event has no {name!r} field", line=line)
    if obj["type"] not in EVENT_TYPES:
        raise HistoryError(
            f"type must be one of invoke/ok/fail/info, got {obj['type']!r}", line=line
        )
    index = obj.get("index", position)
    time = obj.get("time", index)
    if not isinstance(index, int) or not isinstance(time, int):
        raise HistoryError("index and time must be integers", line=line)
    process = obj["process"]
    if isinstance(process, list | dict):
        raise HistoryError(f"process must be a number or a name, got {process!r}", line=line)
    error = obj.get("error")
    return Event(
        index=index,
        time=time,
        process=process,
        type=obj["type"],
        f=str(obj["f"]),
        value=obj.get("value"),
        error=None if error is None else str(error),
        extra={k: v for k, v in obj.items() if k not in _KNOWN_FIELDS},
    )


def parse_jsonl(lines: Iterable[str]) -> list[Event]:
    events: list[Event] = []
    for lineno, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"not JSON: {exc.msg}", line=lineno) from exc
        events.append(event_from_json(obj, position=len(events), line=lineno))
    return events


# ---------------------------------------------------------------------------------- Jepsen log

_LOG_LINE = re.compile(r"^\S+\s+jepsen\.util\s+-\s+(\S+)\s+:(\w+)\s+:([\w.-]+)\s*(.*?)\s*$")
_TOKEN = re.compile(r'\s*(\[|\]|\(|\)|"(?:[^"\\]|\\.)*"|[^\s\[\]()",]+)\s*,?')


_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?\d+\.\d*")
_SIMPLE = {"nil": None, "true": True, "false": False}


def _edn_atom(token: str) -> Any:
    if token in _SIMPLE:
        return _SIMPLE[token]
    if token.startswith('"'):
        return json.loads(token)
    if _INT.fullmatch(token):
        return int(token)
    if _FLOAT.fullmatch(token):
        return float(token)
    return token  # keywords keep their leading colon, e.g. ":timed-out"


def parse_edn_value(text: str) -> Any:
    """The small subset of EDN that Jepsen prints for register ops: nil, numbers, strings,
    keywords and vectors/lists of those."""
    if _INT.fullmatch(text):
        return int(text)  # fast path: most register values are plain integers
    if text in _SIMPLE:
        return _SIMPLE[text]
    tokens = [m.group(1) for m in _TOKEN.finditer(text)]
    pos = 0

    def read() -> Any:
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError(f"unexpected end of value {text!r}")
        token = tokens[pos]
        pos += 1
        if token in ("[", "("):
            items = []
            while pos < len(tokens) and tokens[pos] not in ("]", ")"):
                items.append(read())
            if pos >= len(tokens):
                raise ValueError(f"unclosed vector in {text!r}")
            pos += 1
            return items
        if token in ("]", ")"):
            raise ValueError(f"unexpected {token!r} in {text!r}")
        return _edn_atom(token)

    if not tokens:
        return None
    value = read()
    if pos != len(tokens):
        raise ValueError(f"trailing text in value {text!r}")
    return value


def parse_jepsen_log(lines: Iterable[str]) -> list[Event]:
    """Import Jepsen's `INFO jepsen.util - <process> <type> <f> <value>` lines.

    Lines that are not operation lines (other loggers, stack traces) are skipped. There are no
    timestamps, so `time` is the event's position. A keyword value such as `:timed-out` on a
    completion is not a result: it becomes `error` and the value is left empty, so an
    `:info :write :timed-out` is an open write of the invoked value, and a
    `:fail :read :timed-out` a read that did not happen (any value would have been legal).
    """
    events: list[Event] = []
    for lineno, raw in enumerate(lines, start=1):
        m = _LOG_LINE.match(raw)
        if m is None:
            continue
        process_text, type_name, f, value_text = m.groups()
        if type_name not in EVENT_TYPES:
            raise HistoryError(f"unknown op type :{type_name}", line=lineno)
        try:
            value = parse_edn_value(value_text)
        except ValueError as exc:
            raise HistoryError(str(exc), line=lineno) from exc
        error = None
        if isinstance(value, str) and value.startswith(":") and type_name != "invoke":
            error, value = value[1:], None
        process: Hashable = process_text.lstrip(":")
        if _INT.fullmatch(process_text):
            process = int(process_text)
        index = len(events)
        kind = cast(EventType, type_name)
        events.append(Event(index, index, process, kind, f, value, error))
    return events


def load_events(path: str | Path, fmt: str = "jsonl") -> list[Event]:
    """Read a history file in one of FORMATS."""
    if fmt not in FORMATS:
        raise HistoryError(f"unknown history format {fmt!r}; use one of {', '.join(FORMATS)}")
    with open(path, encoding="utf-8") as handle:
        if fmt == "jepsen-log":
            return parse_jepsen_log(handle)
        return parse_jsonl(handle)


def write_jsonl(events: Iterable[Event], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")


# ------------------------------------------------------------------------------------- pairing


def pair_operations(events: Sequence[Event]) -> list[Operation]:
    """Pair each invoke with the next completion of the same process.

    Raises HistoryError for a completion without an invoke, a second invoke while one is open,
    a completion whose `f` differs from its invoke's, or indexes that do not increase.
    An invoke never completed becomes an `info` operation (open to the end).
    """
    open_calls: dict[Hashable, Event] = {}
    pending: list[tuple[Event, Event | None]] = []
    slot_of: dict[int, int] = {}  # invoke index -> position in `pending`
    last_index: int | None = None
    for event in events:
        if last_index is not None and event.index <= last_index:
            raise HistoryError(
                f"event indexes must increase: {event.index} after {last_index}", index=event.index
            )
        last_index = event.index
        # Jepsen records nemesis operations as two info events: the first one opens the op.
        opens = event.type == "invoke" or (
            event.process == NEMESIS and event.type == "info" and event.process not in open_calls
        )
        if opens:
            if event.process in open_calls:
                raise HistoryError(
                    f"process {event.process!r} invoked {event.f} while its "
                    f"{open_calls[event.process].f} is still open",
                    index=event.index,
                )
            open_calls[event.process] = event
            slot_of[event.index] = len(pending)
            pending.append((event, None))
            continue
        invoke = open_calls.pop(event.process, None)
        if invoke is None:
            raise HistoryError(
                f"{event.type} {event.f} by process {event.process!r} has no invoke",
                index=event.index,
            )
        if invoke.f != event.f:
            raise HistoryError(
                f"process {event.process!r} invoked {invoke.f} but completed {event.f}",
                index=event.index,
            )
        pending[slot_of[invoke.index]] = (invoke, event)
    ops: list[Operation] = []
    for op_id, (invoke, completion) in enumerate(pending):
        op_type = completion.type if completion is not None else "info"
        kind = cast(CompletionType, op_type)
        ops.append(Operation(op_id, invoke.process, invoke.f, kind, invoke, completion))
    return ops


def load_history(path: str | Path, fmt: str = "jsonl") -> list[Operation]:
    return pair_operations(load_events(path, fmt))


def iter_client_ops(ops: Iterable[Operation]) -> Iterator[Operation]:
    return (op for op in ops if op.is_client)

"""The quorum runs' key/value client: a few processes, each with at most one operation in flight,
that write, cas, delete and linearizably read keys of the metadata key/value space, and record a
Jepsen-style history (docs/api.md: index, time in ns, process, type invoke|ok|fail|info, f, value).

A process sends to the node it believes leads; a NotLeader answer carries a hint it follows, an
answer it never gets (crash, pause, partition of the leader) becomes `info` after its timeout.

Invariants:
- every draw comes from the one seeded rng; values are unique per write, so an acknowledged
  write can be told apart from every other in the log;
- `required_end_for_read` is the offset a read must reflect: one past the offset of every write
  acknowledged (ok) to any process before the read was invoked (linearizability's real-time
  order: an acknowledged write precedes every operation invoked after the acknowledgement).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from quorum.metadata.records import KvCas, KvDelete, KvPut, encode_record

NS_PER_MS = 1_000_000


@dataclass(slots=True)
class Operation:
    """One client operation. `f` is write, cas or read (docs/api.md); `offset` is set when a leader
    appended it; `required_end` is set for reads at invocation."""

    process: int
    op_index: int
    f: str
    key: str
    value: Any
    node: int
    required_end: int = 0
    offset: int | None = None
    done: bool = False

    def record_bytes(self) -> bytes:
        match self.f:
            case "write":
                return encode_record(KvPut(self.key, self.value))
            case "cas":
                expected, new = self.value
                return encode_record(KvCas(self.key, expected, new))
            case "delete":
                return encode_record(KvDelete(self.key))
        raise ValueError(f"{self.f} is not a log operation")

    def history_value(self) -> Any:
        return [self.key, list(self.value) if self.f == "cas" else self.value]


@dataclass(slots=True)
class ClientStats:
    ok: int = 0
    fail: int = 0
    info: int = 0
    by_f: dict[str, int] = field(default_factory=dict)


class KvClient:
    """Generates operations and records the history; the simulation delivers them."""

    def __init__(
        self,
        rng: random.Random,
        processes: int,
        voter_ids: Sequence[int],
        keys: Sequence[str] = ("x", "y", "z"),
        timeout_ms: int = 1500,
    ) -> None:
        self._rng = rng
        self.processes = tuple(range(processes))
        self._voters = tuple(voter_ids)
        self._keys = tuple(keys)
        self.timeout_ms = timeout_ms
        self.history: list[dict[str, Any]] = []
        self.ops: dict[tuple[int, int], Operation] = {}
        self._next_op: dict[int, int] = dict.fromkeys(self.processes, 0)
        self._leader_guess: dict[int, int] = {p: rng.choice(self._voters) for p in self.processes}
        self._next_value = 0
        self._last_written: dict[str, str] = {}
        self._acked_end = 0  # one past the highest offset of any acknowledged write
        self.stats = ClientStats()

    def think_time_ms(self) -> int:
        return self._rng.randint(0, 40)

    def invoke(self, process: int, now_ms: int) -> Operation:
        """Pick the next operation of `process` and record its invocation."""
        index = self._next_op[process]
        self._next_op[process] = index + 1
        key = self._rng.choice(self._keys)
        roll = self._rng.random()
        value: Any
        if roll < 0.4:
            f, value = "read", None
        elif roll < 0.75:
            f, value = "write", self._fresh_value()
        elif roll < 0.93:
            # Expect the last value this client saw written (often right, sometimes stale).
            f, value = "cas", (self._last_written.get(key), self._fresh_value())
        else:
            f, value = "delete", None
        node = self._leader_guess[process]
        op = Operation(process, index, f, key, value, node)
        if f == "read":
            op.required_end = self._acked_end
        self.ops[(process, index)] = op
        self._record(
            now_ms, process, "invoke", f, [key, None] if f == "read" else op.history_value()
        )
        return op

    def _fresh_value(self) -> str:
        self._next_value += 1
        return str(self._next_value)

    def complete(
        self,
        op: Operation,
        type_: str,
        now_ms: int,
        result: Any,
        leader_hint: int | None,
        error: str | None = None,
    ) -> None:
        """Record the outcome of `op` (once: a late duplicate answer is ignored)."""
        if op.done:
            return
        op.done = True
        if op.f == "read":
            value = [op.key, result] if type_ == "ok" else [op.key, None]
        else:
            value = op.history_value()
        if type_ == "ok" and op.f != "read":
            assert op.offset is not None
            self._acked_end = max(self._acked_end, op.offset + 1)
            self._last_written[op.key] = op.value[1] if op.f == "cas" else op.value
            if op.f == "delete":
                self._last_written.pop(op.key, None)
        if type_ == "ok" and op.f == "read" and result is not None:
            self._last_written[op.key] = result
        setattr(self.stats, type_, getattr(self.stats, type_) + 1)
        self.stats.by_f[op.f] = self.stats.by_f.get(op.f, 0) + 1
        self._record(now_ms, op.process, type_, op.f, value, error)
        if leader_hint is not None:
            self._leader_guess[op.process] = leader_hint
        elif type_ != "ok":
            self._leader_guess[op.process] = self._rng.choice(self._voters)

    def _record(
        self, now_ms: int, process: int, type_: str, f: str, value: Any, error: str | None = None
    ) -> None:
        event = {
            "index": len(self.history),
            "time": now_ms * NS_PER_MS,
            "process": process,
            "type": type_,
            "f": f,
            "value": value,
        }
        if error is not None:
            event["error"] = error  # Jepsen: a cas that failed with CAS_FAILED was a read
        self.history.append(event)

"""The coordinator's deadlines: one per key, the latest schedule wins (Kafka's CoordinatorTimer
keys: "heartbeat-<group>-<member>", "join-<group>", "sync-<group>").

Sans-IO: nothing fires by itself. The driver asks `next_deadline_ms()` and calls the core's
`tick(now_ms)`, which takes the due timers with `pop_due`. Due timers come out in (deadline,
scheduling order) order, one at a time (handling one may cancel or move another), so a run is
deterministic; a timer scheduled during a tick waits for the next tick even if it is already due
(a zero timeout cannot make one tick spin).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["HeartbeatExpiry", "InitialRebalanceDelay", "JoinDeadline", "SyncDeadline", "Timers",
           "TimerAction"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class HeartbeatExpiry:
    """A member (or a pending member) has not heartbeated within its session timeout."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class JoinDeadline:
    """The rebalance timeout of a join phase: complete it with whoever rejoined."""

    group_id: str


@dataclass(frozen=True, slots=True)
class InitialRebalanceDelay:
    """group.initial.rebalance.delay.ms of an empty group's first rebalance (KIP-134):
    `delay_ms` was this wait; `remaining_ms` is what is left of the rebalance timeout."""

    group_id: str
    delay_ms: int
    remaining_ms: int


@dataclass(frozen=True, slots=True)
class SyncDeadline:
    """Members of generation `generation_id` that have not sent SyncGroup by now are removed."""

    group_id: str
    generation_id: int


TimerAction = HeartbeatExpiry | JoinDeadline | InitialRebalanceDelay | SyncDeadline


def timer_key(action: TimerAction) -> Hashable:
    match action:
        case HeartbeatExpiry(group_id, member_id):
            return ("heartbeat", group_id, member_id)
        case JoinDeadline(group_id) | InitialRebalanceDelay(group_id, _, _):
            return ("join", group_id)
        case SyncDeadline(group_id, _):
            return ("sync", group_id)


class Timers:
    def __init__(self) -> None:
        self._live: dict[Hashable, tuple[int, int, TimerAction]] = {}  # key -> (deadline, seq)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def schedule(self, action: TimerAction, deadline_ms: int) -> None:
        key = timer_key(action)
        self._seq += 1
        self._live[key] = (deadline_ms, self._seq, action)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        self._live.pop(("heartbeat", group_id, member_id), None)

    def cancel_join(self, group_id: str) -> None:
        self._live.pop(("join", group_id), None)

    def cancel_sync(self, group_id: str) -> None:
        self._live.pop(("sync", group_id), None)

    def deadline_of(self, action: TimerAction) -> int | None:
        entry = self._live.get(timer_key(action))
        return None if entry is None else entry[0]

    def _drop_stale(self) -> None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    @property
    def last_seq(self) -> int:
        """The sequence number of the latest schedule: pass it to `pop_next_due` to leave out
        timers scheduled after this point."""
        return self._seq

    def pop_next_due(self, now_ms: int, scheduled_up_to: int) -> TimerAction | None:
        """The earliest timer due at `now_ms` and scheduled at or before `scheduled_up_to`,
        removed; None when there is none. One at a time: handling a timer may cancel or
        reschedule the others."""
        self._drop_stale()
        if not self._heap:
            return None
        deadline, seq, key = self._heap[0]
        if deadline > now_ms or seq > scheduled_up_to:
            return None
        heapq.heappop(self._heap)
        return self._live.pop(key)[2]

    def __len__(self) -> int:
        return len(self._live)

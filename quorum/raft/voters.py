"""The voter set as data (KIP-853): the `VotersRecord` control record, and `VoterHistory`, the
voter set at every offset of the local log (Kafka's VoterSetHistory).

Rules (Raft thesis 4.1, single-server changes; KIP-853):
- a node uses the newest voter set in its log, committed or not: a VotersRecord takes effect
  when it is appended, and is undone when a truncation removes it;
- below the log start, the voter set is the snapshot's (every snapshot envelope carries the
  voters it was taken under, quorum.raft.snapshot), or the static bootstrap set
  (`controller.quorum.voters`) when no record was ever written;
- the leader changes the set by one voter at a time, and only once the previous change is
  committed (quorum.raft.leader), so any two consecutive sets share a majority.

Invariant: offsets in the history strictly increase; `at(offset)` is the set in force for an
entry at `offset` (the newest record strictly below it).
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum import codec


@codec.register("raft.Voter")
@dataclass(frozen=True, slots=True, order=True)
class Voter:
    """A voter and where its peers reach it (`host:port`, "" when the driver needs none)."""

    node_id: int
    endpoint: str = ""


@codec.register("raft.VotersRecord")
@dataclass(frozen=True, slots=True)
class VotersRecord:
    """The whole voter set after a change (Entry.control=True), sorted by node id."""

    voters: tuple[Voter, ...]

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters)

    def endpoint_of(self, node_id: int) -> str:
        return next((v.endpoint for v in self.voters if v.node_id == node_id), "")

    @classmethod
    def of(cls, voters: list[Voter] | tuple[Voter, ...]) -> VotersRecord:
        return cls(tuple(sorted(voters)))


class VoterHistory:
    """(offset, VotersRecord) of every voter change the local log holds, over a base set."""

    def __init__(self, base: VotersRecord) -> None:
        self.base = base
        self.changes: list[tuple[int, VotersRecord]] = []

    @property
    def latest(self) -> VotersRecord:
        return self.changes[-1][1] if self.changes else self.base

    @property
    def latest_offset(self) -> int:
        """Offset of the newest VotersRecord, -1 when the set is the base one."""
        return self.changes[-1][0] if self.changes else -1

    def at(self, offset: int) -> VotersRecord:
        current = self.base
        for at, record in self.changes:
            if at >= offset:
                break
            current = record
        return current

    def add(self, offset: int, record: VotersRecord) -> None:
        if self.changes and offset <= self.changes[-1][0]:
            raise ValueError(f"voter change at {offset} not after {self.changes[-1][0]}")
        self.changes.append((offset, record))

    def truncate(self, end_offset: int) -> bool:
        """Forget changes at or above `end_offset`; whether the latest set changed."""
        before = self.latest
        self.changes = [(o, r) for o, r in self.changes if o < end_offset]
        return self.latest != before

    def reset(self, base: VotersRecord) -> None:
        """A snapshot replaced the log: its voters are the base, no change is above it."""
        self.base = base
        self.changes = []

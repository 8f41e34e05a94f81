"""Safety invariants the simulator checks after every event (the oracle of a seeded run).

The checker watches what each node's driver executes (log appends, flushes, truncations, high
watermark moves, leader changes, crashes and recoveries) and keeps the global facts of the run:

- ElectionSafety (Raft thesis 3.6.3, KIP-595): at most one leader per epoch, ever; a node that
  learns the leader of an epoch learns the one that was elected.
- LogMatching (Raft 3.5): an entry is identified by (offset, epoch); two replicas holding the
  same (offset, epoch) hold the same data and the same epoch at offset-1, so, by induction, the
  same log below it. Checked on every append against a global index.
- StateMachineSafety / committed entries: the first node whose high watermark passes an offset
  fixes the committed entry there; every node whose HW passes it later must hold the same entry.
  A node never truncates below its own HW (KRaft throws there too) and its HW never moves back
  (Kafka's "non-monotonic update of high watermark"), except across a crash, where the in-memory
  HW restarts.
- CommitOwnEpoch (Raft 3.6.2 "figure 8", KIP-595): a leader's HW only ever moves past an entry
  of its own epoch.
- LeaderCompleteness (Raft 3.6.3): a node that becomes leader of epoch E holds every entry
  committed in an epoch below E (above its log start offset). An entry counts as committed in
  the epoch of the node whose HW first passed it (the leader). A stale leader of a lower epoch
  (a candidate whose grant was delayed) need not hold entries committed in later epochs: it
  can never reach a majority in its epoch again.
- Durability: after a crash, everything the node had flushed (and not truncated) is still there,
  unchanged. (KRaft voters count towards the HW only what they have flushed.)
- Linearizable reads: a read answered after a read barrier returns the value of the committed
  log as of the offset it was answered at, and that offset covers every write acknowledged to
  any client before the read was invoked.

Metadata invariants (`PartitionImageChecker`), checked on a node's image every time it applied
something (the metadata run's controllers and brokers, the data-plane runs' controller voters):
- PartitionLeaderInIsr: a partition's leader is in its ISR (or -1), unless the election was
  unclean (leader_recovery_state RECOVERING, KIP-704);
- MonotonicPartitionEpochs: in one node incarnation, a partition's leader_epoch and
  partition_epoch never decrease;
- SingleLeaderPerEpoch: across all nodes and all time, one (partition, leader_epoch) names one
  leader. A replication.mode=raft partition's image records the leaders its Raft group elects
  and forgets one that left (leader -1, the epoch unchanged: quorum/controller/raft_leaders.py),
  so there -1 is no leader of the epoch, only the lack of one.

A violation is recorded with the simulated time; the simulation stops at the first one, so the
seed that found it replays to exactly that point. The checkers only read what they check.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.metadata.configs import REPLICATION_MODE, REPLICATION_MODE_RAFT
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import (
    NO_LEADER,
    DecodeError,
    KvCas,
    KvDelete,
    KvPut,
    LeaderRecoveryState,
    decode_record,
)
from quorum.raft.log import Entry, RaftLog

_MAX_READ_BYTES = 1 << 30
_READ_CHUNK_BYTES = 4096


def read_range(log: RaftLog, start_offset: int, end_offset: int) -> list[Entry]:
    """Entries [start_offset, end_offset) of `log` (which must hold them), read in small chunks
    so that a few entries below the HW do not decode the whole tail of the log."""
    out: list[Entry] = []
    offset = start_offset
    while offset < end_offset:
        chunk = log.read(offset, _READ_CHUNK_BYTES)
        if not chunk:
            break
        for entry in chunk:
            if entry.offset >= end_offset:
                return out
            out.append(entry)
        offset = chunk[-1].offset + 1
    return out


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken invariant: which, when, on which node, and the evidence."""

    invariant: str
    time_ms: int
    node: int | None
    detail: str

    def __str__(self) -> str:
        where = f" on node {self.node}" if self.node is not None else ""
        return f"{self.invariant} at {self.time_ms} ms{where}: {self.detail}"


class SafetyViolation(Exception):
    """Raised by the checker so the simulation stops at the event that broke an invariant."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


class KvModel:
    """The key/value space as the committed log defines it: for each key, the offsets where its
    value changed and the value from then on (None: absent). Same rules as MetadataImage.apply:
    put sets, delete removes, cas sets iff the current value equals `expected`."""

    __slots__ = ("_history", "_current", "applied_end")

    def __init__(self) -> None:
        self._history: dict[str, tuple[list[int], list[object]]] = {}
        self._current: dict[str, object] = {}
        self.applied_end = 0

    def apply(self, offset: int, entry: Entry) -> None:
        assert offset == self.applied_end, (offset, self.applied_end)
        self.applied_end = offset + 1
        if entry.control:
            return
        try:
            record = decode_record(entry.data)
        except DecodeError:
            return
        match record:
            case KvPut(key=key, value=value):
                self._set(key, offset, value)
            case KvDelete(key=key):
                if key in self._current:
                    self._set(key, offset, None)
            case KvCas(key=key, expected=expected, value=value):
                if self._current.get(key) == expected:
                    self._set(key, offset, value)
            case _:
                pass

    def _set(self, key: str, offset: int, value: object) -> None:
        offsets, values = self._history.setdefault(key, ([], []))
        offsets.append(offset)
        values.append(value)
        if value is None:
            self._current.pop(key, None)
        else:
            self._current[key] = value

    def keys(self) -> set[str]:
        return set(self._history)

    def value_at(self, key: str, end_offset: int) -> object:
        """The value of `key` once every entry below `end_offset` is applied."""
        history = self._history.get(key)
        if history is None:
            return None
        offsets, values = history
        i = bisect.bisect_left(offsets, end_offset)
        return values[i - 1] if i > 0 else None


class SafetyChecker:
    """Global facts of one run and the checks against them. Every `on_*` hook raises
    SafetyViolation when an invariant breaks."""

    def __init__(self) -> None:
        self.now_ms = 0
        self.leader_of_epoch: dict[int, int] = {}
        self.entry_index: dict[tuple[int, int], tuple[bytes, bool, int]] = {}
        self.committed: dict[int, tuple[int, bytes]] = {}
        self.commit_epochs: list[int] = []  # by offset: the epoch the entry was committed in
        self._committed_by_data: dict[bytes, int] = {}
        self.model = KvModel()
        self.high_watermark: dict[int, int] = {}
        self.shadow: dict[int, dict[int, int]] = {}  # node -> offset -> epoch (what it holds)
        self.durable_end: dict[int, int] = {}
        self.checks = 0
        # How often the interesting paths ran (tests assert the runs reach them).
        self.paths: dict[str, int] = {}

    def count(self, path: str) -> None:
        self.paths[path] = self.paths.get(path, 0) + 1

    def fail(self, invariant: str, node: int | None, detail: str) -> None:
        raise SafetyViolation(Violation(invariant, self.now_ms, node, detail))

    # -- election ---------------------------------------------------------------------------------

    def on_leader_learned(self, node: int, epoch: int, leader_id: int | None, log: RaftLog) -> None:
        self.checks += 1
        if leader_id is None:
            return
        known = self.leader_of_epoch.setdefault(epoch, leader_id)
        if known != leader_id:
            self.fail(
                "ElectionSafety",
                node,
                f"epoch {epoch} has leader {known}, node {node} now names leader {leader_id}",
            )
        if leader_id == node:
            self.count("elected")
            self._check_leader_completeness(node, epoch, log)

    def _check_leader_completeness(self, node: int, epoch: int, log: RaftLog) -> None:
        # Commit epochs never decrease along the log, so the entries committed before `epoch`
        # are a prefix.
        committed_end = bisect.bisect_left(self.commit_epochs, epoch)
        start = log.start_offset
        if start >= committed_end:
            if start > committed_end and log.end_offset < start:
                self.fail("LeaderCompleteness", node, f"log start {start} past its end")
            return
        if log.end_offset < committed_end:
            self.fail(
                "LeaderCompleteness",
                node,
                f"leader of epoch {epoch} has log end {log.end_offset} but entries up to "
                f"{committed_end - 1} are committed",
            )
        for entry in read_range(log, start, committed_end):
            epoch_at, data = self.committed[entry.offset]
            if entry.epoch != epoch_at or entry.data != data:
                self.fail(
                    "LeaderCompleteness",
                    node,
                    f"leader of epoch {epoch} holds (offset {entry.offset}, epoch {entry.epoch}) "
                    f"where (epoch {epoch_at}) was committed",
                )

    def committed_offset_of(self, data: bytes) -> int | None:
        """Offset of the first committed entry with exactly this data (client values are unique)."""
        return self._committed_by_data.get(data)

    # -- log --------------------------------------------------------------------------------------

    def on_append(self, node: int, entries: Sequence[Entry], log_before: RaftLog) -> None:
        """Before the entries are appended: LogMatching against the global index."""
        self.checks += 1
        if not entries:
            return
        prev_epoch = log_before.last_epoch()
        if entries[0].offset != log_before.end_offset:
            self.fail(
                "LogAppend",
                node,
                f"append at {entries[0].offset} but log end is {log_before.end_offset}",
            )
        shadow = self.shadow.setdefault(node, {})
        for entry in entries:
            key = (entry.offset, entry.epoch)
            fact = (entry.data, entry.control, prev_epoch)
            known = self.entry_index.setdefault(key, fact)
            if known != fact:
                self.fail(
                    "LogMatching",
                    node,
                    f"entry (offset {entry.offset}, epoch {entry.epoch}) differs from another "
                    f"replica's (data equal: {known[0] == entry.data}, previous epoch "
                    f"{known[2]} vs {prev_epoch})",
                )
            if entry.epoch < prev_epoch:
                self.fail("LogMatching", node, f"epoch goes back at offset {entry.offset}")
            shadow[entry.offset] = entry.epoch
            prev_epoch = entry.epoch

    def on_flush(self, node: int, log: RaftLog) -> None:
        self.durable_end[node] = log.end_offset

    def on_truncate(self, node: int, end_offset: int) -> None:
        self.checks += 1
        self.count("truncate")
        hw = self.high_watermark.get(node, 0)
        if end_offset < hw:
            self.fail("TruncateBelowHighWatermark", node, f"truncate to {end_offset} below HW {hw}")
        shadow = self.shadow.get(node, {})
        for offset in [o for o in shadow if o >= end_offset]:
            del shadow[offset]
        if self.durable_end.get(node, 0) > end_offset:
            self.durable_end[node] = end_offset

    def on_snapshot_installed(self, node: int, snapshot_offset: int, log: RaftLog) -> None:
        self.count("install_snapshot")
        self.shadow[node] = (
            {e.offset: e.epoch for e in log.read(log.start_offset, _MAX_READ_BYTES)}
            if log.end_offset > log.start_offset
            else {}
        )
        self.durable_end[node] = log.end_offset
        if snapshot_offset > self.model.applied_end:
            self.fail(
                "SnapshotBeyondCommit",
                node,
                f"installed snapshot ending at {snapshot_offset}, only {self.model.applied_end} committed",
            )

    # -- high watermark ------------------------------------------------------------------------------

    def on_commit(self, node: int, high_watermark: int, log: RaftLog, epoch: int = 0) -> None:
        """After a CommitAdvanced was executed on `node`, whose current epoch is `epoch`."""
        self.checks += 1
        old = self.high_watermark.get(node, 0)
        if high_watermark < old:
            self.fail("MonotonicHighWatermark", node, f"HW {old} -> {high_watermark}")
        if high_watermark > log.end_offset:
            self.fail("HighWatermarkBeyondLog", node, f"HW {high_watermark} > LEO {log.end_offset}")
        self.high_watermark[node] = high_watermark
        start = max(old, log.start_offset)
        if start >= high_watermark:
            return
        for entry in read_range(log, start, high_watermark):
            self._check_committed(node, entry, epoch)

    def on_leader_commit(self, node: int, epoch: int, high_watermark: int, log: RaftLog) -> None:
        """A leader advanced its HW: the entry below it must be of the leader's own epoch. A
        leader never commits entries of earlier epochs by counting replicas (Raft thesis 3.6.2,
        "figure 8"; KIP-595: the HW moves only past the epoch's LeaderChange record)."""
        self.checks += 1
        if high_watermark <= log.start_offset:
            return
        last = read_range(log, high_watermark - 1, high_watermark)
        if last and last[0].epoch != epoch:
            self.fail(
                "CommitOwnEpoch",
                node,
                f"leader of epoch {epoch} moved its HW to {high_watermark} over an entry of "
                f"epoch {last[0].epoch}",
            )

    def _check_committed(self, node: int, entry: Entry, epoch: int) -> None:
        known = self.committed.get(entry.offset)
        if known is None:
            if entry.offset != self.model.applied_end:
                # Committed entries are learned in order from the first node to pass them; a gap
                # means this node's log start skipped them (snapshot) and nobody read them.
                return
            self.committed[entry.offset] = (entry.epoch, entry.data)
            if self.commit_epochs and epoch < self.commit_epochs[-1]:
                self.fail(
                    "MonotonicCommitEpoch",
                    node,
                    f"offset {entry.offset} committed in epoch {epoch} after an entry committed "
                    f"in epoch {self.commit_epochs[-1]}",
                )
            self.commit_epochs.append(epoch)
            self._committed_by_data.setdefault(entry.data, entry.offset)
            self.model.apply(entry.offset, entry)
            return
        if known != (entry.epoch, entry.data):
            self.fail(
                "StateMachineSafety",
                node,
                f"committed offset {entry.offset}: epoch {known[0]} here epoch {entry.epoch} "
                f"(data equal: {known[1] == entry.data})",
            )

    # -- crashes ------------------------------------------------------------------------------------

    def on_crash(self, node: int) -> None:
        self.high_watermark[node] = 0  # the HW lives in memory; KRaft relearns it from the leader

    def on_recovered(self, node: int, log: RaftLog) -> None:
        """After a restart recovered the log from storage."""
        self.checks += 1
        self.count("recover")
        durable_end = self.durable_end.get(node, 0)
        if log.end_offset < durable_end:
            self.fail(
                "Durability",
                node,
                f"flushed up to {durable_end} before the crash, recovered log ends at {log.end_offset}",
            )
        shadow = self.shadow.get(node, {})
        recovered: dict[int, int] = {}
        if log.end_offset > log.start_offset:
            for entry in log.read(log.start_offset, _MAX_READ_BYTES):
                recovered[entry.offset] = entry.epoch
                fact = self.entry_index.get((entry.offset, entry.epoch))
                if fact is None or fact[0] != entry.data:
                    self.fail(
                        "Durability",
                        node,
                        f"recovered entry (offset {entry.offset}, epoch {entry.epoch}) was never "
                        "appended with that data",
                    )
                if (
                    entry.offset < durable_end
                    and shadow.get(entry.offset, entry.epoch) != entry.epoch
                ):
                    self.fail(
                        "Durability",
                        node,
                        f"flushed entry at offset {entry.offset} had epoch {shadow.get(entry.offset)}, "
                        f"recovered epoch {entry.epoch}",
                    )
        self.shadow[node] = recovered
        self.durable_end[node] = log.end_offset

    # -- reads ----------------------------------------------------------------------------------------

    def on_read(
        self, node: int, key: str, value: object, applied_end: int, required_end: int
    ) -> None:
        """A linearizable read was answered by `node` from its image at `applied_end` (every entry
        below it applied); `required_end` covers every write acknowledged before invocation."""
        self.checks += 1
        if applied_end < required_end:
            self.fail(
                "StaleRead",
                node,
                f"read of {key!r} answered at offset {applied_end}, but a write at "
                f"{required_end - 1} was acknowledged before the read began",
            )
        if applied_end <= self.model.applied_end:
            expected = self.model.value_at(key, applied_end)
            if expected != value:
                self.fail(
                    "StaleRead",
                    node,
                    f"read of {key!r} at offset {applied_end} returned {value!r}, the committed "
                    f"log says {expected!r}",
                )


class ImageHolder(Protocol):
    """A process with a metadata image: its id, its process start number, its image."""

    node_id: int
    incarnation: int
    image: MetadataImage


class PartitionImageChecker:
    """The invariants above, checked on a node's image each time it applied something; failures
    go to `checker.fail` (a SafetyViolation stops the run)."""

    def __init__(self, checker: SafetyChecker) -> None:
        self.checker = checker
        self.leader_of: dict[tuple[str, int, int], int] = {}
        self.seen: dict[tuple[int, int], dict[tuple[str, int], tuple[int, int]]] = {}
        self.checked_offset: dict[int, tuple[int, int]] = {}

    @staticmethod
    def _is_raft(image: MetadataImage, topic: str) -> bool:
        return image.topic_config_overrides(topic).get(REPLICATION_MODE) == REPLICATION_MODE_RAFT

    def check(self, node: ImageHolder) -> None:
        image = node.image
        key = (node.node_id, node.incarnation)
        if self.checked_offset.get(node.node_id) == (node.incarnation, image.applied_offset):
            return
        self.checked_offset[node.node_id] = (node.incarnation, image.applied_offset)
        seen = self.seen.setdefault(key, {})
        for topic, part in image.all_partitions():
            where = f"{topic.name}-{part.partition} at offset {image.applied_offset}"
            self.checker.count("cluster_partition_checks")
            if (
                part.leader != NO_LEADER
                and part.leader not in part.isr
                and part.leader_recovery_state != LeaderRecoveryState.RECOVERING
            ):
                self.checker.fail(
                    "PartitionLeaderInIsr",
                    node.node_id,
                    f"{where}: leader {part.leader} not in ISR {part.isr}",
                )
            tp = (topic.topic_id, part.partition)
            before = seen.get(tp)
            now = (part.leader_epoch, part.partition_epoch)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                self.checker.fail(
                    "MonotonicPartitionEpochs",
                    node.node_id,
                    f"{where}: (leader_epoch, partition_epoch) {before} -> {now}",
                )
            seen[tp] = now
            if part.leader == NO_LEADER and self._is_raft(image, topic.name):
                continue
            epoch_key = (topic.topic_id, part.partition, part.leader_epoch)
            known = self.leader_of.setdefault(epoch_key, part.leader)
            if known != part.leader:
                self.checker.fail(
                    "SingleLeaderPerEpoch",
                    node.node_id,
                    f"{where}: leader_epoch {part.leader_epoch} led by {known} "
                    f"and by {part.leader}",
                )

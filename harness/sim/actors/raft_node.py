"""A simulated process of the metadata quorum, voter or observer: the real Raft core
(quorum.raft.core.RaftCore) on a RaftLogStore over its own SimStorage (partition.raft.log,
partition/log) seen through an ObservedLog, an election-state file on the same storage
(both in harness.sim.actors.raft_disk), and a MetadataImage fed by CommitAdvanced. The node is the
simulator's `env` for the one shared `execute_effects` (harness.drive.effects), so the simulator
executes effects exactly as the asyncio node does. It also answers the quorum runs' key/value
client (harness.sim.actors.kv_client) from its image, as the real node's admin API does.

Roles a node hosts are parts (`NodePart`): the active controller on a voter
(harness.sim.actors.controller), the broker lifecycle on an observer
(harness.sim.actors.broker). A part sees the node's non-Raft inputs it accepts, every
entry applied to the image (Kafka's RaftClient.Listener.handleCommit), and takes a step after
every input; the node's deadline is the earliest of its core's and its parts'. Nothing else
about a node is extended: planted bugs replace `core_class`, `log_store_class`, `new_image` or
override the client-facing methods.

Lifecycle: `start` (boot or restart: recover the log from storage, reload the election state,
rebuild the image from the newest snapshot; the HW restarts at the snapshot and the image catches
up as the core learns the HW again), `crash` (SimStorage.crash: unsynced bytes are lost, possibly
a torn last write; in-memory state is gone; pending client requests never get an answer), `stop`
(SIGKILL: memory gone, the page cache kept), `pause` (the world stops delivering and ticking).
Time: every input arrives in kernel time and is read on the node's `clock` (SkewedClock, the
clock nemesis steps it); `next_deadline_ms` answers in kernel time.

Invariants: every log write goes through the ObservedLog; the image applies entries strictly in
offset order and only below the HW; a client write is acknowledged only once it is applied at
the offset the leader appended it at, with the data the client sent; a message that is neither
a Raft message nor accepted by a part is dropped (it never reaches the core).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, assert_never

from harness.drive.effects import execute_effects
from harness.sim.actors.kv_client import Operation
from harness.sim.actors.process import SimProcess
from harness.sim.actors.raft_disk import ObservedLog, SimQuorumStateStore
from harness.sim.actors.skewed_clock import SkewedClock
from harness.sim.checks.invariants import SafetyChecker, read_range
from partition.log import LogConfig
from partition.log.storage import SimStorage
from partition.raft.log import RaftLogStore
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import KvPut, encode_record
from quorum.raft.config import RaftConfig
from quorum.raft.core import Accepted, NotLeader, RaftCore
from quorum.raft.effects import (
    ElectionState,
    LeaderChanged,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    VoterChangeCompleted,
)
from quorum.raft.log import Entry, OffsetAndEpoch
from quorum.raft.messages import RaftMessage
from quorum.raft.snapshot import decode_snapshot, encode_snapshot

LOG_DIRECTORY = "metadata-log"
NOT_LEADER = Errors.NOT_LEADER_OR_FOLLOWER.name


class NodePart(Protocol):
    """A role hosted on a RaftNode (the part keeps a reference to its node)."""

    def reset(self) -> None:
        """Fresh in-memory state: the node (re)started or crashed."""
        ...

    def accepts(self, message: Any) -> bool:
        """True for the non-Raft inputs this part handles."""
        ...

    def handle(self, src: int, message: Any, now_ms: int) -> None: ...

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        """`entry` was just applied to the node's image (with the image's own result)."""
        ...

    def step(self, now_ms: int) -> None:
        """After every input of the node (message, timer, refused connection)."""
        ...

    def next_deadline_ms(self) -> int | None: ...


class RaftNode(SimProcess):
    """One voter or observer. `core_class` and `log_store_class` are the real RaftCore and
    RaftLogStore; tests plant bugs by subclassing them."""

    core_class: type[RaftCore] = RaftCore
    log_store_class: type[RaftLogStore] = RaftLogStore

    def __init__(
        self,
        node_id: int,
        voter_ids: Sequence[int],
        raft_config: RaftConfig,
        checker: SafetyChecker,
        log_config: LogConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.voter_ids = tuple(voter_ids)
        self.raft_config = raft_config
        self.checker = checker
        self.log_config = log_config
        self.storage = SimStorage()
        self.parts: list[NodePart] = []
        self.init_process()
        # (operation, type ok|fail|info, read value, leader hint, Kafka error name)
        self.replies: list[tuple[Operation, str, Any, int | None, str | None]] = []
        self.voter_answers: Counter[str] = Counter()  # KIP-853 answers, by error name
        # Inputs come in kernel time and are read on this clock; deadlines go back out in
        # kernel time (next_deadline_ms). The machine's clock: it survives restarts.
        self.clock = SkewedClock()
        self._reset_memory()

    def _reset_memory(self) -> None:
        self.core: Any = None
        self.store: Any = None
        self._log: ObservedLog | None = None
        self.image = self.new_image()
        self.high_watermark = 0
        self.epoch = 0
        self.leader_id: int | None = None
        self.is_leader = False
        self.pending_writes: dict[int, Operation] = {}
        self.pending_reads: dict[int, tuple[Operation, int | None]] = {}
        self._next_request_id = 0
        for part in self.parts:
            part.reset()

    def attach(self, part: NodePart) -> None:
        """Host `part` from now on (a role: the active controller, the broker lifecycle)."""
        self.parts.append(part)
        part.reset()

    @property
    def applied_end(self) -> int:
        """One past the last offset applied to the image."""
        return self.image.applied_offset + 1

    # -- lifecycle ----------------------------------------------------------------------------------

    def open_log(self) -> Any:
        """Recover the Raft log from this node's storage (the RaftLogStore)."""
        if self.log_config is None:
            return self.log_store_class.open(self.storage, LOG_DIRECTORY)
        return self.log_store_class.open(self.storage, LOG_DIRECTORY, self.log_config)

    def new_image(self) -> MetadataImage:
        """The empty image a (re)started node applies the log to."""
        return MetadataImage()

    def load_election_state(self) -> ElectionState:
        return self.state_store.read()

    def start(self, now_ms: int, seed: int) -> None:
        self._reset_memory()
        self.process_started()
        self.buffered = []
        self.armed_deadline_ms = None
        self.timer_generation += 1
        self.state_store = SimQuorumStateStore(self.storage)
        self.store = self.open_log()
        self._log = ObservedLog(self.node_id, self.store, self.checker)
        if self.incarnation > 1:
            self.checker.on_recovered(self.node_id, self.store)
        snapshot = self.store.latest_snapshot()
        if snapshot is not None:
            self.image = MetadataImage.restore(self._read_snapshot(snapshot))
            self.high_watermark = snapshot.offset
        self.core = self.core_class(
            self.raft_config,
            self.node_id,
            self.voter_ids,
            self.store,
            self.load_election_state(),
            seed,
            self.clock.local(now_ms),
        )

    def crash(self, rng: random.Random | None) -> None:
        """Power loss: unsynced bytes are lost (a random prefix of them kept with `rng`)."""
        self.storage.crash(rng)
        self.stop()

    def stop(self) -> None:
        """The process is gone (SIGKILL): memory lost, the page cache (storage) kept. The
        checker forgets its in-memory HW (KRaft relearns it from the leader)."""
        self.process_stopped()
        self.replies = []
        self._reset_memory()
        self.checker.on_crash(self.node_id)

    def shutdown(self, now_ms: int) -> None:
        """Resign if leading (KIP-595 EndQuorumEpoch) and flush the log; the caller then stops
        the process (crash with nothing unsynced left to lose)."""
        self.run_effects(self.core.resign(self.clock.local(now_ms)))
        self.store.close()

    def _read_snapshot(self, snapshot: OffsetAndEpoch) -> bytes:
        """The image bytes of a snapshot file (quorum/raft/snapshot.py's envelope around them)."""
        size = self.store.snapshot_size(snapshot)
        return decode_snapshot(bytes(self.store.read_snapshot(snapshot, 0, size))).payload

    # -- inputs ------------------------------------------------------------------------------------

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        now_ms = self.clock.local(now_ms)
        for part in self.parts:
            if part.accepts(message):
                part.handle(src, message, now_ms)
                break
        else:
            if isinstance(message, RaftMessage):
                self.run_effects(self.core.handle(src, message, now_ms))
        self._step(now_ms)

    def tick(self, now_ms: int) -> None:
        now_ms = self.clock.local(now_ms)
        self.run_effects(self.core.tick(now_ms))
        self._step(now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        now_ms = self.clock.local(now_ms)
        self.run_effects(self.core.peer_unreachable(peer, now_ms))
        self._step(now_ms)

    def step(self, now_ms: int) -> None:
        """Every part's step at kernel time `now_ms` (a part's own input, e.g. an admin
        request, read on this process's clock)."""
        self._step(self.clock.local(now_ms))

    def _step(self, now_ms: int) -> None:
        """Every part's step, after an input (only while the core runs); `now_ms` local."""
        if self.core is None:
            return
        for part in self.parts:
            part.step(now_ms)

    def next_deadline_ms(self) -> int | None:
        deadline = self.core.next_deadline_ms()
        deadlines = [] if deadline is None else [int(deadline)]
        for part in self.parts:
            part_deadline = part.next_deadline_ms()
            if part_deadline is not None:
                deadlines.append(part_deadline)
        return self.clock.kernel(min(deadlines)) if deadlines else None  # kernel time

    def take_snapshot(self, now_ms: int) -> None:
        """Snapshot the image at its applied offset (KIP-630), if newer than the latest one."""
        end = self.applied_end
        latest = self.store.latest_snapshot()
        if end <= 0 or (latest is not None and latest.offset >= end):
            return
        snapshot = OffsetAndEpoch(end, self.image.applied_epoch)
        voters = self.core.voters_at(end)  # KIP-853: the snapshot records the voter set
        self.store.write_snapshot(snapshot, encode_snapshot(voters, self.image.snapshot()))
        self.run_effects(self.core.snapshot_taken(snapshot, self.clock.local(now_ms)))

    def client_request(self, op: Operation, now_ms: int) -> None:
        now_ms = self.clock.local(now_ms)
        if op.f == "read":
            self._next_request_id += 1
            request_id = self._next_request_id
            self.pending_reads[request_id] = (op, None)
            self.run_effects(self.core.read_barrier(request_id, now_ms))
            return
        offset, effects = self._propose(op.record_bytes(), now_ms)
        if offset is None:
            self.replies.append((op, "fail", None, self.leader_id, NOT_LEADER))
            return
        op.offset = offset
        self.pending_writes[offset] = op
        self.run_effects(effects)

    def propose_marker(self, value: str, now_ms: int) -> bytes | None:
        """The liveness phase's proposal; returns its bytes, or None if not accepted."""
        data = encode_record(KvPut("__liveness__", value))
        offset, effects = self._propose(data, self.clock.local(now_ms))
        if offset is None:
            return None
        self.run_effects(effects)
        return data

    def _propose(self, data: bytes, now_ms: int) -> tuple[int | None, list[Any]]:
        result, effects = self.core.propose([data], now_ms)
        match result:
            case Accepted(first_offset=offset):
                return offset, effects
            case NotLeader():
                return None, effects
            case _:
                assert_never(result)

    def image_keys(self) -> set[str]:
        return set(self.image.kv_keys())

    def image_value(self, key: str) -> object:
        got = self.image.get(key)
        return None if got is None else got[0]

    # -- the env of execute_effects ------------------------------------------------------------------

    def run_effects(self, effects: Sequence[Any]) -> None:
        """Execute `effects` in order with the shared executor, this node as its env."""
        if effects:
            execute_effects(effects, self)

    def send(self, to: int, message: Any) -> None:
        self.outbox.append((to, message))

    def persist_election_state(self, state: ElectionState) -> None:
        self.state_store.write(state)

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        epoch, leader_id, is_self = effect.epoch, effect.leader_id, effect.is_self
        self.checker.on_leader_learned(self.node_id, epoch, leader_id, self.store)
        self.epoch = epoch
        self.leader_id = leader_id
        self.is_leader = is_self
        # A leader that stops leading cannot know the fate of its pending proposals: info.
        for op in self.pending_writes.values():
            self.replies.append((op, "info", None, leader_id, "REQUEST_TIMED_OUT"))
        self.pending_writes.clear()

    @property
    def log(self) -> ObservedLog:
        """The env's log for execute_effects (only while the node is up)."""
        assert self._log is not None, f"node {self.node_id} is down"
        return self._log

    def on_commit_advanced(self, high_watermark: int) -> None:
        self.checker.on_commit(self.node_id, high_watermark, self.store, self.core.epoch)
        if self.core.is_leader:
            self.checker.on_leader_commit(self.node_id, self.core.epoch, high_watermark, self.store)
        self.high_watermark = high_watermark
        self._apply_committed()

    def _apply_committed(self) -> None:
        start = self.applied_end
        # Behind the log start only a snapshot (InstallSnapshot) can bring the image forward.
        if self.store.start_offset <= start < self.high_watermark:
            for entry in read_range(self.store, start, self.high_watermark):
                result = self.image.apply_entry(entry)
                for part in self.parts:
                    part.on_applied(entry, result)
                op = self.pending_writes.pop(entry.offset, None)
                if op is not None:
                    self._answer_write(op, entry, result)
        self._answer_reads()

    def _answer_write(self, op: Operation, entry: Entry, result: ApplyResult | None) -> None:
        if entry.data != op.record_bytes():
            # Replaced by another leader's entry: it can never commit.
            self.replies.append((op, "fail", None, self.leader_id, NOT_LEADER))
        elif result is not None and result.error != Errors.NONE:
            # CAS_FAILED (a compare that did not match) or KEY_NOT_FOUND (delete of nothing).
            self.replies.append((op, "fail", None, self.leader_id, result.error.name))
        else:
            self.replies.append((op, "ok", None, None, None))

    def on_read_barrier(self, effect: ReadBarrierCompleted | ReadBarrierFailed) -> None:
        match effect:
            case ReadBarrierCompleted(request_id=request_id, high_watermark=high_watermark):
                pending = self.pending_reads.get(request_id)
                if pending is not None:
                    self.pending_reads[request_id] = (pending[0], high_watermark)
                    self._answer_reads()
            case ReadBarrierFailed(request_id=request_id, leader_id=leader_id):
                pending = self.pending_reads.pop(request_id, None)
                if pending is not None:
                    self.replies.append((pending[0], "fail", None, leader_id, NOT_LEADER))
            case _:
                assert_never(effect)

    def _answer_reads(self) -> None:
        applied_end = self.applied_end
        for request_id in sorted(self.pending_reads):
            op, barrier_hw = self.pending_reads[request_id]
            if barrier_hw is None or applied_end < barrier_hw:
                continue
            del self.pending_reads[request_id]
            value = self.image_value(op.key)
            self.checker.on_read(self.node_id, op.key, value, applied_end, op.required_end)
            self.replies.append((op, "ok", value, None, None))

    def on_voter_change_completed(self, effect: VoterChangeCompleted) -> None:
        self.voter_answers[effect.error.name] += 1

    def on_snapshot_installed(self, snapshot: OffsetAndEpoch) -> None:
        self.image = MetadataImage.restore(self._read_snapshot(snapshot))
        self.checker.on_snapshot_installed(self.node_id, snapshot.offset, self.store)
        self.high_watermark = max(self.high_watermark, snapshot.offset)
        self._answer_reads()


NodeFactory = Callable[[int, Sequence[int], RaftConfig, SafetyChecker], RaftNode]

"""A simulated broker's raft partitions (`replication.mode=raft`): partition.raft's RaftReplica on the
broker's simulated disk, driven the way partition/raft/effects.py says (tests/raftpart/router.py
is the reference driver), its Raft messages on the World's network in one RaftEnvelope per broker
pair and round (partition.raft.mux).

A *round* is one input of the broker actor (a message, its timer, a refused connection). Per round:
1. An input reaches a partition's core unless that core still has stages of an earlier call to
   run (its log is being fsynced): then it waits in the partition's queue (rule 1 of
   partition.raft.effects: RaftCore reads its log end at the start of every call, and must never
   count an append that is not fsynced).
2. Each call's effects are cut by `flush_stages`; stage 0 runs at once. A stage that carries
   its election state apart (`persist`, where flush_stages takes PersistElectionState out of
   the effects to group votes) has it made durable after the stage's fsync, before the next
   stage; otherwise PersistElectionState runs among the stage's effects, durable at once.
3. End of round: phase merging after a timer round (AnswerLongPolls); then the grouped fsync:
   every log a stage left dirty is fsynced once for the round (`make_durable`), and it takes
   simulated time: on a measured disk (`RaftSettings.measured_disk`) a time drawn for each
   grouped fsync from the broker's seeded disk (harness.sim.actors.disk.Disk.fsync_ms, as the
   ISR and quorum brokers draw theirs), otherwise the fixed `fsync_ms`. The next stages run
   when it completes, and what arrives meanwhile waits (1). With a fixed fsync_ms = 0 it
   completes within the round, as in the router. Last,
   every Raft message of the round leaves in ONE envelope per peer (rule 2: a Send depends only
   on the flushes of earlier stages).
A power loss while an fsync is in flight loses what it was flushing (SimStorage.crash), and
nothing after the cut was acted on (rule 3: no fetch reported it, no client was answered).

Recovery flush: a replica is (re)built on a log that may hold appends its killed process never
fsynced (SIGKILL keeps the page cache; Linux writes it back later). What the log holds beyond
its recovery point is fsynced before the core reads it (harness.drive.raft_stages.recovery_flush,
the runtime's own), or this replica's first fetches would report records a later power loss can
still take away (rule 1 again, across a restart).

The host answers clients through the broker (`RaftHostEnv`); for the broker it also says who
leads as a Metadata answer gives it (`metadata_leader`: the image's, unless the Raft group's view
here is newer) and which leaderships the controller's image lacks (`unrecorded_leaders`, the
broker's ReportRaftLeadersRequest). It shows the ReplicaChecker
(harness.sim.checks.replicas) every leader it elects, every HW move (the records newly below it
are compared with the first committed copy, from the log start again after each restart) and
every round's HW (never back within a process).

Invariants: a core is never called while it has stages left; one envelope per peer per round;
every random draw (the cores' seeds) comes from the broker's start seed. One input into a core,
the running of its stages, the passes of a round's end, the replica's effect environment and the
recovery flush are harness/drive/raft_stages.py, shared with the asyncio runtime; what differs in
the round (its simulated fsync time, one shipment per round) is this module's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.drive.raft_stages import (
    HostedReplica,
    call_core,
    has_stages,
    recovery_flush,
    run_round,
    run_stages,
)
from harness.sim.checks.replicas import ReplicaChecker
from partition.log import PartitionLog
from partition.raft import (
    AnswerLongPolls,
    PartitionKey,
    PeerUnreachable,
    RaftEnvelope,
    RaftMessageReceived,
    RaftMux,
    RaftPartitionConfig,
    RaftPartitionInput,
    RaftPartitionLog,
    RaftReplica,
    ResignRequested,
    Stage,
    TickGrid,
    in_sync_voters,
    metadata_leader,
    unbundle,
)
from partition.replica import FetchResponse, ProduceResponse
from quorum.controller.messages import RaftLeader
from quorum.metadata.records import Partition
from quorum.raft.effects import ElectionState, LeaderChanged

# The bytes one grouped fsync is drawn for: the distribution's smallest case (512 B), the one
# nearest to a round's appends of a few small batches, as for the ISR and quorum brokers' draws.
GROUPED_FSYNC_BYTES = 512
FsyncDraw = Callable[[int], int]  # batch bytes -> simulated ms (harness.sim.actors.disk.Disk)

@dataclass(frozen=True, slots=True)
class RaftSettings:
    """A broker's settings for raft partitions: their Raft timing and produce limits, how long
    its disk takes to fsync, and the host class (tests plant bugs by replacing it)."""

    config: RaftPartitionConfig
    fsync_ms: int = 0  # every grouped fsync's time, unless measured_disk
    host_class: type[RaftHost] | None = None  # None: RaftHost
    # Each grouped fsync takes a time drawn from the broker's disk model (its seeded generator
    # and the measured distribution) instead of fsync_ms.
    measured_disk: bool = False

    def host(self, env: RaftHostEnv, checker: ReplicaChecker,
             draw_fsync_ms: FsyncDraw | None = None) -> RaftHost:
        """The host of `env`'s raft partitions; `draw_fsync_ms` is the broker disk's draw, used
        when `measured_disk` (it must be given then)."""
        if self.measured_disk and draw_fsync_ms is None:
            raise ValueError("raft settings on a measured disk need the broker disk's draw")
        draw = draw_fsync_ms if self.measured_disk else None
        return (self.host_class or RaftHost)(env, self.config, checker, self.fsync_ms, draw)


class RaftHostEnv(Protocol):
    """What the host needs from its broker."""

    node_id: int

    def send(self, to: int, message: Any) -> None:
        """Onto the broker's outbox."""

    def complete_produce(self, response: ProduceResponse) -> None: ...

    def send_fetch_response(self, to: int, response: FetchResponse) -> None: ...


@dataclass(eq=False)
class HostedPartition(HostedReplica):
    """One raft partition replica on this broker, and its effect environments
    (harness.drive.effects.EffectEnv, partition.raft.PartitionEffectEnv; what both drivers share
    is harness.drive.raft_stages.HostedReplica)."""

    host: RaftHost
    key: PartitionKey
    store: RaftPartitionLog
    core: RaftReplica
    stages: list[Stage] = field(default_factory=list)
    needs_flush: bool = False
    persist: ElectionState | None = None  # a stage's election state, durable after its fsync
    queued: deque[RaftPartitionInput | None] = field(default_factory=deque)
    checked_up_to: int = 0  # the checker compared this process's commits up to here
    hw_seen: int = 0  # its HW at the end of the last round (0 in a new process)

    @property
    def plog(self) -> PartitionLog:
        return self.store.log

    @property
    def has_stages(self) -> bool:
        return has_stages(self)

    # -- harness.drive.effects.EffectEnv
    def send(self, to: int, message: Any) -> None:
        self.host.mux.add(to, self.key, message)

    def persist_election_state(self, state: ElectionState) -> None:
        self.store.persist_election_state(state)  # durable (tmp, fsync, rename) when it returns

    def on_commit_advanced(self, high_watermark: int) -> None:
        super().on_commit_advanced(high_watermark)
        self.host.committed(self, high_watermark)

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.host.leader_changed(self, effect)

    # -- partition.raft.PartitionEffectEnv
    def complete_produce(self, response: ProduceResponse) -> None:
        self.host.env.complete_produce(response)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.host.env.send_fetch_response(-1, response)


class RaftHost:
    """Every raft partition replica of one broker process (see the module docstring)."""

    def __init__(self, env: RaftHostEnv, config: RaftPartitionConfig, checker: ReplicaChecker,
                 fsync_ms: int = 0, draw_fsync_ms: FsyncDraw | None = None) -> None:
        self.env = env
        self.node_id = env.node_id
        self.config = config
        self.checker = checker
        self.fsync_ms = fsync_ms
        self.draw_fsync_ms = draw_fsync_ms  # None: every grouped fsync takes fsync_ms
        self.mux = RaftMux(env.node_id)
        self.grid: TickGrid[PartitionKey] = TickGrid(1)
        self.replicas: dict[PartitionKey, HostedPartition] = {}
        self._touched: dict[PartitionKey, HostedPartition] = {}
        self._timer_round = False
        self.fsync_done_ms: int | None = None  # a grouped fsync in flight completes then
        self._flushing: list[HostedPartition] = []
        self._synchronous = False  # shutting down: fsyncs complete within the round
        self.became_leader = False  # since the broker last asked (its report to the controller)
        self.fsync_rounds = 0
        self.log_fsyncs = 0

    # -- hosting -----------------------------------------------------------------------------------

    def add(self, key: PartitionKey, voters: tuple[int, ...], plog: PartitionLog, seed: int,
            now_ms: int, topic: str = "") -> HostedPartition:
        """Host a replica of `key` (its voters: the partition's replicas) on `plog`, after the
        recovery flush (module docstring)."""
        self.recovery_flush(plog)
        store = RaftPartitionLog(plog)
        core = RaftReplica(self.node_id, key[0], key[1], voters, store, seed=seed, now_ms=now_ms,
                           config=self.config, election_state=store.election_state(),
                           topic=topic)
        r = HostedPartition(self, key, store, core, checked_up_to=plog.log_start_offset)
        self.replicas[key] = r
        self.checker.raft_epoch(self.node_id, key, core.leader_epoch)
        self.grid.set(key, core.next_deadline_ms(), now_ms)
        return r

    def recovery_flush(self, plog: PartitionLog) -> None:
        """What the log holds is durable from now on (harness.drive.raft_stages.recovery_flush,
        the runtime's own; a method so that a planted bug can leave it out)."""
        recovery_flush(plog)

    # -- leadership, as the rest of the cluster sees it ---------------------------------------------

    def metadata_leader(self, part: Partition) -> int:
        """The leader of `part` a Metadata answer gives (partition.raft.metadata_leader, as the
        runtime's): the image's, unless this broker's replica knows a newer Raft epoch with a
        leader (or the same epoch, where the image names none)."""
        r = self.replicas.get((part.topic_id, part.partition))
        if r is None:
            return part.leader
        core = r.core
        return metadata_leader(part.leader, part.leader_epoch, core.leader_id, core.leader_epoch)[0]

    def unrecorded_leaders(self, part: Partition | None, now_ms: int) -> tuple[RaftLeader, ...]:
        """The partitions led here whose leader, epoch or in-sync voters (partition.raft.
        in_sync_voters, as the runtime reports them) the image `part` lacks."""
        out: list[RaftLeader] = []
        for key, r in self.replicas.items():
            if not r.core.is_leader:
                continue
            timeout_ms = r.core.config.raft.fetch_timeout_ms
            isr = tuple(in_sync_voters(r.core.status(), now_ms, timeout_ms))
            epoch = r.core.leader_epoch
            shown = (None if part is None or (part.topic_id, part.partition) != key
                     else (part.leader, part.leader_epoch, part.isr))
            if shown != (self.node_id, epoch, isr):
                out.append(RaftLeader(key[0], key[1], epoch, isr))
        return tuple(out)

    # -- inputs ------------------------------------------------------------------------------------

    def input(self, key: PartitionKey, message: RaftPartitionInput | None, now_ms: int) -> bool:
        """`message` (None: a tick) for partition `key`; False if it is not hosted here."""
        r = self.replicas.get(key)
        if r is None:
            return False
        if not r.has_stages and not r.queued:  # rule 1, and inputs in arrival order
            self._call(r, message, now_ms)
        else:
            r.queued.append(message)
            self._touched[key] = r
        return True

    def on_envelope(self, envelope: RaftEnvelope, now_ms: int) -> None:
        """A peer's round of Raft messages; items of partitions not hosted here are dropped (the
        sender retries on its own timers)."""
        for key, src, message in unbundle(envelope, self.node_id):
            self.input(key, RaftMessageReceived(src, message), now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        """A connection to `peer` was refused: every partition it votes in hears it."""
        for key, r in list(self.replicas.items()):
            if peer in r.core.voters:
                self.input(key, PeerUnreachable(peer), now_ms)

    def tick(self, now_ms: int) -> None:
        """The broker's timer: a grouped fsync that completed, then the cores that are due."""
        if self.fsync_done_ms is not None and now_ms >= self.fsync_done_ms:
            self._complete_fsync(now_ms)
        due = self.grid.pop_due(now_ms)
        for key in due:
            self.input(key, None, now_ms)
        self._timer_round = self._timer_round or bool(due)

    def _complete_fsync(self, now_ms: int) -> None:
        flushing, self._flushing = self._flushing, []
        self.fsync_done_ms = None
        self.make_durable(flushing)
        for r in flushing:
            self._advance(r, now_ms)

    def shutdown(self, now_ms: int) -> None:
        """Controlled shutdown: every partition led here hands over (EndQuorumEpoch), and every
        stage runs now (the process waits for its fsyncs before it exits)."""
        if self.fsync_done_ms is not None:
            self._complete_fsync(now_ms)
        for key, r in list(self.replicas.items()):
            if r.core.is_leader:
                self.input(key, ResignRequested(), now_ms)
        self._synchronous = True
        self.end_round(now_ms)

    def next_deadline_ms(self) -> int | None:
        ticks = [t for t in (self.grid.next_tick_ms(), self.fsync_done_ms) if t is not None]
        return min(ticks) if ticks else None

    # -- running cores -----------------------------------------------------------------------------

    def _call(self, r: HostedPartition, message: RaftPartitionInput | None, now_ms: int) -> None:
        call_core(r, message, now_ms)  # raises if the core has stages left (rule 1)
        self._advance(r, now_ms)
        self._touched[r.key] = r

    def _advance(self, r: HostedPartition, now_ms: int) -> None:
        # A stage's election state is written as soon as its log's fsync is done (module
        # docstring, 2.), to the partition's own file: no grouping across partitions here.
        run_stages(r, r.store.persist_election_state)
        self._touched[r.key] = r

    def make_durable(self, partitions: list[HostedPartition]) -> None:
        """The grouped fsync: every log a stage left dirty, once."""
        if partitions:
            self.fsync_rounds += 1
        for r in partitions:
            r.store.flush()
            r.needs_flush = False
            self.log_fsyncs += 1

    def end_round(self, now_ms: int) -> None:
        """Phase merging, queued inputs, the grouped fsync, the envelopes, the timers."""
        if not self._touched and not self._timer_round:
            return  # nothing ran this round (an fsync in flight, a report timer)
        if self._timer_round:
            self._timer_round = False
            self._merge_phases(now_ms)
        run_round(self._touched, lambda r: self._feed(r, now_ms),
                  lambda dirty: self._start_grouped_fsync(dirty, now_ms),
                  lambda r: self._advance(r, now_ms))  # fmt: skip
        for envelope in self.mux.drain():
            self.env.send(envelope.dst, envelope)
        touched, self._touched = self._touched, {}
        for key, r in touched.items():
            if key in self.replicas:
                # A busy core is called again once its stages ran (its queue), not by its timer.
                busy = r.has_stages or r.queued
                self.grid.set(key, None if busy else r.core.next_deadline_ms(), now_ms)
                self._check_round(r)

    def _feed(self, r: HostedPartition, now_ms: int) -> None:
        while r.queued and not r.has_stages:
            self._call(r, r.queued.popleft(), now_ms)

    def _start_grouped_fsync(self, dirty: list[HostedPartition], now_ms: int) -> bool:
        """The round's grouped fsync of `dirty`: done on return (True), or in flight until
        `fsync_done_ms` (False), as is one already in flight (what it does not cover waits)."""
        if self.fsync_done_ms is not None:
            return False
        took_ms = 0 if self._synchronous else self._grouped_fsync_ms()
        if took_ms > 0:
            self._flushing = dirty
            self.fsync_done_ms = now_ms + took_ms
            return False
        self.make_durable(dirty)
        return True

    def _grouped_fsync_ms(self) -> int:
        """How long this round's grouped fsync takes: a draw per fsync on a measured disk."""
        if self.draw_fsync_ms is not None:
            return self.draw_fsync_ms(GROUPED_FSYNC_BYTES)
        return self.fsync_ms

    def _merge_phases(self, now_ms: int) -> None:
        """After a timer round whose envelope to a follower answers a long poll: answer that follower's other parked
        fetches due within the poll wait now (partition/raft/mux.py)."""
        due_by = now_ms + self.config.raft.fetch_max_wait_ms
        for peer in self.mux.fetch_answers_to():
            for key, r in list(self.replicas.items()):
                if r.core.is_leader and peer in r.core.voters:
                    self.input(key, AnswerLongPolls(peer, due_by), now_ms)

    # -- what the checker sees ---------------------------------------------------------------------

    def committed(self, r: HostedPartition, high_watermark: int) -> None:
        if high_watermark > r.checked_up_to:
            self.checker.on_high_watermark(self._view(r), r.checked_up_to, high_watermark)
            r.checked_up_to = high_watermark
        if r.core.is_leader:
            self.checker.raft_commit_bound(self.node_id, high_watermark, r.core.status())

    def leader_changed(self, r: HostedPartition, effect: LeaderChanged) -> None:
        self.checker.raft_epoch(self.node_id, r.key, effect.epoch)
        if effect.is_self:
            self.checker.raft_leader(r.key, effect.epoch, self.node_id)
            self.became_leader = True

    def _check_round(self, r: HostedPartition) -> None:
        hw = r.core.high_watermark
        if hw < r.hw_seen:
            self.checker.violation("hw-regressed", f"broker {self.node_id} {r.key}: HW "
                                   f"{r.hw_seen} -> {hw}")
        r.hw_seen = hw

    def _view(self, r: HostedPartition) -> _ReplicaView:
        return _ReplicaView(self.node_id, True, r.plog, None)


@dataclass(slots=True)
class _ReplicaView:
    """A raft replica as the ReplicaChecker reads it (harness.sim.checks.replicas.HostedReplica:
    no ReplicaCore, so the ISR-mode HW bound is not applied; raft_commit_bound is)."""

    node_id: int
    up: bool
    log: PartitionLog | None
    core: Any

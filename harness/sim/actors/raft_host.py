"""A simulated broker's raft partitions (`replication.mode=raft`): the ports of the one
raft-partition host (harness/drive/raft_host.py, which owns the round) on the simulator, and the
views the broker and the checker take of it. tests/raftpart/router.py runs the same host on these
ports too.

`SimRaftPorts`, one per broker process:
- the clock: the virtual time the broker actor is at (`at(now_ms)` before it calls the host); a
  *round* is one input of the broker actor (a message, its timer, a refused connection), so
  the actor ends it itself (`end_round`) and `end_round_soon` does nothing; the host's timer is
  one of the broker's deadlines (`next_deadline_ms`), on a grid of 1 ms;
- the durability: every log a pass left dirty is fsynced once (`make_durable`), and that takes
  simulated time: on a measured disk (`RaftSettings.measured_disk`) a time drawn for each
  grouped fsync from the broker's seeded disk (harness.sim.actors.disk.Disk.fsync_ms, as the
  ISR and quorum brokers draw theirs), otherwise the fixed `fsync_ms`. The next stages run when
  it completes (`tick`), and what arrives meanwhile waits. With a fixed fsync_ms = 0 it
  completes within the round. A partition's election state is its own quorum-state file,
  written (tmp, fsync, rename) right after the log's fsync before it, in no simulated time. A
  power loss while an fsync is in flight loses what it was flushing (SimStorage.crash), and
  nothing after the cut was acted on (rule 3: no fetch reported it, no client was answered).
  Recovery flush: a replica is (re)built on a log that may hold appends its killed process
  never fsynced (SIGKILL keeps the page cache); they are fsynced before the core reads them
  (harness.drive.raft_stages.recovery_flush), or its first fetches would report records a later
  power loss can still take away;
- the outbox: every Raft message of the round leaves in ONE envelope per peer, on the broker's
  outbox; client answers through the broker (`RaftHostEnv`);
- the observer: the ReplicaChecker (harness.sim.checks.replicas) sees every leader elected,
  every HW move (the records newly below it are compared with the first committed copy, from
  the log start again after each restart) and every round's HW (never back within a process).

Planted bugs replace these ports (`RaftSettings.ports_class`: a flush that never happens, no
recovery flush; tests/sim/planted.py), never the host.

For the broker: who leads as a Metadata answer gives it (`metadata_leader`: the image's, unless
the Raft group's view here is newer) and which leaderships the controller's image lacks
(`unrecorded_leaders`, the broker's ReportRaftLeadersRequest).

Invariants: every random draw (the cores' seeds, the fsync times) comes from the broker's start
seed; the host never sees a time before the last it saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.drive.raft_host import HostedRaft, RaftObserver, RaftPartitionHost
from harness.drive.raft_stages import recovery_flush
from harness.sim.checks.replicas import ReplicaChecker
from partition.log import PartitionLog
from partition.raft import (
    PartitionKey,
    RaftEnvelope,
    RaftLogStore,
    RaftPartitionConfig,
    in_sync_voters,
    metadata_leader,
)
from partition.replica import FetchResponse, ProduceResponse
from quorum.controller.messages import RaftLeader
from quorum.metadata.records import Partition
from quorum.raft.effects import ElectionState, LeaderChanged

# The bytes one grouped fsync is drawn for: the distribution's smallest case (512 B), the one
# nearest to a round's appends of a few small batches, as for the ISR and quorum brokers' draws.
GROUPED_FSYNC_BYTES = 512
FsyncDraw = Callable[[int], int]  # batch bytes -> simulated ms (harness.sim.actors.disk.Disk)


class RaftHostEnv(Protocol):
    """What the ports need from their broker."""

    node_id: int

    def send(self, to: int, message: Any) -> None:
        """Onto the broker's outbox."""

    def complete_produce(self, response: ProduceResponse) -> None: ...

    def send_fetch_response(self, to: int, response: FetchResponse) -> None: ...


class SimRaftPorts(RaftObserver):
    """The simulator's clock, durability, outbox and observer ports of one broker process's
    raft-partition host (module docstring)."""

    groups_election_states = False  # each partition's own quorum-state file
    ships_per_pass = False  # one envelope per peer per round

    def __init__(self, env: RaftHostEnv, checker: ReplicaChecker | None, fsync_ms: int = 0,
                 draw_fsync_ms: FsyncDraw | None = None) -> None:  # fmt: skip
        self.env = env
        self.node_id = env.node_id
        self.checker = checker
        self.fsync_ms = fsync_ms
        self.draw_fsync_ms = draw_fsync_ms  # None: every grouped fsync takes fsync_ms
        self.host: RaftPartitionHost | None = None
        self.now = 0
        self.timer_at: int | None = None
        self.fsync_done_ms: int | None = None  # a grouped fsync in flight completes then
        self._flushing: list[HostedRaft] = []
        self.synchronous = False  # shutting down: fsyncs complete within the round
        self.became_leader = False  # since the broker last asked (its report to the controller)
        self.checked_up_to: dict[PartitionKey, int] = {}  # the checker compared commits to here
        self.hw_seen: dict[PartitionKey, int] = {}  # HW at the end of the last round

    def bind(self, host: RaftPartitionHost) -> RaftPartitionHost:
        self.host = host
        return host

    # -- driving the host, from the broker actor ---------------------------------------------------

    def at(self, now_ms: int) -> RaftPartitionHost:
        """The host, its clock at `now_ms` (the broker actor's time)."""
        assert self.host is not None
        self.now = max(self.now, now_ms)
        return self.host

    def tick(self, now_ms: int) -> None:
        """The broker's timer: a grouped fsync that completed, then the cores that are due."""
        host = self.at(now_ms)
        if self.fsync_done_ms is not None and self.now >= self.fsync_done_ms:
            self._complete_fsync()
        host.on_timer(self.now)

    def shutdown(self, now_ms: int) -> None:
        """Controlled shutdown: every partition led here hands over (EndQuorumEpoch), and every
        stage runs now (the process waits for its fsyncs before it exits)."""
        host = self.at(now_ms)
        if self.fsync_done_ms is not None:
            self._complete_fsync()
        host.resign_all()
        self.synchronous = True
        host.end_round()

    def next_deadline_ms(self) -> int | None:
        ticks = [t for t in (self.timer_at, self.fsync_done_ms) if t is not None]
        return min(ticks) if ticks else None

    # -- clock --------------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.now

    def set_timer(self, at_ms: int | None) -> None:
        self.timer_at = at_ms

    def end_round_soon(self) -> None:
        pass  # the broker actor ends the round after each of its inputs

    # -- durability ----------------------------------------------------------------------------------

    def recovery_flush(self, plog: PartitionLog) -> None:
        recovery_flush(plog)

    def election_state(self, key: PartitionKey, store: RaftLogStore) -> ElectionState | None:
        return store.election_state()

    def write_election_state(self, r: HostedRaft, state: ElectionState) -> None:
        r.store.persist_election_state(state)  # durable (tmp, fsync, rename) when it returns

    def make_durable(self, logs: list[HostedRaft], states: list[HostedRaft]) -> bool:
        took_ms = 0 if self.synchronous or not logs else self._grouped_fsync_ms()
        if took_ms > 0:
            self._flushing = logs
            self.fsync_done_ms = self.now + took_ms
            return False
        self.flush_logs(logs)
        return True

    def flush_logs(self, logs: list[HostedRaft]) -> None:
        """The grouped fsync itself: every log once."""
        for r in logs:
            r.store.flush()

    def forget(self, key: PartitionKey) -> None:
        pass  # the election state is in the partition's directory

    def close(self) -> None:
        pass

    def _grouped_fsync_ms(self) -> int:
        """How long this round's grouped fsync takes: a draw per fsync on a measured disk."""
        if self.draw_fsync_ms is not None:
            return self.draw_fsync_ms(GROUPED_FSYNC_BYTES)
        return self.fsync_ms

    def _complete_fsync(self) -> None:
        flushing, self._flushing = self._flushing, []
        self.fsync_done_ms = None
        self.flush_logs(flushing)
        assert self.host is not None
        self.host.durable()

    # -- outbox ---------------------------------------------------------------------------------------

    def ship(self, envelope: RaftEnvelope) -> None:
        self.env.send(envelope.dst, envelope)

    def complete_produce(self, response: ProduceResponse) -> None:
        self.env.complete_produce(response)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.env.send_fetch_response(-1, response)

    # -- observer: what the checker sees ------------------------------------------------------------

    def on_hosted(self, r: HostedRaft) -> None:
        self.checked_up_to[r.key] = r.plog.log_start_offset
        self.hw_seen[r.key] = 0  # a new process
        if self.checker is not None:
            self.checker.raft_epoch(self.node_id, r.key, r.core.leader_epoch)

    def on_commit(self, r: HostedRaft, high_watermark: int) -> None:
        checker = self.checker
        if checker is None:
            return
        checked = self.checked_up_to.get(r.key, 0)
        if high_watermark > checked:
            checker.on_high_watermark(_ReplicaView(self.node_id, True, r.plog, None), checked,
                                      high_watermark)  # fmt: skip
            self.checked_up_to[r.key] = high_watermark
        if r.core.is_leader:
            checker.raft_commit_bound(self.node_id, high_watermark, r.core.status())

    def on_leader_changed(self, r: HostedRaft, effect: LeaderChanged) -> None:
        if self.checker is not None:
            self.checker.raft_epoch(self.node_id, r.key, effect.epoch)
        if effect.is_self:
            if self.checker is not None:
                self.checker.raft_leader(r.key, effect.epoch, self.node_id)
            self.became_leader = True

    def after_round(self, replicas: list[HostedRaft]) -> None:
        for r in replicas:
            hw, seen = r.core.high_watermark, self.hw_seen.get(r.key, 0)
            if hw < seen and self.checker is not None:
                self.checker.violation("hw-regressed", f"broker {self.node_id} {r.key}: HW "
                                       f"{seen} -> {hw}")  # fmt: skip
            self.hw_seen[r.key] = hw


@dataclass(slots=True)
class _ReplicaView:
    """A raft replica as the ReplicaChecker reads it (harness.sim.checks.replicas.HostedReplica:
    no ReplicaCore, so the ISR-mode HW bound is not applied; raft_commit_bound is)."""

    node_id: int
    up: bool
    log: PartitionLog | None
    core: Any


@dataclass(frozen=True, slots=True)
class RaftSettings:
    """A broker's settings for raft partitions: their Raft timing and produce limits, how long
    its disk takes to fsync, and the ports class (tests plant bugs by replacing it)."""

    config: RaftPartitionConfig
    fsync_ms: int = 0  # every grouped fsync's time, unless measured_disk
    ports_class: type[SimRaftPorts] | None = None  # None: SimRaftPorts
    # Each grouped fsync takes a time drawn from the broker's disk model (its seeded generator
    # and the measured distribution) instead of fsync_ms.
    measured_disk: bool = False

    def host(self, env: RaftHostEnv, checker: ReplicaChecker,
             draw_fsync_ms: FsyncDraw | None = None) -> tuple[RaftPartitionHost, SimRaftPorts]:
        """The host of `env`'s raft partitions and its ports; `draw_fsync_ms` is the broker
        disk's draw, used when `measured_disk` (it must be given then)."""
        if self.measured_disk and draw_fsync_ms is None:
            raise ValueError("raft settings on a measured disk need the broker disk's draw")
        draw = draw_fsync_ms if self.measured_disk else None
        ports = (self.ports_class or SimRaftPorts)(env, checker, self.fsync_ms, draw)
        return ports.bind(RaftPartitionHost(env.node_id, ports, ports, ports, ports)), ports


# -- leadership, as the rest of the cluster sees it ----------------------------------------------


def metadata_leader_of(host: RaftPartitionHost, part: Partition) -> int:
    """The leader of `part` a Metadata answer gives (partition.raft.metadata_leader, as the
    runtime's): the image's, unless this broker's replica knows a newer Raft epoch with a
    leader (or the same epoch, where the image names none)."""
    known = host.leader_of((part.topic_id, part.partition))
    if known is None:
        return part.leader
    return metadata_leader(part.leader, part.leader_epoch, *known)[0]


def unrecorded_leaders(host: RaftPartitionHost, part: Partition | None,
                       now_ms: int) -> tuple[RaftLeader, ...]:  # fmt: skip
    """The partitions led here whose leader, epoch or in-sync voters (partition.raft.
    in_sync_voters, as the runtime reports them) the image `part` lacks."""
    out: list[RaftLeader] = []
    for key, r in host.replicas.items():
        if not r.core.is_leader:
            continue
        timeout_ms = r.core.config.raft.fetch_timeout_ms
        isr = tuple(in_sync_voters(r.core.status(), now_ms, timeout_ms))
        epoch = r.core.leader_epoch
        shown = (None if part is None or (part.topic_id, part.partition) != key
                 else (part.leader, part.leader_epoch, part.isr))  # fmt: skip
        if shown != (host.node_id, epoch, isr):
            out.append(RaftLeader(key[0], key[1], epoch, isr))
    return tuple(out)

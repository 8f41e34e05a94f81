"""The data-plane runs' cluster: a World (harness.sim.runs.world) holding the metadata side, the
brokers and the clients, plus what those runs share: the committed image, the controller a
broker talks to, the topic, the checks, and the final drain.

The metadata side is either the abstract controller (`voters=0`,
harness.sim.actors.abstract_controller: one ControllerService committing after a fixed delay) or
a Raft quorum of `voters` controllers: RaftNodes (ids VOTER_BASE+1..) hosting the
ActiveController and MetadataPublisher parts (harness.sim.actors.controller, publisher), the
real Raft core on a RaftLogStore over simulated storage with the election-state file. Voters
crash with power-loss semantics (the Raft log is fsynced on append, so the quorum loses nothing
acknowledged); no metadata snapshots are taken.

A raft-mode run (`raft=RaftSettings`, topics created with replication.mode=raft): each broker
hosts its replica of the partition's Raft group (harness.sim.actors.raft_host); the controllers
only assign the replicas and record the leaders the group elects, as the brokers report them.
The data partition's leader is then the Raft group's (`raft_leader`), which is what the nemesis
targets and the final drain reads.

Brokers (harness.sim.actors.broker) send their controller requests to the voter they believe
leads, learnt like a KRaft observer: the highest-epoch leader named by a voter they can reach,
else the last one they used (`controller_for`). Brokers are not Raft observers here: metadata
reaches them as pushes (harness.sim.actors.controller), so a broker cut off from the active
controller keeps its stale view.

Checked after every voter event (a failure raises SafetyViolation, which stops the run): Raft
safety (harness.sim.checks.invariants) and the image invariants (harness.sim.checks.invariants) on
every voter's image; the replicas' invariants as they change (harness.sim.checks.replicas).

Determinism: the network and restart seeds draw from one generator seeded from the seed, the Raft
timing from another, crash losses from a third, each broker's fsync times (`flush_policy`, the
disk model of harness.sim.actors.disk) from its own generator seeded from a fourth; events run in
the World's order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.drive.broker_session import BrokerTiming
from harness.sim.actors.abstract_controller import CONTROLLER_ID, AbstractController
from harness.sim.actors.broker import Broker
from harness.sim.actors.clients import TP, Client, History
from harness.sim.actors.controller import TOPIC, ActiveController, MetadataPublisher, partition_view
from harness.sim.actors.disk import Disk
from harness.sim.actors.raft_host import RaftSettings
from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import PartitionImageChecker, SafetyChecker, read_range
from harness.sim.checks.replicas import ReplicaChecker, decode_values, replica_divergence
from harness.sim.kernel.network import QUIET
from harness.sim.runs.world import World
from partition.log import LogConfig
from partition.raft import RaftPartitionConfig, data_partition_raft_config
from partition.replica import ReplicaConfig
from quorum.controller import ControllerConfig
from quorum.metadata.configs import REPLICATION_MODE_RAFT
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Partition
from quorum.raft.config import RaftConfig

VOTER_BASE = 900
# The voters' Raft log with every batch indexed: its entries are ~100-byte batches, and the
# per-commit reads (applying, the SafetyChecker, the committed image) would otherwise walk up
# to index.interval.bytes (4 KiB) of headers each; that walk was ~14% of a matrix run.
INDEXED_LOG = LogConfig(index_interval_bytes=0)


@dataclass(frozen=True, slots=True)
class DataTiming:
    """Kafka's timeouts scaled to simulated seconds (ratios kept: session = 5 x heartbeat)."""

    heartbeat_interval_ms: int = 200
    session_timeout_ms: int = 1000
    replica_lag_time_max_ms: int = 2000
    replica_fetch_wait_max_ms: int = 200
    request_timeout_ms: int = 1000

    def broker_timing(self) -> BrokerTiming:
        """The broker session's: a heartbeat not answered within one interval is sent again
        (so one lost heartbeat does not cost the session), fast heartbeats while fenced."""
        return BrokerTiming(
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            request_timeout_ms=self.heartbeat_interval_ms,
            fast_heartbeat_ms=self.heartbeat_interval_ms // 4,
            retry_backoff_ms=self.heartbeat_interval_ms // 4,
            duplicate_backoff_ms=self.heartbeat_interval_ms,
        )


def draw_raft_timing(rng: random.Random, base: RaftConfig,
                     election_timeout_ms: int | None = None) -> RaftConfig:  # fmt: skip
    """`base` with Raft timing scaled like the data plane's (broker.session.timeout.ms 1000), drawn the
    same way for the controllers and the data partitions: an election timeout, the fetch timeout
    a multiple of it, the fetch wait. `election_timeout_ms` (a trade-off curve's setting)
    replaces the drawn election timeout and the timeouts scaled from it; the draws stay the
    same."""
    drawn_ms = rng.choice((100, 150, 250))
    election_timeout_ms = election_timeout_ms or drawn_ms
    return replace(
        base,
        election_timeout_ms=election_timeout_ms,
        election_backoff_max_ms=election_timeout_ms,
        fetch_timeout_ms=election_timeout_ms * rng.choice((2, 3)),
        request_timeout_ms=election_timeout_ms,
        retry_backoff_ms=20,
        fetch_max_wait_ms=rng.choice((50, 100)),
    )


def draw_quorum_raft_config(rng: random.Random) -> RaftConfig:
    """The controllers' Raft timing (draw_raft_timing): a controller failover takes a few
    hundred simulated ms. Snapshots are never taken (no take_snapshot calls)."""
    return draw_raft_timing(rng, RaftConfig(max_idle_interval_ms=200, append_linger_ms=0,
                                            pre_vote=True, fast_pre_vote_on_unreachable=True,
                                            flush_on_append=True))  # fmt: skip


class WorldClock:
    """The world as the brokers' disk model sees it (harness.sim.actors.broker.DiskClock)."""

    def __init__(self, world: World) -> None:
        self.world = world

    def call_at(self, at_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.world.queue.call_at(at_ms, fn, *args)

    def after(self, actor: Any) -> None:
        self.world.after(actor)


# A raft partition's fsync, in simulated ms (the grouped fsync of a round: raft_host.py); drawn.
FSYNC_MS = (0, 1, 2, 5)


def draw_raft_settings(rng: random.Random,
                       election_timeout_ms: int | None = None) -> RaftSettings:
    """Raft timing of the data partitions drawn as the controllers' (draw_raft_timing, with
    `election_timeout_ms` if given) with the data-partition defaults (no idle no-op, no linger),
    and the disk's fsync time."""
    config = draw_raft_timing(rng, data_partition_raft_config(), election_timeout_ms)
    return RaftSettings(RaftPartitionConfig(config), fsync_ms=rng.choice(FSYNC_MS))


def raft_settings_for(seed: int, election_timeout_ms: int | None = None) -> RaftSettings:
    """The drawn raft-partition settings of `seed` (their own generator: the other draws of the
    run are those of the other modes), with `election_timeout_ms` if given."""
    return draw_raft_settings(random.Random(seed * 7001 + 5), election_timeout_ms)


def data_plane_configs(timing: DataTiming, min_insync_replicas: int, replication_mode: str, *,
                       leader_epoch_enable: bool = True,
                       eligible_leader_replicas: bool = False) -> tuple[ReplicaConfig, ControllerConfig]:  # fmt: skip
    """The brokers' ReplicaCore settings and the controller's settings of a data-plane run on
    `timing`. A raft partition runs no ReplicaCore: its brokers' ReplicaCore settings go unused
    (they say "isr")."""
    replica_config = ReplicaConfig(
        replica_lag_time_max_ms=timing.replica_lag_time_max_ms,
        min_insync_replicas=min_insync_replicas,
        replication_mode="isr" if replication_mode == REPLICATION_MODE_RAFT else replication_mode,
        leader_epoch_enable=leader_epoch_enable,
        replica_fetch_wait_max_ms=timing.replica_fetch_wait_max_ms,
        replica_fetch_backoff_ms=100,
        replica_socket_timeout_ms=timing.request_timeout_ms,
        alter_partition_timeout_ms=timing.request_timeout_ms,
    )
    controller_config = ControllerConfig(
        broker_heartbeat_interval_ms=timing.heartbeat_interval_ms,
        broker_session_timeout_ms=timing.session_timeout_ms,
        eligible_leader_replicas_enable=eligible_leader_replicas,
        auto_leader_rebalance_enable=False,
    )
    return replica_config, controller_config


class Cluster:
    """Controllers, brokers and clients of one data-plane run, on one World."""

    node_class: type[RaftNode] = RaftNode  # the voters' (tests plant bugs by replacing it)

    def __init__(
        self,
        seed: int,
        brokers: int,
        replica_config: ReplicaConfig,
        controller_config: ControllerConfig,
        timing: DataTiming,
        voters: int = 0,
        raft_config: RaftConfig | None = None,
        raft: RaftSettings | None = None,
        flush_policy: str | None = None,
    ) -> None:
        self.seed = seed
        self.timing = timing
        self.replica_config = replica_config
        self.raft = raft
        self.world = world = World(random.Random(seed * 7919 + 1), QUIET)
        crash_seeds = random.Random(seed * 31 + 7)
        # With a disk model a power loss drops exactly what was not fsynced (nothing kept at
        # random); without, a random prefix of the unsynced bytes survives.
        world.crash_rng = ((lambda: None) if flush_policy is not None
                           else lambda: random.Random(crash_seeds.getrandbits(32)))
        disk_seeds = random.Random(seed * 8191 + 5)
        world.partition_leader_of = self.partition_leader
        self.checker = SafetyChecker()
        self.image_checker = PartitionImageChecker(self.checker)
        self.replicas = ReplicaChecker(replica_config, world.queue, raft_mode=raft is not None)
        self.truth = MetadataImage()  # the committed log as far as any voter applied it
        self.stats = {"controller_epochs": 0}
        self.believed: dict[int, int] = {}  # broker -> the voter it sends to
        self.voters: dict[int, RaftNode] = {}
        self.controllers: dict[int, ActiveController] = {}
        self.abstract: AbstractController | None = None
        self._next_request_id = 0
        broker_ids = tuple(range(1, brokers + 1))
        if voters:
            self.raft_config = raft_config or draw_quorum_raft_config(
                random.Random(seed * 6007 + 3)
            )
            self._add_voters(voters, controller_config, broker_ids)
            world.after_hooks.append(self._after_voter)
        else:
            self.abstract = AbstractController(controller_config, broker_ids, self._changed)
            world.add(self.abstract, "controller")
        self.brokers: dict[int, Broker] = {}
        for b in broker_ids:
            disk = Disk(flush_policy, random.Random(disk_seeds.getrandbits(32)))
            self.brokers[b] = Broker(b, replica_config, timing.broker_timing(), self.replicas,
                                     self.controller_for, raft, disk, WorldClock(world))
            world.add(self.brokers[b], "broker")
        for c in world.controller_ids:
            world.queue.call_at(0, world.restart, c)

    def _add_voters(
        self, voters: int, config: ControllerConfig, broker_ids: tuple[int, ...]
    ) -> None:
        voter_ids = tuple(VOTER_BASE + i for i in range(1, voters + 1))
        for v in voter_ids:
            node = self.node_class(v, voter_ids, self.raft_config, self.checker,
                                   log_config=INDEXED_LOG)
            publisher = MetadataPublisher(node, broker_ids)
            controller = ActiveController(node, config, on_heartbeat=publisher.answer_heartbeat)
            node.attach(controller)
            node.attach(publisher)
            self.voters[v], self.controllers[v] = node, controller
            self.world.add(node, "controller")

    # -- the metadata side -----------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """The committed image (the abstract controller's, or as far as any voter applied)."""
        return self.abstract.image if self.abstract is not None else self.truth

    @property
    def topic_id(self) -> str:
        topic = self.image.topic(TOPIC)
        return "" if topic is None else topic.topic_id

    def leader_id(self) -> int:
        """The committed image's leader of the partition (-1: none)."""
        topic = self.image.topic(TOPIC)
        part = None if topic is None else self.image.partition(topic.topic_id, 0)
        return part.leader if part is not None else -1

    def partition_leader(self) -> int | None:
        if self.raft is not None:
            return self.raft_leader()
        leader = self.leader_id()
        return leader if leader > 0 else None

    def raft_leader(self) -> int | None:
        """A raft partition's leader: the running broker leading the highest Raft epoch (None:
        none leads). A deposed leader that has not heard of its successor may still lead a
        lower epoch."""
        best: tuple[int, int] | None = None
        for b, broker in sorted(self.brokers.items()):
            if not broker.up or broker.raft is None:
                continue
            for r in broker.raft.replicas.values():
                if r.core.is_leader and (best is None or r.core.leader_epoch > best[0]):
                    best = (r.core.leader_epoch, b)
        return None if best is None else best[1]

    def active_controller(self) -> int | None:
        return self.world.active_controller()

    def controller_for(self, broker: int) -> int | None:
        """The controller `broker` sends to: with a Raft quorum, the highest-epoch leader named
        by a voter it can reach (a KRaft observer's leader discovery), else the last one."""
        if self.abstract is not None:
            return CONTROLLER_ID
        reach = self.world.network.can_reach
        best: tuple[int, int] | None = None
        for v, node in self.voters.items():
            if not node.up or node.paused or not reach(broker, v) or node.leader_id is None:
                continue
            if best is None or node.epoch > best[0]:
                best = (node.epoch, node.leader_id)
        if best is not None:
            self.believed[broker] = best[1]
        return self.believed.get(broker)

    def create_topic(self, request: Any) -> bool:
        """The admin client's request to the active controller; False if none could take it."""
        active = self.active_controller()
        if active is None or self.world.actors[active].paused:
            return False
        now_ms = self.world.now_ms
        if self.abstract is not None:
            taken = self.abstract.admin_request(("admin", 0), request, now_ms)
        else:
            taken = self.controllers[active].admin_request(("admin", 0), request, now_ms)
        self.world.after(self.world.actors[active])
        return taken

    def push_metadata(self) -> None:
        """The active controller pushes its view to every broker again (a script's nudge)."""
        active = self.active_controller()
        if active is None:
            return
        push = partition_view(self.world.actors[active].image)
        for b in sorted(self.brokers):
            self.world.send(active, b, push)

    def _changed(self, old: Partition | None, new: Partition) -> None:
        self.replicas.count_change(old, new)

    def _after_voter(self, actor: Any) -> None:
        """After every voter event: the image invariants, then the committed image."""
        if actor.node_id not in self.voters or not actor.up or actor.core is None:
            return
        self.controllers[actor.node_id].admin_answers.clear()
        self.image_checker.check(actor)
        self._advance_truth(actor)

    def _advance_truth(self, node: RaftNode) -> None:
        """Apply to `truth` the committed entries `node` applied beyond it (Raft safety, checked
        by the SafetyChecker, makes every voter's applied prefix the same log), reporting each
        partition change once."""
        truth = self.truth
        start = truth.applied_offset + 1
        end = node.applied_end
        if end <= start or node.store is None or node.store.start_offset > start:
            return
        epoch_before = truth.controller_epoch
        for entry in read_range(node.store, start, end):
            before = {(p.topic_id, p.partition): p for _, p in truth.all_partitions()}
            truth.apply_entry(entry)
            for _, p in truth.all_partitions():
                old = before.get((p.topic_id, p.partition))
                if old != p:
                    self._changed(old, p)
        if truth.controller_epoch != epoch_before:
            self.stats["controller_epochs"] += 1

    # -- clients (the ClientContext) --------------------------------------------------------------

    def add_client(self, client: Client, start_ms: int) -> None:
        self.world.add(client, "client")
        client.start(start_ms)
        self.world.after(client)

    def next_request_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id

    def leader_seen_by(self, client: int, rng: random.Random) -> int:
        """A Metadata request to a broker `client` reaches: that broker's view of the leader."""
        reach = self.world.network.can_reach
        candidates = [b for b, broker in sorted(self.brokers.items())
                      if broker.up and not broker.paused and broker.metadata_leader() is not None
                      and reach(client, b)]
        if not candidates:
            return -1
        leader = self.brokers[rng.choice(candidates)].metadata_leader()
        return -1 if leader is None else leader

    # -- running ----------------------------------------------------------------------------------

    def run_until(self, end_ms: int) -> None:
        """Run every event due up to `end_ms`; the clock then reads `end_ms`. A broken Raft or
        image invariant raises SafetyViolation (the run stops there)."""
        world, queue = self.world, self.world.queue
        while (at_ms := queue.peek_time_ms()) is not None and at_ms <= end_ms:
            _, event = queue.pop()
            self.checker.now_ms = at_ms
            if not world.dispatch(at_ms, event):
                raise AssertionError(f"unexpected event {event!r}")
        queue.advance_to(end_ms)

    def final_drain(self, history: History, process: int) -> bool:
        """After the heal: read the leader's log below its HW from the beginning (final poll);
        False when no live broker leads (the partition is unavailable)."""
        led = self.leader_and_high_watermark()
        if led is None:
            return False
        broker, hw = led
        log = broker.log
        assert log is not None
        rows = [row for row in decode_values(log.read(log.log_start_offset, 1 << 26,
                                                      max_offset=hw))
                if row[0] < hw] if hw > log.log_start_offset else []
        now_ms = self.world.now_ms
        history.add(now_ms, process, "invoke", "poll", [TP], final=True)
        history.add(now_ms, process, "ok", "poll", {TP: rows}, final=True)
        return True

    def leader_and_high_watermark(self) -> tuple[Broker, int] | None:
        """The live broker leading the partition (the committed image's leader, or the Raft
        group's) and its HW; None if none leads."""
        if self.raft is not None:
            leader = self.raft_leader()
            raft = None if leader is None else self.brokers[leader].raft
            if leader is None or raft is None:
                return None
            return self.brokers[leader], max(r.core.high_watermark for r in raft.replicas.values())
        broker = self.brokers.get(self.leader_id())
        if broker is None or not broker.up or broker.core is None or not broker.core.is_leader:
            return None
        return broker, broker.core.high_watermark

    def divergence(self) -> int:
        """replica_divergence over the brokers (harness.sim.checks.replicas)."""
        return replica_divergence(b for _, b in sorted(self.brokers.items()))

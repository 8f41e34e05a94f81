"""The raft-partition host: every raft partition replica (partition/raft's RaftReplica) of one
broker process, driven the way partition/raft/effects.py says, written once against ports. The
asyncio runtime (harness/runtime/raft_partitions.py) and the simulator (harness/sim/actors/
raft_host.py, which tests/raftpart/router.py uses too) provide the ports and nothing else, as
FoundationDB and TigerBeetle run one implementation under simulation by swapping what lies
beneath it.

The ports:
- `RaftClock`: what time it is, the one timer of the host (its TickGrid's next tick: the port
  calls `on_timer` then), and when a round ends (`end_round_soon`: the port calls `end_round`
  once, after the inputs of the turn: the runtime at the end of the event-loop iteration, the
  simulator after each input of the broker actor).
- `RaftDurability`: the fsync of the logs a round's stages left dirty, done on return or later
  (`make_durable` False: the port calls `durable` when it completed; the simulator's fsync takes
  simulated time), and the election states: grouped with the round's fsync into one write for
  all partitions (`groups_election_states`, partition/raft/election_states.py, the runtime), or
  each partition's own file written as soon as the log's fsync before it is done (the
  simulator). Also the recovery flush of a log a replica is (re)built on, and where a replica's
  election state is read from.
- `RaftOutbox`: the envelopes (one RaftEnvelope per peer, partition/raft/mux.py), shipped after
  every pass of a round's end (`ships_per_pass`: the runtime, whose passes wait for real fsyncs)
  or once per round (the simulator); and the answers to clients.
- The inbox is this class's input methods: `input`, `produce`, `on_envelope`, `peer_unreachable`,
  `resign_all`, `on_timer`.
- `RaftObserver` (optional): what a checker or the leadership reports see (every core call's
  effects, commits, leader changes, the end of each round).

A round (what the clock port delimits). Per round:
1. Inputs reach a core as they arrive, unless it still has stages of an earlier call to run (or
   is running one): then they wait in its queue (rule 1: RaftCore reads its log end at the start
   of every call, and must never count an append that is not fsynced). Produce requests always
   wait for the end of the round, so that all of a partition's produce requests of the round are
   ONE call (ProducesReceived: one append, one fsync for all of them; group commit).
2. Each call's effects are cut by `flush_stages` (harness/drive/raft_stages.py); stage 0 runs at
   once, the rest after the fsync of the log and the write of the election state it asks for.
3. End of round: phase merging after a timer round (AnswerLongPolls to the partitions holding a
   long poll of a peer whose fetch answer leaves this round, partition/raft/mux.py); then, until
   nothing is left: feed every free core what waits for it (queued inputs, then the round's
   produce requests), ship the envelopes if the outbox ships per pass (rule 2: a Send depends
   only on flushes of earlier stages), make durable every log a stage left dirty, once each,
   and the election states (`RaftDurability`), then run their next stages. A replica left dirty
   while an earlier fsync is still in flight waits for it and goes into the next one, without
   needing another input. Last, the envelopes leave and the cores' timers are re-armed on the
   TickGrid (one timer for all); a core with work left is not armed (its stages or queue call
   it again).

Invariants, enforced here:
- A core is never re-entered: an input that arrives while its effects run (a client callback
  asking again) waits in its queue.
- No input reaches a core with stages left (rule 1, `call_core` raises), and a stage runs only
  after the fsync and election-state write of the stage before it.
- A replica is (re)built on a log whose content is durable (`RaftDurability.recovery_flush`).
- With a `crash` handler, an exception while driving a core goes to it (the runtime stops the
  process: a bug or a broken invariant); without one it propagates (the simulator's run fails).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from harness.drive.raft_stages import (
    HostedReplica,
    call_core,
    has_stages,
    run_stages,
    waits_for_durability,
)
from partition.log import PartitionLog
from partition.raft import (
    AnswerLongPolls,
    Effect,
    PartitionKey,
    PeerUnreachable,
    ProducesReceived,
    RaftEnvelope,
    RaftLogStore,
    RaftMessageReceived,
    RaftMux,
    RaftPartitionConfig,
    RaftPartitionInput,
    RaftReplica,
    ResignRequested,
    Stage,
    TickGrid,
    unbundle,
)
from partition.replica import FetchResponse, ProduceRequest, ProduceResponse
from quorum.raft.effects import ElectionState, LeaderChanged
from quorum.raft.messages import FetchRequest as RaftFetch
from quorum.raft.messages import FetchResponse as RaftFetchResponse


class RaftClock(Protocol):
    def now_ms(self) -> int: ...

    def set_timer(self, at_ms: int | None) -> None:
        """The host's next tick (None: none); the port calls `host.on_timer(at_ms)` then."""

    def end_round_soon(self) -> None:
        """Inputs arrived: the port calls `host.end_round()` once, after this turn's inputs."""


class RaftDurability(Protocol):
    # True: a stage's election state waits for the round's `make_durable` (one write for all
    # partitions); False: `write_election_state` right after the log's fsync before it.
    groups_election_states: bool

    def recovery_flush(self, plog: PartitionLog) -> None:
        """fsync what `plog` holds beyond its recovery point (harness.drive.raft_stages)."""

    def election_state(self, key: PartitionKey, store: RaftLogStore) -> ElectionState | None:
        """The election state a replica of `key` starts from."""

    def write_election_state(self, r: HostedRaft, state: ElectionState) -> None:
        """`r`'s election state, durable when this returns."""

    def make_durable(self, logs: list[HostedRaft], states: list[HostedRaft]) -> bool:
        """fsync every log of `logs` once, then write the election state (`persist`) of every
        replica of `states` (empty unless grouped). True: done on return; False: in flight, the
        port calls `host.durable()` once it is done."""

    def forget(self, key: PartitionKey) -> None:
        """`key`'s topic is deleted: its election state goes too."""

    def close(self) -> None:
        """The host closed: nothing more comes (threads the port started may stop)."""


class RaftOutbox(Protocol):
    ships_per_pass: bool  # envelopes leave after every pass of a round's end, else per round

    def ship(self, envelope: RaftEnvelope) -> None: ...

    def complete_produce(self, response: ProduceResponse) -> None: ...

    def answer_consumer_fetch(self, response: FetchResponse) -> None: ...


class RaftObserver:
    """What a checker or a leadership report sees of the host; every hook does nothing here."""

    def on_hosted(self, r: HostedRaft) -> None:
        pass

    def on_effects(self, r: HostedRaft, effects: list[Effect]) -> None:
        pass

    def on_commit(self, r: HostedRaft, high_watermark: int) -> None:
        pass

    def on_leader_changed(self, r: HostedRaft, effect: LeaderChanged) -> None:
        pass

    def after_round(self, replicas: list[HostedRaft]) -> None:
        """The replicas a round touched and still hosted (only a call moves a HW)."""


@dataclass(eq=False)
class HostedRaft(HostedReplica):
    """One raft partition replica on this broker: its core, its log, what waits for it, and its
    effect environments (harness.drive.effects.EffectEnv, partition.raft.PartitionEffectEnv)."""

    host: RaftPartitionHost
    key: PartitionKey
    topic: str
    store: RaftLogStore
    core: RaftReplica
    stages: list[Stage] = field(default_factory=list)
    needs_flush: bool = False
    persist: ElectionState | None = None  # durable before the next stage
    busy: bool = False  # its effects are running
    queued: deque[RaftPartitionInput | None] = field(default_factory=deque)
    produces: list[ProduceRequest] = field(default_factory=list)
    # Peers whose Fetch this replica holds unanswered (a long poll): marked when a Fetch is fed,
    # cleared by any Fetch answer sent to that peer. Phase merging asks only these.
    parked: set[int] = field(default_factory=set)
    config_overrides: dict[str, str] = field(default_factory=dict)  # the driver's, last applied

    @property
    def topic_id(self) -> str:
        return self.key[0]

    @property
    def partition(self) -> int:
        return self.key[1]

    @property
    def node_id(self) -> int:
        return self.host.node_id

    @property
    def plog(self) -> PartitionLog:
        return self.store.log

    @property
    def has_work_left(self) -> bool:
        return has_stages(self) or self.busy

    # -- harness.drive.effects.EffectEnv
    def send(self, to: int, message: Any) -> None:
        if isinstance(message, RaftFetchResponse):
            self.parked.discard(to)
        self.host.mux.add(to, self.key, message)

    def persist_election_state(self, state: ElectionState) -> None:
        # Stages carry PersistElectionState as Stage.persist; an effect list run without
        # flush_stages still persists durably here, at once.
        self.host.durability.write_election_state(self, state)

    def on_commit_advanced(self, high_watermark: int) -> None:
        super().on_commit_advanced(high_watermark)
        self.host.observer.on_commit(self, high_watermark)

    def on_leader_changed(self, effect: LeaderChanged) -> None:
        self.host.observer.on_leader_changed(self, effect)

    # -- partition.raft.PartitionEffectEnv
    def complete_produce(self, response: ProduceResponse) -> None:
        self.host.outbox.complete_produce(response)

    def answer_consumer_fetch(self, response: FetchResponse) -> None:
        self.host.outbox.answer_consumer_fetch(response)


class RaftPartitionHost:
    """Every raft partition replica of one broker process (see the module docstring)."""

    def __init__(self, node_id: int, clock: RaftClock, durability: RaftDurability,
                 outbox: RaftOutbox, observer: RaftObserver | None = None, *,
                 tick_quantum_ms: int = 1, merge_phases: bool = True,
                 crash: Callable[[Exception], None] | None = None) -> None:  # fmt: skip
        self.node_id = node_id
        self.clock = clock
        self.durability = durability
        self.outbox = outbox
        self.observer = observer if observer is not None else RaftObserver()
        self.merge_phases = merge_phases
        self.crash = crash
        self.mux = RaftMux(node_id)
        self.grid: TickGrid[PartitionKey] = TickGrid(tick_quantum_ms)
        self.replicas: dict[PartitionKey, HostedRaft] = {}
        self.by_name: dict[tuple[str, int], HostedRaft] = {}
        self._touched: dict[PartitionKey, HostedRaft] = {}
        self._waiting: dict[PartitionKey, HostedRaft] = {}  # dirty while an fsync was in flight
        self._in_flight: list[HostedRaft] | None = None  # what the port is making durable
        self._round_pending = False
        self._timer_round = False
        self._closed = False
        # Counters (the runtime's /metrics, the benchmarks, the tests).
        self.rounds = 0
        self.fsync_rounds = 0  # make_durable calls with a log to fsync
        self.log_fsyncs = 0
        self.core_calls = 0
        self.produce_calls = 0
        self.produce_requests = 0

    # --- hosting ------------------------------------------------------------------------------

    def add(self, key: PartitionKey, voters: tuple[int, ...], plog: PartitionLog, *, seed: int,
            config: RaftPartitionConfig, topic: str = "",
            core_class: type[RaftReplica] = RaftReplica) -> HostedRaft:  # fmt: skip
        """Host a replica of `key` (its voters: the partition's replicas) on `plog`, after the
        recovery flush; `core_class` is for tests that plant a bug in the core."""
        self.durability.recovery_flush(plog)
        store = RaftLogStore.of_partition(plog)
        now_ms = self.clock.now_ms()
        core = core_class(self.node_id, key[0], key[1], voters, store, seed=seed, now_ms=now_ms,
                          config=config, election_state=self.durability.election_state(key, store),
                          topic=topic)  # fmt: skip
        r = HostedRaft(self, key, topic, store, core)
        self.replicas[key] = r
        self.by_name[(topic, key[1])] = r
        self.observer.on_hosted(r)
        self.grid.set(key, core.next_deadline_ms(), now_ms)
        self._arm()
        return r

    def remove(self, key: PartitionKey, deleted: bool) -> HostedRaft | None:
        """Stop hosting `key` (the caller closes or deletes the log; a deleted topic's election
        state goes too). What waits for it is dropped."""
        r = self.replicas.pop(key, None)
        if deleted:
            self.durability.forget(key)
        if r is None:
            return None
        self.by_name.pop((r.topic, r.partition), None)
        self._touched.pop(key, None)
        self._waiting.pop(key, None)
        self.grid.set(key, None, self.clock.now_ms())
        if r.needs_flush:
            r.store.flush()
            r.needs_flush = False
        return r

    def _hosts(self, r: HostedRaft) -> bool:
        return self.replicas.get(r.key) is r

    # --- the inbox ------------------------------------------------------------------------------

    def input(self, r: HostedRaft, message: RaftPartitionInput | None) -> None:
        """`message` (None: a tick) for `r`: into its core now, or into its queue (rule 1)."""
        if r.has_work_left or r.queued:
            r.queued.append(message)  # rule 1, inputs in arrival order, and never re-enter
            self._touch(r)
            return
        self._guarded(self._call, r, message)

    def produce(self, r: HostedRaft, request: ProduceRequest) -> None:
        """Held to the end of the round: one call with every produce request of the round."""
        self.produce_requests += 1
        r.produces.append(request)
        self._touch(r)

    def on_envelope(self, envelope: RaftEnvelope) -> None:
        """A peer's round of Raft messages (quorum.codec.DecodeError if malformed, before any of
        it is fed); items of partitions not hosted here are dropped (the sender retries)."""
        for key, src, message in unbundle(envelope, self.node_id):
            r = self.replicas.get(key)
            if r is not None:
                self.input(r, RaftMessageReceived(src, message))

    def peer_unreachable(self, peer: int) -> None:
        """A connection to `peer` was refused: every partition it votes in hears it."""
        for r in list(self.replicas.values()):
            if peer in r.core.voters:
                self.input(r, PeerUnreachable(peer))

    def resign_all(self) -> int:
        """Controlled shutdown: every partition led here hands over (EndQuorumEpoch)."""
        leading = [r for r in self.replicas.values() if r.core.is_leader]
        for r in leading:
            self.input(r, ResignRequested())
        return len(leading)

    def on_timer(self, at_ms: int) -> None:
        """The clock port's timer (set for `at_ms`): tick every core that is due."""
        now_ms = max(self.clock.now_ms(), at_ms)
        due = self.grid.pop_due(now_ms)
        for key in due:
            r = self.replicas.get(key)
            if r is not None:
                self.input(r, None)
        self._timer_round = self._timer_round or bool(due)
        self._arm()

    # --- running cores ----------------------------------------------------------------------------

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        if self.crash is None:
            fn(*args)
            return
        try:
            fn(*args)
        except Exception as exc:  # a bug or a broken invariant: the driver stops
            self.crash(exc)

    def _call(self, r: HostedRaft, message: RaftPartitionInput | None) -> None:
        """One input (None: a tick); stage 0 of its effects runs now."""
        self.core_calls += 1
        if isinstance(message, RaftMessageReceived) and isinstance(message.message, RaftFetch):
            r.parked.add(message.src)  # until an answer to it leaves (HostedRaft.send)
        effects = call_core(r, message, self.clock.now_ms())  # raises if stages are left
        self.observer.on_effects(r, effects)
        self._advance(r)
        self._touch(r)

    def _advance(self, r: HostedRaft) -> None:
        """Run `r`'s stages up to the next fsync (or grouped election-state write)."""
        write = (None if self.durability.groups_election_states
                 else partial(self.durability.write_election_state, r))  # fmt: skip
        r.busy = True
        try:
            run_stages(r, write)
        finally:
            r.busy = False

    def _feed(self, r: HostedRaft) -> None:
        """What waits for a free core: queued inputs in order, then the round's produces."""
        while not r.has_work_left and self._hosts(r):
            if r.queued:
                self._call(r, r.queued.popleft())
            elif r.produces:
                requests, r.produces = tuple(r.produces), []
                self.produce_calls += 1
                self._call(r, ProducesReceived(requests))
            else:
                return

    def _touch(self, r: HostedRaft) -> None:
        self._touched[r.key] = r
        if not self._round_pending and not self._closed:
            self._round_pending = True
            self.clock.end_round_soon()

    # --- the end of a round -------------------------------------------------------------------

    def end_round(self) -> None:
        """Phase merging, the passes (feed, ship, make durable, next stages), the envelopes,
        the timers (module docstring, 3.)."""
        self._round_pending = False
        if self._closed or (not self._touched and not self._timer_round):
            return  # nothing ran this round (an fsync in flight, a timer of nothing hosted)
        self._guarded(self._run_round)

    def _run_round(self) -> None:
        self.rounds += 1
        if self._timer_round:
            self._timer_round = False
            if self.merge_phases:
                self._merge()
        self._passes()
        self._ship()
        now_ms = self.clock.now_ms()
        touched, self._touched = self._touched, {}
        hosted = [r for r in touched.values() if self._hosts(r)]
        for r in hosted:
            busy = r.has_work_left or r.queued or r.produces
            self.grid.set(r.key, None if busy else r.core.next_deadline_ms(), now_ms)
        self.observer.after_round(hosted)
        self._arm()

    def _passes(self) -> None:
        while True:
            for r in list(self._touched.values()):
                self._feed(r)
            if self.outbox.ships_per_pass:
                self._ship()
            dirty = [r for r in self._touched.values() if waits_for_durability(r)]
            if self._in_flight is not None:  # they go into the fsync after the one in flight
                self._waiting.update((r.key, r) for r in dirty if r not in self._in_flight)
                return
            if not dirty or not self._make_durable(dirty):
                return

    def _make_durable(self, dirty: list[HostedRaft]) -> bool:
        logs = [r for r in dirty if r.needs_flush]
        states = ([r for r in dirty if r.persist is not None]
                  if self.durability.groups_election_states else [])  # fmt: skip
        if logs:
            self.fsync_rounds += 1
            self.log_fsyncs += len(logs)
        self._in_flight = dirty
        if not self.durability.make_durable(logs, states):
            return False
        self._durable()
        return True

    def durable(self) -> None:
        """The durability port completed what `make_durable` started: next stages run (called
        by the port when `make_durable` returned False; the next `end_round` goes on)."""
        self._guarded(self._durable)

    def _durable(self) -> None:
        dirty, self._in_flight = self._in_flight or [], None
        grouped = self.durability.groups_election_states
        for r in dirty:
            r.needs_flush = False
            if grouped:
                r.persist = None
        for r in dirty:
            if self._hosts(r):
                self._advance(r)
                self._touch(r)
        waiting, self._waiting = self._waiting, {}
        for r in waiting.values():  # left dirty meanwhile: into the next round's fsync
            if self._hosts(r):
                self._touch(r)

    def _merge(self) -> None:
        """After a timer round whose envelope to a follower answers a long poll: the other
        long polls of that follower held here, due within the poll wait, are answered now, so
        idle partitions share one phase per broker pair (partition/raft/mux.py)."""
        peers = self.mux.fetch_answers_to()
        if not peers:
            return
        now_ms = self.clock.now_ms()
        for peer in peers:
            for r in [r for r in self.replicas.values() if peer in r.parked]:
                self.input(r, AnswerLongPolls(peer, now_ms + r.core.config.raft.fetch_max_wait_ms))

    def _ship(self) -> None:
        for envelope in self.mux.drain():
            self.outbox.ship(envelope)

    def _arm(self) -> None:
        if not self._closed:
            self.clock.set_timer(self.grid.next_tick_ms())

    # --- views and the end ----------------------------------------------------------------------

    def leader_of(self, key: PartitionKey) -> tuple[int, int] | None:
        """(leader, epoch) as this broker's replica knows them; None if not hosted or unknown."""
        r = self.replicas.get(key)
        if r is None or r.core.leader_id < 0:
            return None
        return r.core.leader_id, r.core.leader_epoch

    def close(self) -> None:
        """Clean shutdown, no more rounds: every log a stage left dirty is fsynced, every
        election state a stage left pending written (the stages after them never run)."""
        self._closed = True
        self.clock.set_timer(None)
        logs = [r for r in self.replicas.values() if r.needs_flush]
        states = [r for r in self.replicas.values() if r.persist is not None]
        for r in logs:
            r.store.flush()
            r.needs_flush = False
        if self.durability.groups_election_states:
            self.durability.make_durable([], states)  # one write (the runtime's is synchronous)
        else:
            for r in states:
                assert r.persist is not None
                self.durability.write_election_state(r, r.persist)
        for r in states:
            r.persist = None
        self.durability.close()

"""One deterministic simulation run of the metadata quorum: a World (harness.sim.runs.world: the
kernel's queue and network, the voters and observers as RaftNode actors, harness.sim.actors) with
the one nemesis (harness.sim.faults) and the key/value client around it, checking the invariants
(harness.sim.checks.invariants) after every event. The metadata run (`kraftlab sim cluster --plane
metadata`, harness.sim.runs.metadata_run) is this run with a `Plane` added: controllers and
brokers as parts of the nodes, an admin client, its own checks.

A run has two phases (TigerBeetle's VOPR, FoundationDB): a *safety* phase of `duration_ms` with
faults (partitions, crashes that lose unsynced data, pauses, drops, duplicates, reordering, and
with `clock_weight` clock jumps) and a
random client; then a *liveness* phase: everything heals, every crashed node restarts, and within
`liveness_budget_ms` the cluster must elect a leader, commit a new proposal (a marker write) and
bring every node, voters and observers, up to it with an image equal to the committed log's.

Determinism: ONE `random.Random(seed)` drives topology, Raft timing config, per-node core seeds,
latencies, faults and client operations; events run in (time_ms, seq) order; nothing reads the
wall clock. The trace digest hashes every event that ran, in order: the same seed gives the same
digest (tests/sim/test_determinism.py), and `replay_command()` reproduces a failure exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from harness.sim.actors.kv_client import KvClient
from harness.sim.actors.raft_node import NodeFactory, RaftNode
from harness.sim.checks.findings import diagnose_lagging, where
from harness.sim.checks.invariants import SafetyChecker, SafetyViolation, Violation
from harness.sim.faults.nemesis import Nemesis, NemesisProfile
from harness.sim.kernel.events import (
    ClientReply,
    ClientRequest,
    ClientStep,
    ClientTimeout,
    Event,
    LivenessProbe,
    NemesisStep,
    PhaseChange,
    Snapshot,
    VoterChangeStep,
)
from harness.sim.kernel.network import NetworkProfile
from harness.sim.runs.membership import VoterChanger
from harness.sim.runs.world import REFUSED_DELAY_MS, World
from quorum.raft.config import RaftConfig
from quorum.raft.errors import InvariantViolation

FIRST_OBSERVER_ID = 101  # docs/api.md: broker ids start at 101
SPARE_CONTROLLERS = 2  # membership runs: controllers that start as observers
LIVENESS_PROBE_INTERVAL_MS = 20
CLIENT_LINK_MAX_DELAY_MS = 5
STORM_WINDOW_MS = 100
STORM_EVENTS = 20_000  # events in one window that mean a livelock (event storm)
HISTORY_CHECK_S = 10.0  # wall-clock budget of the linearizability search (verdict unknown after)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What one run is. Everything not given here is drawn from the seed."""

    seed: int
    voters: int = 3
    observers: int | None = None  # None: 1 or 2, drawn from the seed
    duration_ms: int = 3000  # safety phase
    liveness_budget_ms: int | None = None  # None: 30 election timeouts, at least 6 s
    clients: int | None = None  # None: 1 to 6 client processes, drawn from the seed
    max_events: int = 400_000  # a runaway guard; hitting it is reported as a liveness failure
    trace_tail: int = 60  # events kept for the failure report
    # KIP-853: spare controllers join and voters leave during the safety phase
    # (harness.sim.runs.membership). Off by default, so other runs draw exactly as before.
    membership: bool = False
    clock_weight: int = 0  # clock jumps among the nemesis steps (NemesisProfile.clock_weight)

    def replay_command(self) -> str:
        cmd = f"kraftlab sim quorum --seed {self.seed} --voters {self.voters}"
        cmd += f" --duration-ms {self.duration_ms}"
        if self.observers is not None:
            cmd += f" --observers {self.observers}"
        if self.membership:
            cmd += " --membership"
        if self.clock_weight:
            cmd += f" --clock-weight {self.clock_weight}"
        return cmd


@dataclass(slots=True)
class SimResult:
    config: SimConfig
    digest: str
    events: int
    sim_ms: int
    violation: Violation | None
    raft_config: RaftConfig
    node_ids: tuple[int, ...]
    history: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    trace_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.violation is None


def draw_raft_config(rng: random.Random) -> RaftConfig:
    """Aggressive Raft timing so a few simulated seconds see many elections."""
    election_timeout_ms = rng.choice((100, 150, 250))
    fetch_timeout_ms = election_timeout_ms * rng.choice((2, 3))
    return RaftConfig(
        election_timeout_ms=election_timeout_ms,
        election_backoff_max_ms=election_timeout_ms,
        fetch_timeout_ms=fetch_timeout_ms,
        request_timeout_ms=election_timeout_ms,
        retry_backoff_ms=rng.choice((5, 20)),
        fetch_max_wait_ms=rng.choice((50, 100)),
        max_idle_interval_ms=rng.choice((50, 200)),
        append_linger_ms=rng.choice((0, 0, 5)),
        fetch_max_bytes=rng.choice((256, 4096, 1 << 20)),
        snapshot_chunk_bytes=rng.choice((64, 512, 1 << 20)),
        # Small retention so snapshots delete log prefixes and lagging replicas FetchSnapshot.
        snapshot_retention_entries=rng.choice((0, 5, 50)),
        pre_vote=rng.random() < 0.75,  # without KIP-996 too: more split votes, more epochs
        fast_pre_vote_on_unreachable=rng.random() < 0.7,
        flush_on_append=True,
    )


class Plane(Protocol):
    """What a run adds to this one (the metadata run's controllers, brokers and admin client):
    it is bound to the simulation before the run, starts with it, handles its own events, checks
    every node after each of its inputs, adds to the liveness condition and to the stats."""

    def bind(self, sim: Simulation) -> None: ...

    def start(self) -> None: ...

    def dispatch(self, at_ms: int, event: Any) -> bool: ...

    def after(self, node: Any) -> None: ...

    def liveness_missing(self) -> str | None: ...

    def stats(self) -> dict[str, Any]: ...


class Simulation:
    """A single seeded run. `run()` returns a SimResult; a violation stops the run."""

    def __init__(
        self,
        config: SimConfig,
        node_factory: NodeFactory | None = None,
        plane: Plane | None = None,
    ) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        rng = self.rng
        observers = config.observers if config.observers is not None else rng.randint(1, 2)
        self.voter_ids = tuple(range(1, config.voters + 1))
        self.observer_ids = tuple(range(FIRST_OBSERVER_ID, FIRST_OBSERVER_ID + observers))
        # Membership runs: controllers that start as observers, to be added as voters.
        spares = SPARE_CONTROLLERS if config.membership else 0
        self.spare_ids = tuple(range(config.voters + 1, config.voters + 1 + spares))
        self._node_ids = self.voter_ids + self.spare_ids + self.observer_ids
        self.raft_config = draw_raft_config(rng)
        if config.membership and not self.raft_config.pre_vote:
            # A removed voter that missed its removal campaigns forever, and without pre-vote
            # every campaign bumps the epoch of those who answer it (Raft thesis 4.2.3, the
            # disruptive removed server). KIP-853 relies on KIP-996 for this.
            self.raft_config = dataclasses.replace(self.raft_config, pre_vote=True)
        network_profile = NetworkProfile.draw(rng)
        nemesis_profile = replace(NemesisProfile.draw(rng), clock_weight=config.clock_weight)
        clients = config.clients if config.clients is not None else rng.randint(1, 6)
        self.client = KvClient(rng, clients, self.voter_ids)
        self.checker = SafetyChecker()
        self.world = world = World(rng, network_profile)
        self.queue = world.queue
        self.network = world.network
        self.nemesis = Nemesis(world, rng, nemesis_profile)
        world.crash_rng = self.nemesis.crash_rng
        world.after_hooks.append(self._ship_replies)
        world.on_held = self._client_request
        factory = node_factory or RaftNode
        for n in self._node_ids:
            node = factory(n, self.voter_ids, self.raft_config, self.checker)
            controller = n in self.voter_ids or n in self.spare_ids
            world.add(node, "controller" if controller else "broker")
        self.changer: VoterChanger | None = None
        if config.membership:
            self.changer = VoterChanger(world, rng, self.voter_ids + self.spare_ids)
        self.nodes: dict[int, RaftNode] = world.actors
        self.plane = plane
        self.phase = "safety"
        self.done = False
        self.liveness_deadline_ms = 0
        self.marker: tuple[int, int] | None = None  # (leader, epoch) the marker went to
        self.marker_data: list[bytes] = []  # every marker proposed (any may commit)
        self.marker_attempts = 0
        self._digest = hashlib.blake2b(digest_size=16)
        self._trace: deque[str] = deque(maxlen=config.trace_tail)
        self.events = 0
        self._instant_ms = -1
        self._instant_events = 0
        self._window_kinds: Counter[str] = Counter()
        self.history_verdict = "unchecked"
        self.snapshot_interval_ms = rng.choice((150, 400, 1000))
        if plane is not None:
            plane.bind(self)
            world.after_hooks.append(plane.after)

    @property
    def node_ids(self) -> Sequence[int]:
        return self._node_ids

    def active_controller(self) -> int | None:
        return self.world.active_controller()

    def restart(self, node_id: int) -> None:
        self.world.restart(node_id)

    # -- the loop -----------------------------------------------------------------------------------

    def run(self) -> SimResult:
        q = self.queue
        if self.plane is not None:
            self.plane.start()
        for n in self._node_ids:
            self.nodes[n].start(0, self.rng.getrandbits(32))
            self.world.after(self.nodes[n])
        q.schedule(self.nemesis.next_interval_ms(), NemesisStep())
        for p in self.client.processes:
            q.schedule(self.client.think_time_ms(), ClientStep(p))
        q.schedule(self.snapshot_interval_ms, Snapshot(self._node_ids[0]))
        q.schedule(self.config.duration_ms, PhaseChange("liveness"))
        if self.changer is not None:
            q.schedule(self.changer.next_interval_ms(), VoterChangeStep())
        violation: Violation | None = None
        try:
            while q and not self.done:
                at_ms, event = q.pop()
                self.events += 1
                self.checker.now_ms = at_ms
                line = f"{at_ms} {event!r}"
                self._digest.update(line.encode())
                self._trace.append(line)
                self._dispatch(at_ms, event)
                self._count_instant(at_ms, line)
                if self.events >= self.config.max_events:
                    self.checker.fail("Liveness", None, f"gave up after {self.events} events")
            if not self.done:
                self.checker.fail("Liveness", None, "event queue drained before convergence")
            self._check_history()
        except SafetyViolation as exc:
            violation = exc.violation
        except InvariantViolation as exc:
            # The core's own assertion (non-monotonic HW, truncation below it, two leaders...).
            violation = Violation("CoreInvariant", q.now_ms, None, f"{exc} ({where(exc)})")
        except Exception as exc:  # noqa: BLE001 - any crash of a node's code is a failing seed
            violation = Violation(
                f"Crash:{type(exc).__name__}", q.now_ms, None, f"{exc} ({where(exc)})"
            )
        return SimResult(
            config=self.config,
            digest=self._digest.hexdigest(),
            events=self.events,
            sim_ms=q.now_ms,
            violation=violation,
            raft_config=self.raft_config,
            node_ids=self._node_ids,
            history=self.client.history,
            stats=self._stats(),
            trace_tail=list(self._trace),
        )

    def _dispatch(self, at_ms: int, event: Event) -> None:
        if self.world.dispatch(at_ms, event):
            return
        if self.plane is not None and self.plane.dispatch(at_ms, event):
            return
        match event:
            case NemesisStep():
                if self.phase == "safety":
                    self.note(f"nemesis {self.nemesis.step()}")
                    self.queue.schedule(at_ms + self.nemesis.next_interval_ms(), NemesisStep())
            case VoterChangeStep():
                if self.phase == "safety" and self.changer is not None:
                    self.note(self.changer.step(at_ms))
                    self.queue.schedule(at_ms + self.changer.next_interval_ms(), VoterChangeStep())
            case ClientStep(process=p):
                self._client_step(at_ms, p)
            case ClientRequest():
                self._client_request(at_ms, event)
            case ClientReply(process=p, op_index=i, type=type_, value=value, leader_hint=hint):
                op = self.client.ops[(p, i)]
                if not op.done:
                    self.client.complete(op, type_, at_ms, value, hint, event.error)
                    self.queue.schedule(at_ms + self.client.think_time_ms(), ClientStep(p))
            case ClientTimeout(process=p, op_index=i):
                op = self.client.ops[(p, i)]
                if not op.done:
                    self.client.complete(op, "info", at_ms, None, None, "REQUEST_TIMED_OUT")
                    self.queue.schedule(at_ms + self.client.think_time_ms(), ClientStep(p))
            case Snapshot(node=n):
                node = self.nodes[n]
                if node.up and not node.paused:
                    node.take_snapshot(at_ms)
                    self.world.after(node)
                following = self._node_ids[(self._node_ids.index(n) + 1) % len(self._node_ids)]
                self.queue.schedule(at_ms + self.snapshot_interval_ms, Snapshot(following))
            case PhaseChange():
                self._begin_liveness(at_ms)
            case LivenessProbe():
                self._probe_liveness(at_ms)
            case _:
                raise AssertionError(f"unknown event {event!r}")

    def _count_instant(self, at_ms: int, line: str) -> None:
        """Two nodes that answer each other at once, with no backoff, loop forever within a few
        virtual milliseconds (exponentially, once duplicates copy the messages): a livelock a
        real cluster would turn into a CPU and network storm. Reported as soon as one window of
        STORM_WINDOW_MS holds STORM_EVENTS events (a normal run has ~1,000 events per second),
        with the kinds of event that fill it."""
        window = at_ms // STORM_WINDOW_MS
        if window != self._instant_ms:
            self._instant_ms, self._instant_events = window, 0
            self._window_kinds.clear()
        self._instant_events += 1
        self._window_kinds[line.split(" ", 1)[1][:110]] += 1
        if self._instant_events >= STORM_EVENTS:
            top = "; ".join(f"{n} x {k}" for k, n in self._window_kinds.most_common(3))
            refused = sum(
                n for k, n in self._window_kinds.items() if k.startswith("ConnectionRefused")
            )
            if refused * 10 >= self._instant_events:
                top += f"; {refused} x ConnectionRefused [refused-loop]"
            self.checker.fail(
                "Liveness",
                None,
                f"[event-storm] {self._instant_events} events within {STORM_WINDOW_MS} ms: {top}",
            )

    def note(self, line: str) -> None:
        """A line of the run's trace (and digest) that is not an event: a fault, a phase."""
        self._digest.update(line.encode())
        self._trace.append(line)

    def _ship_replies(self, node: RaftNode) -> None:
        """The world's after-hook: answers to the kv client leave with the node's messages."""
        if node.replies:
            now_ms = self.queue.now_ms
            replies, node.replies = node.replies, []
            for op, type_, value, hint, error in replies:
                delay_ms = self.rng.randint(0, CLIENT_LINK_MAX_DELAY_MS)
                self.queue.schedule(
                    now_ms + delay_ms,
                    ClientReply(op.process, op.op_index, type_, value, hint, error),
                )

    # -- the client -----------------------------------------------------------------------------------

    def _client_step(self, at_ms: int, process: int) -> None:
        if self.phase != "safety":
            return
        op = self.client.invoke(process, at_ms)
        delay_ms = self.rng.randint(0, CLIENT_LINK_MAX_DELAY_MS)
        self.queue.schedule(at_ms + delay_ms, ClientRequest(process, op.node, op.op_index))
        self.queue.schedule(at_ms + self.client.timeout_ms, ClientTimeout(process, op.op_index))

    def _client_request(self, at_ms: int, event: ClientRequest) -> None:
        op = self.client.ops[(event.process, event.op_index)]
        node = self.nodes[event.node]
        if not node.up:
            # Connection refused: the operation certainly did not happen.
            self.queue.schedule(
                at_ms + REFUSED_DELAY_MS,
                ClientReply(op.process, op.op_index, "fail", None, None, "NETWORK_EXCEPTION"),
            )
            return
        if node.paused:
            node.buffered.append(event)
            return
        node.client_request(op, at_ms)
        self.world.after(node)

    # -- liveness -------------------------------------------------------------------------------------

    def _begin_liveness(self, at_ms: int) -> None:
        self.phase = "liveness"
        self.note("liveness: heal, restart, resume")
        self.network.heal()
        self.network.faults_enabled = False
        for n in self._node_ids:
            node = self.nodes[n]
            if not node.up:
                self.restart(n)
            elif node.paused:
                self.world.resume(n)
        budget_ms = self.config.liveness_budget_ms
        if budget_ms is None:
            budget_ms = max(6000, 30 * self.raft_config.election_timeout_ms)
        self.liveness_deadline_ms = at_ms + budget_ms
        self.queue.schedule(at_ms + LIVENESS_PROBE_INTERVAL_MS, LivenessProbe())

    def _probe_liveness(self, at_ms: int) -> None:
        missing = self._liveness_missing(at_ms)
        if missing is None:
            self.done = True
            self.note(f"liveness reached at {at_ms} ms")
            return
        if at_ms >= self.liveness_deadline_ms:
            self.checker.fail("Liveness", None, f"not converged after the budget: {missing}")
        self.queue.schedule(at_ms + LIVENESS_PROBE_INTERVAL_MS, LivenessProbe())

    def _liveness_missing(self, at_ms: int) -> str | None:
        """None once converged, else what is still missing."""
        leader_id = self.active_controller()
        if leader_id is None:
            return "no leader"
        leader = self.nodes[leader_id]
        if self.marker != (leader_id, leader.epoch):
            committed = self._committed_marker_offset()
            if committed is None:
                self.marker_attempts += 1
                data = leader.propose_marker(f"{self.config.seed}-{self.marker_attempts}", at_ms)
                self.world.after(leader)
                if data is None:
                    return f"leader {leader_id} refused the marker"
                self.marker = (leader_id, leader.epoch)
                self.marker_data.append(data)
        offset = self._committed_marker_offset()
        if offset is None:
            return "marker not committed"
        for n in self._node_ids:
            node = self.nodes[n]
            if node.high_watermark <= offset or node.applied_end <= offset:
                return (
                    f"node {n} at HW {node.high_watermark} applied {node.applied_end}, "
                    f"marker at {offset} [{diagnose_lagging(node, leader)}]"
                )
        for n in self._node_ids:
            node = self.nodes[n]
            for key in sorted(node.image_keys() | self.checker.model.keys()):
                value = node.image_value(key)
                expected = self.checker.model.value_at(key, node.applied_end)
                if value != expected:
                    self.checker.fail(
                        "ImageConvergence",
                        n,
                        f"key {key!r} = {value!r} at offset {node.applied_end}, log says {expected!r}",
                    )
        return None if self.plane is None else self.plane.liveness_missing()

    def _check_history(self) -> None:
        """The client's history must be linearizable (kv model) by harness.jepsen's checker, the
        same one that judges real clusters. Only an `invalid` verdict counts: the search has a
        wall-clock budget, and `unknown` says nothing about the run."""
        from harness.check.history import event_from_json, pair_operations
        from harness.check.linearizable import check_linearizable
        from harness.check.models import get_model

        model = get_model("kv")
        events = [event_from_json(e, position=i) for i, e in enumerate(self.client.history)]
        result = check_linearizable(pair_operations(events), model, timeout_s=HISTORY_CHECK_S)
        self.history_verdict = result.verdict
        if result.verdict == "invalid":
            failure = result.failure.describe(model) if result.failure is not None else {}
            self.checker.fail(
                "Linearizability",
                None,
                f"history not linearizable on key {failure.get('partition')!r}: "
                f"{failure.get('blocking')}",
            )

    def _committed_marker_offset(self) -> int | None:
        offsets = [self.checker.committed_offset_of(d) for d in self.marker_data]
        found = [o for o in offsets if o is not None]
        return max(found) if found else None

    def _stats(self) -> dict[str, Any]:
        return {
            "network": dict(self.network.stats),
            "client": {
                "ok": self.client.stats.ok,
                "fail": self.client.stats.fail,
                "info": self.client.stats.info,
            },
            "committed": self.checker.model.applied_end,
            "epochs": len(self.checker.leader_of_epoch),
            "checks": self.checker.checks,
            "timer_spins": self.world.timer_spins,
            "history": self.history_verdict,
            "paths": dict(sorted(self.checker.paths.items())),
            "nemesis": dict(sorted(self.nemesis.counts.items())),
            **({"voter_changes": self.changer.stats()} if self.changer is not None else {}),
            **(self.plane.stats() if self.plane is not None else {}),
        }


def run_seed(config: SimConfig, node_factory: NodeFactory | None = None) -> SimResult:
    """Run one seed (the unit the CLI and tests fan out)."""
    return Simulation(config, node_factory).run()


SeedRunner = Callable[[SimConfig], SimResult]

__all__ = [
    "SimConfig",
    "SimResult",
    "Simulation",
    "draw_raft_config",
    "run_seed",
]

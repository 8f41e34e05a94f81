"""A simulated cluster: the kernel (one event queue, one network; harness.sim.kernel), the actors
by role (controllers, brokers, clients; harness.sim.actors) and the FaultTarget the nemesis acts on
(harness.sim.faults). Every simulated run builds one World and adds what it studies around it.

The world runs the kernel's events for its actors:
- `Deliver`: a message crosses only if its link is open at send (`send`, `after`) AND at
  arrival; to a process that is down it is refused (ConnectionRefused to the sender, TCP RST,
  if the sender is up and can hear it); a paused process holds it until resumed;
- `TimerFired`: an actor's one timer, armed at its `next_deadline_ms()`; stale generations are
  ignored; a core still due right after its timer fired would spin at one instant of virtual
  time (a real machine burns CPU until the clock moves), so the timer is re-armed 1 ms later and
  the spin counted (`timer_spins`, a finding, not a violation);
- `ConnectionRefused`, `Resume` (SIGCONT: held deliveries run, the timer is re-armed), `Call`.
After every input of an actor, `after(actor)` ships its outbox over the network, runs the run's
after-hooks (its checks, its client answers) and re-arms the actor's timer.

An actor is a simulated process with: node_id, up, paused, pause_id, buffered, outbox,
timer_generation, armed_deadline_ms, incarnation, pause() (harness.sim.actors.process.SimProcess
holds them); handle, tick, peer_unreachable, next_deadline_ms; start(now_ms, seed), crash(rng),
stop(), shutdown(now_ms).

Invariants: events run in (time, seq) order; every draw (delays, restart seeds, crash losses)
comes from the run's seeded generators in event order; nothing reads the wall clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from harness.sim.kernel.events import (
    Call,
    ConnectionRefused,
    Deliver,
    Event,
    EventQueue,
    Resume,
    TimerFired,
)
from harness.sim.kernel.network import NetworkProfile, SimNetwork

REFUSED_DELAY_MS = 1


class World:
    """Kernel + actors + the FaultTarget operations."""

    def __init__(self, rng: random.Random, profile: NetworkProfile) -> None:
        self.rng = rng  # the network's draws and the seeds of restarted processes
        self.queue = EventQueue()
        self.network = SimNetwork(rng, profile)
        self.actors: dict[int, Any] = {}
        self._controllers: tuple[int, ...] = ()
        self._brokers: tuple[int, ...] = ()
        self._clients: tuple[int, ...] = ()
        self.timer_spins = 0
        # The rng a power loss keeps a random prefix of unsynced writes with (None: lose all).
        self.crash_rng: Callable[[], random.Random | None] = lambda: None
        # Run after every input of an actor, once its outbox is shipped, before its timer.
        self.after_hooks: list[Callable[[Any], None]] = []
        # A held event other than a Deliver, run when its paused process resumes.
        self.on_held: Callable[[int, Any], None] | None = None
        # Where the run's data partition is led (None: no data plane, or no leader).
        self.partition_leader_of: Callable[[], int | None] = lambda: None
        self._downed: list[int] = []

    def add(self, actor: Any, role: str) -> None:
        """Add `actor` as a controller, broker or client (ids sorted within a role)."""
        self.actors[actor.node_id] = actor
        ids = {"controller": self._controllers, "broker": self._brokers, "client": self._clients}
        updated = tuple(sorted((*ids[role], actor.node_id)))
        if role == "controller":
            self._controllers = updated
        elif role == "broker":
            self._brokers = updated
        else:
            self._clients = updated

    @property
    def now_ms(self) -> int:
        return self.queue.now_ms

    def send(self, src: int, dst: int, message: Any) -> None:
        """`message` from `src` to `dst` over the network, outside an actor's outbox (a run's
        script: the metadata a controller pushes again)."""
        for delay_ms in self.network.delays_ms(src, dst):
            self.queue.schedule(self.queue.now_ms + delay_ms, Deliver(src, dst, message))

    # -- the kernel's events -----------------------------------------------------------------------

    def dispatch(self, at_ms: int, event: Event) -> bool:
        """Run `event` if it is one of the kernel's; False if the run must handle it."""
        match event:
            case Deliver():
                self._deliver(at_ms, event)
            case TimerFired(node=n, generation=generation):
                actor = self.actors[n]
                if actor.up and not actor.paused and generation == actor.timer_generation:
                    actor.armed_deadline_ms = None
                    actor.tick(at_ms)
                    self.after(actor, timer_fired=True)
            case ConnectionRefused(node=n, peer=peer):
                actor = self.actors[n]
                if actor.up and not actor.paused:
                    actor.peer_unreachable(peer, at_ms)
                    self.after(actor)
            case Resume(node=n, pause_id=pause_id):
                self._resume(self.actors[n], pause_id)
            case Call(fn=fn, args=args):
                fn(*args)
            case _:
                return False
        return True

    def _deliver(self, at_ms: int, event: Deliver) -> None:
        src, dst = event.src, event.dst
        actor = self.actors.get(dst)
        if actor is None or not self.network.can_reach(src, dst):
            return
        if not actor.up:
            # The process is gone: the sender's connection is refused (TCP RST), if it can hear it.
            if self.network.can_reach(dst, src) and self.actors[src].up:
                self.queue.schedule(at_ms + REFUSED_DELAY_MS, ConnectionRefused(src, dst))
            return
        if actor.paused:
            actor.buffered.append(event)  # the kernel keeps it until the process runs again
            return
        actor.handle(src, event.message, at_ms)
        self.after(actor)

    def after(self, actor: Any, timer_fired: bool = False) -> None:
        """Ship what `actor` produced, run the after-hooks, re-arm its timer."""
        now_ms = self.queue.now_ms
        if actor.outbox:
            outbox, actor.outbox = actor.outbox, []
            for to, message in outbox:
                if to not in self.actors:
                    continue
                for delay_ms in self.network.delays_ms(actor.node_id, to):
                    self.queue.schedule(now_ms + delay_ms, Deliver(actor.node_id, to, message))
        for hook in self.after_hooks:
            hook(actor)
        if not actor.up or actor.paused:
            return
        deadline_ms = actor.next_deadline_ms()
        if deadline_ms is None:
            if actor.armed_deadline_ms is not None:
                actor.timer_generation += 1
                actor.armed_deadline_ms = None
            return
        if timer_fired and deadline_ms <= now_ms:
            self.timer_spins += 1
            deadline_ms = now_ms + 1
        deadline_ms = max(deadline_ms, now_ms)
        if deadline_ms != actor.armed_deadline_ms:
            actor.timer_generation += 1
            actor.armed_deadline_ms = deadline_ms
            self.queue.schedule(deadline_ms, TimerFired(actor.node_id, actor.timer_generation))

    def _resume(self, actor: Any, pause_id: int) -> None:
        if not actor.up or not actor.paused or actor.pause_id != pause_id:
            return
        actor.paused = False
        actor.armed_deadline_ms = None
        now_ms = self.queue.now_ms
        held, actor.buffered = actor.buffered, []
        for event in held:
            match event:
                case Deliver(src=src, message=message):
                    actor.handle(src, message, now_ms)
                case _:
                    assert self.on_held is not None, f"no handler for held {event!r}"
                    self.on_held(now_ms, event)
            self.after(actor)
        actor.tick(now_ms)
        self.after(actor)

    # -- the FaultTarget (harness.sim.faults.fault) ------------------------------------------------

    @property
    def node_ids(self) -> Sequence[int]:
        return self._controllers + self._brokers

    @property
    def controller_ids(self) -> Sequence[int]:
        return self._controllers

    @property
    def broker_ids(self) -> Sequence[int]:
        return self._brokers

    @property
    def client_ids(self) -> Sequence[int]:
        return self._clients

    def is_up(self, node_id: int) -> bool:
        return bool(self.actors[node_id].up)

    def is_paused(self, node_id: int) -> bool:
        return bool(self.actors[node_id].paused)

    def active_controller(self) -> int | None:
        """The live controller that leads the highest epoch any live controller leads."""
        best: tuple[int, int] | None = None
        for n in self._controllers:
            actor = self.actors[n]
            if actor.up and actor.is_leader and (best is None or actor.epoch > best[0]):
                best = (actor.epoch, n)
        return None if best is None else best[1]

    def partition_leader(self) -> int | None:
        return self.partition_leader_of()

    def crash(self, node_id: int) -> None:
        self.actors[node_id].crash(self.crash_rng())

    def kill(self, node_id: int) -> None:
        self.actors[node_id].stop()

    def shutdown(self, node_id: int) -> None:
        """Controlled shutdown: a leader resigns (EndQuorumEpoch to its successors), the driver
        flushes, the process exits. Nothing unsynced is lost: the log is flushed and the
        quorum-state file was written durably."""
        actor = self.actors[node_id]
        actor.shutdown(self.queue.now_ms)
        self.after(actor)  # ship the EndQuorumEpoch requests
        actor.crash(None)

    def restart(self, node_id: int) -> None:
        actor = self.actors[node_id]
        actor.start(self.queue.now_ms, self.rng.getrandbits(32))
        self.after(actor)

    def pause(self, node_id: int, duration_ms: int | None) -> None:
        pause_id = self.actors[node_id].pause()
        if duration_ms is not None:
            self.queue.schedule(self.queue.now_ms + duration_ms, Resume(node_id, pause_id))

    def resume(self, node_id: int) -> None:
        actor = self.actors[node_id]
        self._resume(actor, actor.pause_id)

    def jump_clock(self, node_id: int, delta_ms: int) -> bool:
        """Step the node's clock (harness.sim.actors.skewed_clock); its timer is re-armed at
        once, so a jump forward fires what became due now. False: this actor has no clock of
        its own (only the quorum processes, RaftNode, have one)."""
        actor = self.actors[node_id]
        clock = getattr(actor, "clock", None)
        if clock is None:
            return False
        clock.jump(delta_ms, self.queue.now_ms)
        if actor.up and not actor.paused:
            self.after(actor)
        return True

    def metadata_quorum_down(self) -> list[int]:
        """A majority of the controllers crash, the active one first."""
        active = self.active_controller()
        order = ([active] if active is not None else []) + [
            v for v in self._controllers if v != active
        ]
        self._downed = [v for v in order if self.actors[v].up][: len(self._controllers) // 2 + 1]
        for v in self._downed:
            self.crash(v)
        return list(self._downed)

    def metadata_quorum_up(self) -> None:
        downed, self._downed = self._downed, []
        for v in downed:
            if not self.actors[v].up:
                self.restart(v)

"""The study's fault shapes (docs/compare.md): each reproduces a scenario of the project's
reference list of replication pitfalls (numbered below as there: reference 2.N), and
tests/sim/test_study_shapes.py checks that it does what its name says. They join the one table,
harness.sim.faults.shapes.SHAPES, under these names; they are span shapes (applied at the
fault's start, healed at its end) of the data-plane runs.

- follower-gc-pauses: one follower stopped (a long GC pause) for a drawn GC_PAUSE_MS, then
  running for GC_RUN_MS, again and again for the fault. The pauses straddle the simulated
  cluster's replica.lag.time.max.ms (2 s) and exceed its broker.session.timeout.ms (1 s), as
  Kafka's defaults order them (broker.session.timeout.ms 9 s < replica.lag.time.max.ms 30 s): a pause removes the follower from the ISR
  (by its expired session or its lag, whichever is shorter) and its return adds it back, so the
  ISR flaps; with both timeouts above the longest pause it does not;
- staggered-isr-drop-then-leader-crash: the KIP-966 motivation (reference 2.7): one follower cut
  from the leader, half the fault later the other one, so the ISR drops to the leader one member
  at a time; at the end the leader loses power (its unflushed tail), the network heals, and it
  restarts STAGGERED_RESTART_MS later. ELR (KIP-966) keeps the second follower eligible; an
  unclean election may pick the first, which lacks what was acknowledged in between;
- metadata-quorum-down-kill-follower / -kill-leader: the metadata quorum down (a majority of the
  voters crashed) and, at once, a follower (the ISR cannot shrink: acks=all waits on the dead
  follower) or the partition leader (no election until the quorum returns) killed; both come
  back at the end, the quorum first (reference 2.11: the data plane waiting on the control plane);
- fast-leader-changes: KIP-279 (reference 2.3): the leader killed, and FAST_SECOND_KILL_MS later
  (a new one elected) that one killed too while the first restarts, so leadership changes twice
  in quick succession; the second victim restarts at the end;
- fenced-follower-rejoins: a follower cut from every controller (its session expires, the
  controller fences it, KIP-841) while it still fetches from the leader and keeps up, so the
  leader would add it back; the controller must refuse a fenced replica (reference 2.9);
- power-loss-all-brokers: every broker loses power at once (a data centre's outage), losing what
  was not fsynced, and restarts at the end: what separates an fsync before the acknowledgement
  from none, for every arm (reference 2.7: Kafka does not fsync per write, so its durability is
  replication, which a correlated power loss defeats).

Invariants: as every shape, choices draw from Fault.rng over ids in a fixed order; every process
a shape stops is started again by the fault's heal.
"""

from __future__ import annotations

from harness.sim.faults.fault import Fault, Shape

GC_PAUSE_MS = (1500, 3000)
GC_RUN_MS = (500, 1500)
# Longer than the broker session timeout (1000 ms): the dead leader is fenced and, if allowed,
# replaced before it returns.
STAGGERED_RESTART_MS = 2000
# After the broker session timeout (1000 ms) and an election: the second leader is in place.
FAST_SECOND_KILL_MS = 1500


def follower_gc_pauses(f: Fault) -> str:
    t = f.target
    leader = f.partition_leader()
    follower = f.rng.choice(f.followers(leader))
    assert f.end_ms is not None
    at_ms = f.start_ms
    while at_ms < f.end_ms:
        pause_ms = min(f.rng.randint(*GC_PAUSE_MS), f.end_ms - at_ms)
        f.at(at_ms, t.pause, follower, None)
        f.at(at_ms + pause_ms, t.resume, follower)
        at_ms += pause_ms + f.rng.randint(*GC_RUN_MS)
    f.until(lambda: t.resume(follower), "pause-flapping")
    return f"broker {follower}"


def staggered_isr_drop_then_leader_crash(f: Fault) -> str:
    t = f.target
    leader = f.partition_leader()
    first, second = f.rng.sample(f.followers(leader), 2)
    assert f.end_ms is not None
    t.network.cut_between(leader, [first])
    f.at(f.start_ms + (f.end_ms - f.start_ms) // 2, t.network.cut_between, leader, [second])
    f.until(f.heal_network, "partition")
    f.at(f.end_ms, t.crash, leader)
    f.until(lambda: t.restart(leader), "crash-unflushed", f.end_ms + STAGGERED_RESTART_MS)
    return f"broker {leader}, followers {first} then {second}"


def _quorum_down_with(f: Fault, victim: int) -> str:
    t = f.target
    downed = t.metadata_quorum_down()
    t.kill(victim)

    def heal() -> None:
        t.metadata_quorum_up()
        t.restart(victim)

    f.until(heal, "controller-down")
    return f"voters {sorted(downed)}, broker {victim}"


def quorum_down_kill_follower(f: Fault) -> str:
    leader = f.partition_leader()
    return _quorum_down_with(f, f.rng.choice(f.followers(leader)))


def quorum_down_kill_leader(f: Fault) -> str:
    return _quorum_down_with(f, f.partition_leader())


def fast_leader_changes(f: Fault) -> str:
    t = f.target
    first = f.partition_leader()
    t.kill(first)
    assert f.end_ms is not None
    victims: list[int] = [first]

    def second_kill() -> None:
        second = f.partition_leader()
        t.restart(first)
        if second != first and t.is_up(second):
            t.kill(second)
            victims.append(second)

    f.at(min(f.start_ms + FAST_SECOND_KILL_MS, f.end_ms), second_kill)

    def restart_rest() -> None:
        for v in victims[1:]:
            t.restart(v)

    f.until(restart_rest, "kill")
    return f"broker {first}, then the next leader"


def fenced_follower_rejoins(f: Fault) -> str:
    t = f.target
    follower = f.rng.choice(f.followers(f.partition_leader()))
    t.network.cut_between(follower, t.controller_ids)
    f.until(f.heal_network, "partition")
    return f"broker {follower}"


def power_loss_all_brokers(f: Fault) -> str:
    return f.stop_until_end(list(f.target.broker_ids), f.target.crash, "crash-unflushed")


STUDY_SHAPES: dict[str, Shape] = {
    "follower-gc-pauses": Shape("pause", follower_gc_pauses),
    "staggered-isr-drop-then-leader-crash": Shape(
        "power", staggered_isr_drop_then_leader_crash, STAGGERED_RESTART_MS
    ),
    "metadata-quorum-down-kill-follower": Shape("crash", quorum_down_kill_follower),
    "metadata-quorum-down-kill-leader": Shape("crash", quorum_down_kill_leader),
    "fast-leader-changes": Shape("crash", fast_leader_changes),
    "fenced-follower-rejoins": Shape("partition", fenced_follower_rejoins),
    "power-loss-all-brokers": Shape("power", power_loss_all_brokers),
}
STUDY_NEMESES = tuple(STUDY_SHAPES)

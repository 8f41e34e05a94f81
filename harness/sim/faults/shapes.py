"""Every fault shape of the simulator in one table, `SHAPES` (name -> Shape), the way h11 keeps
its transitions in tables: a run names shapes, the nemesis (harness.sim.faults.nemesis) looks them
up and applies them; no run holds a chain of tests on fault names.

A shape is a function of a Fault (harness.sim.faults.fault: target, rng, start, end) that applies
the fault at once, schedules what it does later (a second stage, its heal, a restart after the
end) and returns a description of its target. Processes: controllers (the metadata quorum's
voters, or the one abstract controller), brokers, and the clients of the data-plane runs.

Instant shapes (the quorum runs' random steps, Jepsen's vocabulary; no end, a later step heals):
- crash: power loss of a node (the leader a third of the time), unsynced writes lost, possibly
  a torn last write; restart: a crashed node comes back; heal: every cut link restored;
  pause: SIGSTOP for a drawn time; shutdown: graceful stop (the leader resigns, KIP-595);
- halves, isolate, isolate-leader, majority (a voter majority against the minority, brokers on
  either side), bridge (one node sees both halves), one-way (a node can only send, or only
  receive);
- clock: a drawn node's clock steps forward or back by CLOCK_JUMP_MS (drawn); the skew stays
  (the quorum runs' `clock` step kind, weight 0 unless a run asks for it).

Clock shapes (instant, or spans healed by the opposite step; harness.sim.actors.skewed_clock):
- clock-jump-forward: a follower voter's clock jumps ahead: its fetch timeout is due at once, it
  starts an election (pre-vote first, KIP-996) sooner than any peer;
- clock-jump-back: a drawn node's clock jumps back: its clock holds, every timeout of it comes
  that much later (a follower times out late; a leader's check-quorum resigns late).
A clock never changes what a message says or when it arrives: safety must not depend on it.

Span shapes (the data-plane runs: applied at the fault's start, healed at its end):
- isolate-partition-leader: the partition leader cut from its followers for the first 60% of
  the fault (the ISR may shrink to the leader alone), then from everyone (controllers, brokers,
  clients): it loses leadership (Jepsen's 2013 Kafka case);
- leader-cut-from-followers(-only): the leader cut from the other brokers only;
- zombie-leader: the leader cut from every controller;
- random-halves, majorities-ring, bridge: partitions over controllers and brokers;
- isolate-controller-leader: the active controller cut from every controller and broker (the
  quorum elects another); with one abstract controller, the controller is down until a new one
  takes over after CONTROLLER_FAILOVER_MS (or the fault's end, if sooner);
- quorum-cut: every voter cut from every other (processes run, brokers reach them, no majority);
- metadata-quorum-down / quorum-down: a majority of the voters crashed (the active one first),
  or the abstract controller down, until the end;
- kill-leader / kill-partition-leader, kill-broker, kill-2-of-3: SIGKILL (page cache kept),
  restarted at the end; crash-controller-leader: power loss of the active controller;
- pause-leader / pause-partition-leader, pause-broker, pause-controller-leader: SIGSTOP until the
  end;
- unclean-crash-losing-unflushed-tail / leader-isolated-then-power-crash: the KIP-966 last-replica
  shape: the leader cut from its followers for the fault, then it loses power (its unflushed tail
  is gone) as the network heals, and restarts LAST_REPLICA_RESTART_MS later;
- cut-followers-then-kill-leader: the leader cut from its followers for the fault (longer than
  replica.lag.time.max.ms: the ISR shrinks to it), killed as the network heals, restarted
  KILLED_LEADER_RESTART_MS later: without unclean election the partition is offline until then;
- flapping: the leader cut from everyone and healed every FLAP_MS for the fault (shorter than
  the session and lag timeouts: the clients' view flaps, the ISR does not);
- power-crash-partition-leader, power-crash-broker, power-crash-majority: power loss (every
  unflushed byte gone) of the partition leader, of a drawn broker, or of a drawn majority of the
  brokers at once (the leader among them or not); restarted at the fault's end. Raft
  commits only what a majority fsynced, so a raft partition loses no acknowledged acks=all
  write to any of them (docs/replication.md); ISR does not fsync per write.

The study's shapes (harness.sim.faults.study_shapes) join the table under their names.
Two names for one shape (kill-leader, kill-partition-leader) are the two runs' vocabularies of
the same fault: the scenario matrix's names (SCENARIO_NEMESES) and `kraftlab sim cluster`'s
(CLUSTER_KINDS); both map to the same function.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.sim.faults.fault import Fault, Shape
from harness.sim.faults.study_shapes import STUDY_NEMESES, STUDY_SHAPES

CONTROLLER_FAILOVER_MS = 1000
LAST_REPLICA_RESTART_MS = 500
# Longer than broker.session.timeout (1 s in the data-plane runs) so the controller fences the
# dead leader and, if allowed, elects a follower uncleanly before the old leader comes back.
KILLED_LEADER_RESTART_MS = 2000
FLAP_MS = 300
CLOCK_JUMP_MS = (50, 1000)  # a few election timeouts of the quorum runs' drawn configs
LEADER_CRASH_PROBABILITY = 0.33  # the quorum runs crash the leader a third of the time


# -- instant shapes: the quorum runs' nemesis steps -------------------------------------------------


def crash(f: Fault) -> str:
    t = f.target
    up = [n for n in t.node_ids if t.is_up(n)]
    if not up:
        return "crash (none up)"
    leader = t.active_controller()
    # The leader is where the interesting states are.
    if leader is not None and leader in up and f.rng.random() < LEADER_CRASH_PROBABILITY:
        victim = leader
    else:
        victim = f.rng.choice(up)
    t.crash(victim)
    return f"crash {victim}"


def restart(f: Fault) -> str:
    t = f.target
    down = [n for n in t.node_ids if not t.is_up(n)]
    if not down:
        return "restart (none down)"
    node = f.rng.choice(down)
    t.restart(node)
    return f"restart {node}"


def heal(f: Fault) -> str:
    f.heal_network()
    return "heal"


def pause(f: Fault) -> str:
    t = f.target
    candidates = [n for n in t.node_ids if t.is_up(n) and not t.is_paused(n)]
    if not candidates:
        return "pause (none)"
    node = f.rng.choice(candidates)
    duration_ms = f.rng.randint(10, f.max_pause_ms)
    t.pause(node, duration_ms)
    return f"pause {node} {duration_ms}ms"


def shutdown(f: Fault) -> str:
    t = f.target
    up = [n for n in t.node_ids if t.is_up(n) and not t.is_paused(n)]
    if not up:
        return "shutdown (none up)"
    leader = t.active_controller()
    # Mostly the leader: a controlled shutdown is where EndQuorumEpoch matters (KIP-595).
    victim = leader if leader in up and f.rng.random() < 0.7 else f.rng.choice(up)
    t.shutdown(victim)
    return f"shutdown {victim}"


def halves(f: Fault) -> str:
    nodes = list(f.target.node_ids)
    f.rng.shuffle(nodes)
    cut = f.rng.randint(1, len(nodes) - 1)
    groups = [sorted(nodes[:cut]), sorted(nodes[cut:])]
    f.target.network.partition(groups)
    return f"partition halves {groups}"


def _isolate(f: Fault, lone: int | None, shape: str) -> str:
    nodes = list(f.target.node_ids)
    node = lone if lone is not None else f.rng.choice(nodes)
    groups = [[node], [n for n in nodes if n != node]]
    f.target.network.partition(groups)
    return f"partition {shape} {groups}"


def isolate(f: Fault) -> str:
    return _isolate(f, None, "isolate")


def isolate_leader(f: Fault) -> str:
    return _isolate(f, f.target.active_controller(), "isolate-leader")


def majority(f: Fault) -> str:
    t = f.target
    voters = list(t.controller_ids)
    f.rng.shuffle(voters)
    major = voters[: len(voters) // 2 + 1]
    minor = voters[len(voters) // 2 + 1 :]
    for n in t.node_ids:
        if n not in t.controller_ids:
            (major if f.rng.random() < 0.5 else minor).append(n)
    groups = [sorted(major), sorted(minor)]
    t.network.partition(groups)
    return f"partition majority {groups}"


def bridge(f: Fault) -> str:
    """One node keeps every link; the others split in two halves that cannot talk."""
    nodes = list(f.target.node_ids)
    f.rng.shuffle(nodes)
    middle, rest = nodes[0], nodes[1:]
    cut = max(1, len(rest) // 2)
    groups = [sorted(rest[:cut]), sorted(rest[cut:])]
    f.target.network.partition(groups)
    f.until(f.heal_network, "partition")
    return f"partition bridge {middle} {groups}"


def one_way(f: Fault) -> str:
    t = f.target
    nodes = list(t.node_ids)
    leader = t.active_controller()
    side = leader if leader is not None and f.rng.random() < 0.5 else None
    one = side if side is not None else f.rng.choice(nodes)
    others = [n for n in nodes if n != one]
    if f.rng.random() < 0.5:
        t.network.cut_one_way([one], others)
        return f"partition one-way {one} cannot send"
    t.network.cut_one_way(others, [one])
    return f"partition one-way {one} cannot receive"


# -- clock shapes --------------------------------------------------------------------------------


def _jump(f: Fault, node: int, delta_ms: int, shape: str) -> str:
    t = f.target
    if not t.jump_clock(node, delta_ms):
        return f"{shape} {node} (no clock of its own)"
    f.until(lambda: t.jump_clock(node, -delta_ms), "clock")
    return f"{shape} {node} {delta_ms:+d}ms"


def clock(f: Fault) -> str:
    t = f.target
    node = f.rng.choice(list(t.node_ids))
    delta_ms = f.rng.randint(*CLOCK_JUMP_MS) * f.rng.choice((1, -1))
    return _jump(f, node, delta_ms, "clock")


def clock_jump_forward(f: Fault) -> str:
    t = f.target
    leader = t.active_controller()
    followers = [n for n in t.controller_ids if n != leader and t.is_up(n)]
    if not followers:
        return "clock-jump-forward (no follower)"
    return _jump(f, f.rng.choice(followers), f.rng.randint(*CLOCK_JUMP_MS), "clock-jump-forward")


def clock_jump_back(f: Fault) -> str:
    node = f.rng.choice(list(f.target.node_ids))
    return _jump(f, node, -f.rng.randint(*CLOCK_JUMP_MS), "clock-jump-back")


# -- span shapes: the data-plane runs ---------------------------------------------------------------


def isolate_partition_leader(f: Fault) -> str:
    t = f.target
    leader = f.partition_leader()
    t.network.cut_between(leader, f.followers(leader))
    assert f.end_ms is not None
    everyone_ms = f.start_ms + (f.end_ms - f.start_ms) * 6 // 10

    def from_everyone() -> None:
        t.network.cut_between(leader, [*t.node_ids, *t.client_ids])

    f.at(everyone_ms, from_everyone)
    f.until(f.heal_network, "partition")
    return f"broker {leader}"


def leader_cut_from_followers(f: Fault) -> str:
    leader = f.partition_leader()
    f.target.network.cut_between(leader, f.followers(leader))
    f.until(f.heal_network, "partition")
    return f"broker {leader}"


def zombie_leader(f: Fault) -> str:
    leader = f.partition_leader()
    f.target.network.cut_between(leader, f.target.controller_ids)
    f.until(f.heal_network, "partition")
    return f"broker {leader}"


def random_halves(f: Fault) -> str:
    t = f.target
    nodes = list(t.node_ids)
    f.rng.shuffle(nodes)
    half = len(nodes) // 2
    for a in nodes[:half]:
        t.network.cut_between(a, nodes[half:])
    f.until(f.heal_network, "partition")
    return f"{sorted(nodes[:half])} | {sorted(nodes[half:])}"


def majorities_ring(f: Fault) -> str:
    t = f.target
    nodes = list(t.node_ids)
    f.rng.shuffle(nodes)
    n = len(nodes)
    k = (n // 2 + 1) // 2  # each node sees itself and k ring neighbours each side: a majority
    for i, a in enumerate(nodes):
        near = {nodes[(i + d) % n] for d in range(-k, k + 1)}
        t.network.cut_between(a, [b for b in nodes if b not in near])
    f.until(f.heal_network, "partition")
    return f"ring {nodes}"


def isolate_controller_leader(f: Fault) -> str:
    t = f.target
    if len(t.controller_ids) == 1:
        # One abstract controller: down until a new one takes over (the quorum's failover).
        t.metadata_quorum_down()
        assert f.end_ms is not None
        f.until(t.metadata_quorum_up, "controller-failover",
                min(f.end_ms, f.start_ms + CONTROLLER_FAILOVER_MS))
        return f"controller {t.controller_ids[0]}"
    active = t.active_controller()
    if active is not None:  # no active controller: nothing to isolate
        t.network.cut_between(active, [*t.controller_ids, *t.broker_ids])
    f.until(f.heal_network, "partition")
    return "no active controller" if active is None else f"voter {active}"


def quorum_cut(f: Fault) -> str:
    voters = list(f.target.controller_ids)
    for i, a in enumerate(voters):
        f.target.network.cut_between(a, voters[i + 1 :])
    f.until(f.heal_network, "partition")
    return "every voter from every voter"


def quorum_down(f: Fault) -> str:
    downed = f.target.metadata_quorum_down()
    f.until(f.target.metadata_quorum_up, "controller-down")
    return f"voters {sorted(downed)}"


def _kill(f: Fault, victims: list[int]) -> str:
    return f.stop_until_end(victims, f.target.kill, "kill")


def kill_leader(f: Fault) -> str:
    return _kill(f, [f.partition_leader()])


def kill_broker(f: Fault) -> str:
    return _kill(f, [f.rng.choice(list(f.target.broker_ids))])


def kill_two_of_three(f: Fault) -> str:
    leader = f.partition_leader()
    return _kill(f, [leader, f.rng.choice(f.followers(leader))])


def _power_crash(f: Fault, victims: list[int]) -> str:
    return f.stop_until_end(victims, f.target.crash, "crash-unflushed")


def power_crash_leader(f: Fault) -> str:
    return _power_crash(f, [f.partition_leader()])


def power_crash_broker(f: Fault) -> str:
    return _power_crash(f, [f.rng.choice(list(f.target.broker_ids))])


def power_crash_majority(f: Fault) -> str:
    brokers = list(f.target.broker_ids)
    f.rng.shuffle(brokers)
    return _power_crash(f, sorted(brokers[: len(brokers) // 2 + 1]))


def _pause_until_end(f: Fault, victim: int, who: str) -> str:
    f.target.pause(victim, None)
    f.until(lambda: f.target.resume(victim), "pause")
    return f"{who} {victim}"


def pause_leader(f: Fault) -> str:
    return _pause_until_end(f, f.partition_leader(), "broker")


def pause_broker(f: Fault) -> str:
    return _pause_until_end(f, f.rng.choice(list(f.target.broker_ids)), "broker")


def pause_controller_leader(f: Fault) -> str:
    active = f.target.active_controller()
    if active is None:
        return "no active controller"
    return _pause_until_end(f, active, "voter")


def crash_controller_leader(f: Fault) -> str:
    t = f.target
    active = t.active_controller()
    if active is None:
        return "no active controller"
    t.crash(active)
    f.until(lambda: t.restart(active), "crash")
    return f"voter {active}"


def isolated_then_power_crash(f: Fault) -> str:
    return _cut_followers_then(f, f.target.crash, "crash-unflushed", LAST_REPLICA_RESTART_MS)


def cut_followers_then_kill_leader(f: Fault) -> str:
    return _cut_followers_then(f, f.target.kill, "kill", KILLED_LEADER_RESTART_MS)


def _cut_followers_then(f: Fault, stop: Callable[[int], None], kind: str,
                        restart_after_ms: int) -> str:  # fmt: skip
    """The leader cut from its followers for the fault; at its end the network heals and the
    leader is stopped (`stop`: the target's kill or crash), restarted `restart_after_ms` later."""
    t = f.target
    leader = f.partition_leader()
    t.network.cut_between(leader, f.followers(leader))
    assert f.end_ms is not None
    f.until(f.heal_network, "partition")
    f.at(f.end_ms, stop, leader)
    f.until(lambda: t.restart(leader), kind, f.end_ms + restart_after_ms)
    return f"broker {leader}"


def flapping(f: Fault) -> str:
    t = f.target

    def cut_leader() -> None:
        t.network.cut_between(f.partition_leader(), [*t.node_ids, *t.client_ids])

    assert f.end_ms is not None
    at_ms, cut = f.start_ms, True
    while at_ms < f.end_ms:
        f.at(at_ms, cut_leader if cut else f.heal_network)
        cut = not cut
        at_ms += FLAP_MS
    f.until(f.heal_network, "partition-flapping")
    return "partition leader, every FLAP_MS"


_POWER = Shape("power", isolated_then_power_crash, LAST_REPLICA_RESTART_MS)

SHAPES: dict[str, Shape] = {
    # instant (the quorum runs' steps)
    "crash": Shape("crash", crash),
    "restart": Shape("restart", restart),
    "heal": Shape("heal", heal),
    "pause": Shape("pause", pause),
    "shutdown": Shape("shutdown", shutdown),
    "halves": Shape("partition", halves),
    "isolate": Shape("partition", isolate),
    "isolate-leader": Shape("partition", isolate_leader),
    "majority": Shape("partition", majority),
    "bridge": Shape("partition", bridge),
    "one-way": Shape("partition", one_way),
    "clock": Shape("clock", clock),
    "clock-jump-forward": Shape("clock", clock_jump_forward),
    "clock-jump-back": Shape("clock", clock_jump_back),
    # spans (the data-plane runs)
    "isolate-partition-leader": Shape("partition", isolate_partition_leader),
    "leader-cut-from-followers": Shape("partition", leader_cut_from_followers),
    "leader-cut-from-followers-only": Shape("partition", leader_cut_from_followers),
    "zombie-leader": Shape("partition", zombie_leader),
    "random-halves": Shape("partition", random_halves),
    "majorities-ring": Shape("partition", majorities_ring),
    "isolate-controller-leader": Shape("partition", isolate_controller_leader),
    "quorum-cut": Shape("partition", quorum_cut),
    "flapping": Shape("partition", flapping),
    "metadata-quorum-down": Shape("crash", quorum_down),
    "quorum-down": Shape("crash", quorum_down),
    "kill-leader": Shape("crash", kill_leader),
    "kill-partition-leader": Shape("crash", kill_leader),
    "kill-broker": Shape("crash", kill_broker),
    "kill-2-of-3": Shape("crash", kill_two_of_three),
    "power-crash-partition-leader": Shape("power", power_crash_leader),
    "power-crash-broker": Shape("power", power_crash_broker),
    "power-crash-majority": Shape("power", power_crash_majority),
    "crash-controller-leader": Shape("crash", crash_controller_leader),
    "pause-leader": Shape("pause", pause_leader),
    "pause-partition-leader": Shape("pause", pause_leader),
    "pause-broker": Shape("pause", pause_broker),
    "pause-controller-leader": Shape("pause", pause_controller_leader),
    "unclean-crash-losing-unflushed-tail": _POWER,
    "leader-isolated-then-power-crash": _POWER,
    "cut-followers-then-kill-leader": Shape(
        "crash", cut_followers_then_kill_leader, KILLED_LEADER_RESTART_MS
    ),
    **STUDY_SHAPES,
}

# The quorum runs' random step: a kind by weight (NemesisProfile), a partition shape uniformly.
# `clock` last, weight 0 by default: a zero weight at the end leaves every seed's draws as they were.
STEP_KINDS = ("crash", "restart", "partition", "heal", "pause", "clock")
QUORUM_PARTITIONS = ("halves", "isolate", "isolate-leader", "majority", "bridge", "one-way")

# The scenario matrix's nemeses (harness/results/schema.py lists them too): one shape per run.
SCENARIO_NEMESES = (
    "none", "isolate-partition-leader", "leader-cut-from-followers-only", "zombie-leader",
    "random-halves", "majorities-ring", "bridge", "isolate-controller-leader",
    "metadata-quorum-down", "kill-leader", "pause-leader", "kill-2-of-3",
    "unclean-crash-losing-unflushed-tail", "flapping", "cut-followers-then-kill-leader",
    *STUDY_NEMESES,
)

# `kraftlab sim cluster --nemesis`: kinds of shapes a random schedule draws from.
CLUSTER_KINDS: dict[str, tuple[str, ...]] = {
    "partition": (
        "isolate-partition-leader",
        "leader-cut-from-followers",
        "zombie-leader",
        "random-halves",
        "isolate-controller-leader",
        "quorum-cut",
    ),
    "crash": ("kill-partition-leader", "kill-broker", "crash-controller-leader", "quorum-down"),
    "pause": ("pause-partition-leader", "pause-broker", "pause-controller-leader"),
    "power": ("leader-isolated-then-power-crash",),
    # Power loss alone, of any broker, the partition leader or a majority at once (not in the
    # default: ISR loses acknowledged writes to it by design, fsyncing every 30 s).
    "power-loss": ("power-crash-partition-leader", "power-crash-broker", "power-crash-majority"),
}

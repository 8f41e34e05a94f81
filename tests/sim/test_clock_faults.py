"""Clock faults in the simulator: a node's clock jumps (harness.sim.actors.skewed_clock, the
nemesis shapes `clock`, `clock-jump-forward`, `clock-jump-back` of harness.sim.faults.shapes).

What a clock may change is *when* a node's timeouts fire, never what is safe:
- a follower whose clock jumps past its fetch timeout starts an election at once, at the very
  kernel millisecond of the jump; with pre-vote (KIP-996) the others, who still hear the leader,
  refuse it, so the leader and its epoch survive;
- a follower whose clock jumps back holds its clock: it still believes in the leader for the
  length of the jump and refuses pre-votes, so when the leader dies the failover is delayed by
  the jump (the other follower alone is no majority of three);
- seeded quorum runs with clock jumps among the nemesis steps find no violation of Raft safety
  or of linearizability, and stay deterministic.
Times below are simulated milliseconds (the kernel's), never the wall clock.
"""

from __future__ import annotations

import random

from harness.sim.actors.raft_node import RaftNode
from harness.sim.checks.invariants import SafetyChecker
from harness.sim.kernel.network import QUIET
from harness.sim.runs.simulation import SimConfig, Simulation
from harness.sim.runs.world import World
from quorum.raft.config import RaftConfig

CONFIG = RaftConfig(election_timeout_ms=200, fetch_timeout_ms=400,
                    election_backoff_max_ms=200, request_timeout_ms=200,
                    max_idle_interval_ms=50, flush_on_append=True)
VOTERS = (1, 2, 3)


def _world(seed: int = 7) -> World:
    rng = random.Random(seed)
    world = World(rng, QUIET)
    checker = SafetyChecker()
    for n in VOTERS:
        world.add(RaftNode(n, VOTERS, CONFIG, checker), "controller")
    for n in VOTERS:
        world.actors[n].start(0, rng.getrandbits(32))
        world.after(world.actors[n])
    return world


def _run_until(world: World, until_ms: int) -> None:
    q = world.queue
    while len(q) and (q.peek_time_ms() or 0) <= until_ms:
        at_ms, event = q.pop()
        assert world.dispatch(at_ms, event), event
    q.advance_to(until_ms)


def _leader(world: World) -> int:
    leader = world.active_controller()
    assert leader is not None
    return leader


def test_a_follower_whose_clock_jumps_forward_starts_an_election_at_once_and_is_refused() -> None:
    world = _world()
    _run_until(world, 2000)
    leader = _leader(world)
    epoch = world.actors[leader].epoch
    follower = min(n for n in VOTERS if n != leader)
    assert world.actors[follower].core.role_name == "follower"

    world.jump_clock(follower, CONFIG.fetch_timeout_ms + 100)
    _run_until(world, 2000)  # only what is due at the same kernel millisecond
    assert world.actors[follower].core.role_name == "prospective"  # KIP-996 pre-vote first

    _run_until(world, 3000)
    assert _leader(world) == leader and world.actors[leader].epoch == epoch  # refused: no disruption
    assert world.actors[follower].core.role_name == "follower"
    assert world.actors[follower].leader_id == leader


def test_without_the_jump_the_same_follower_stays_a_follower() -> None:
    world = _world()
    _run_until(world, 2000)
    leader = _leader(world)
    follower = min(n for n in VOTERS if n != leader)
    for at_ms in range(2001, 3001):
        _run_until(world, at_ms)
        assert world.actors[follower].core.role_name == "follower", at_ms


def _failover_ms(back_ms: int) -> int:
    """Kill the leader at 2000 ms, one follower's clock stepped back by `back_ms` just before;
    simulated ms until a new leader leads a higher epoch."""
    world = _world()
    _run_until(world, 2000)
    old = _leader(world)
    epoch = world.actors[old].epoch
    skewed = min(n for n in VOTERS if n != old)
    if back_ms:
        world.jump_clock(skewed, -back_ms)
    world.kill(old)
    for at_ms in range(2001, 2000 + back_ms + 5000, 10):
        _run_until(world, at_ms)
        leader = world.active_controller()
        if leader is not None and world.actors[leader].epoch > epoch:
            return at_ms - 2000
    raise AssertionError(f"no new leader within {back_ms + 5000} ms")


def test_a_follower_whose_clock_jumps_back_delays_the_failover_by_the_jump() -> None:
    in_step = _failover_ms(0)
    delayed = _failover_ms(3000)
    # In step: the fetch timeout, a pre-vote round and a vote (a few hundred ms).
    assert in_step < CONFIG.fetch_timeout_ms + 4 * CONFIG.election_timeout_ms
    # Held clock: the skewed follower refuses pre-votes until its clock passes its old reading
    # plus its fetch timeout; the other follower cannot win alone.
    assert delayed >= 3000 + CONFIG.fetch_timeout_ms - 2 * CONFIG.max_idle_interval_ms
    assert delayed - in_step >= 3000 - CONFIG.fetch_timeout_ms


def test_the_skew_survives_a_restart_and_the_clock_never_reads_backwards() -> None:
    world = _world()
    _run_until(world, 1000)
    node = world.actors[2]
    before = node.clock.local(world.queue.now_ms)
    world.jump_clock(2, -500)
    world.kill(2)
    world.restart(2)
    assert node.clock.local(world.queue.now_ms) == before  # held across the restart
    _run_until(world, 1600)
    assert node.clock.local(world.queue.now_ms) == 1100  # 1600 - 500: in step again, skewed


SEEDS = range(1, 31)


def test_seeded_quorum_runs_with_clock_jumps_find_no_violation() -> None:
    jumps = 0
    for seed in SEEDS:
        sim = Simulation(SimConfig(seed=seed, clock_weight=4, duration_ms=2000))
        result = sim.run()
        assert result.ok, (result.violation, result.config.replay_command())
        assert result.stats["history"] != "invalid"  # linearizable (a violation otherwise)
        jumps += sim.nemesis.counts.get("clock", 0)
    assert jumps >= len(SEEDS)  # the clock steps really ran


def test_a_seed_with_clock_jumps_replays_to_the_same_digest() -> None:
    config = SimConfig(seed=11, clock_weight=4, duration_ms=1500)
    assert Simulation(config).run().digest == Simulation(config).run().digest
    assert "--clock-weight 4" in config.replay_command()


def test_clock_weight_zero_leaves_a_seed_as_it_was() -> None:
    """The clock kind is last with weight 0: the draws of every existing seed are unchanged."""
    plain = Simulation(SimConfig(seed=5, duration_ms=1500)).run()
    zero = Simulation(SimConfig(seed=5, duration_ms=1500, clock_weight=0)).run()
    assert plain.digest == zero.digest
    assert "clock" not in Simulation(SimConfig(seed=5)).nemesis.counts


def test_a_clock_shape_on_a_process_without_its_own_clock_does_nothing() -> None:
    """The data-plane runs' brokers and abstract controller have no clock: the shape says so."""
    world = _world()

    class NoClock:
        node_id = 9

    world.actors[9] = NoClock()
    assert world.jump_clock(9, 500) is False
    assert world.jump_clock(1, 500) is True and world.actors[1].clock.offset_ms == 500

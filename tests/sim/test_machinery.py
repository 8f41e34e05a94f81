"""The simulator's clock, network and nemesis: deterministic ordering, seeded fate of messages,
partitions that cut exactly the links between groups, one table of fault shapes."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from harness.sim.faults.nemesis import Nemesis
from harness.sim.faults.shapes import (
    CLUSTER_KINDS,
    QUORUM_PARTITIONS,
    SCENARIO_NEMESES,
    SHAPES,
    STEP_KINDS,
)
from harness.sim.kernel.events import Call, EventQueue, NemesisStep, Snapshot
from harness.sim.kernel.network import NetworkProfile, SimNetwork


def test_events_pop_by_time_then_schedule_order() -> None:
    q = EventQueue()
    q.schedule(5, Snapshot(1))
    q.schedule(3, Snapshot(2))
    q.schedule(5, Snapshot(3))
    q.schedule(3, Snapshot(4))
    order = [q.pop() for _ in range(4)]
    assert order == [(3, Snapshot(2)), (3, Snapshot(4)), (5, Snapshot(1)), (5, Snapshot(3))]
    assert q.now_ms == 5


def test_scheduling_in_the_past_is_refused() -> None:
    q = EventQueue()
    q.schedule(10, NemesisStep())
    q.pop()
    with pytest.raises(ValueError, match="before now"):
        q.schedule(9, NemesisStep())


def test_partition_cuts_links_between_groups_only() -> None:
    net = SimNetwork(random.Random(1), NetworkProfile())
    net.partition([[1, 2], [3]])
    assert net.can_reach(1, 2) and net.can_reach(2, 1)
    assert not net.can_reach(1, 3) and not net.can_reach(3, 2)
    assert net.can_reach(4, 3) and net.can_reach(1, 4)  # in no group: a bridge keeps its links
    assert net.delays_ms(1, 3) == []
    net.heal()
    assert net.can_reach(1, 3) and not net.is_partitioned()


def test_message_fate_is_a_function_of_the_seed() -> None:
    profile = NetworkProfile(drop_probability=0.2, duplicate_probability=0.2, slow_probability=0.2)

    def fates(seed: int) -> list[list[int]]:
        net = SimNetwork(random.Random(seed), profile)
        return [net.delays_ms(1, 2) for _ in range(500)]

    first = fates(7)
    assert first == fates(7)
    assert first != fates(8)
    assert any(f == [] for f in first) and any(len(f) == 2 for f in first)
    delays = [d for f in first for d in f]
    assert max(delays) > profile.max_delay_ms  # some messages are slow: reordering


def test_faults_off_means_no_drop_no_duplicate() -> None:
    net = SimNetwork(
        random.Random(3), NetworkProfile(drop_probability=0.5, duplicate_probability=0.5)
    )
    net.faults_enabled = False
    assert all(len(net.delays_ms(1, 2)) == 1 for _ in range(200))


def test_calls_share_the_queue_and_refuse_the_past_too() -> None:
    q = EventQueue()
    ran: list[tuple[int, str]] = []
    q.call_at(4, lambda tag: ran.append((q.now_ms, tag)), "b")
    q.schedule(4, Snapshot(1))
    q.call_at(2, lambda tag: ran.append((q.now_ms, tag)), "a")
    kinds = []
    while q:
        _, event = q.pop()
        kinds.append(type(event).__name__)
        if isinstance(event, Call):
            event.fn(*event.args)
    assert kinds == ["Call", "Call", "Snapshot"] and ran == [(2, "a"), (4, "b")]
    assert q.events == 3
    with pytest.raises(ValueError, match="before now"):
        q.call_at(3, ran.append, "late")


def test_time_passes_only_over_an_empty_stretch() -> None:
    q = EventQueue()
    q.schedule(50, NemesisStep())
    q.advance_to(40)
    assert q.now_ms == 40
    with pytest.raises(ValueError, match="skip an event at 50 ms"):
        q.advance_to(60)


def test_cuts_added_a_node_at_a_time_are_symmetric_and_cumulative() -> None:
    net = SimNetwork(random.Random(1), NetworkProfile())
    net.cut_between(1, [2, 1])
    net.cut_between(3, [4])
    assert net.describe_cut() == [(1, 2), (2, 1), (3, 4), (4, 3)]
    assert net.can_reach(1, 3) and not net.can_reach(4, 3)


def test_every_run_names_shapes_of_the_one_table() -> None:
    named = {s for shapes in CLUSTER_KINDS.values() for s in shapes}
    named |= set(SCENARIO_NEMESES) - {"none"}
    named |= set(QUORUM_PARTITIONS) | (set(STEP_KINDS) - {"partition"})
    assert named <= set(SHAPES)
    # The two runs' names for one fault are one shape.
    assert SHAPES["kill-leader"] == SHAPES["kill-partition-leader"]
    assert SHAPES["unclean-crash-losing-unflushed-tail"] == (
        SHAPES["leader-isolated-then-power-crash"]
    )
    nemesis = Nemesis(SimpleNamespace(queue=EventQueue()), random.Random(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown nemesis 'meteor'"):
        nemesis.schedule("meteor", 0, 10)

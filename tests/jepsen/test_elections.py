"""Partition leader elections of a queue run (harness/check/elections.py): changes to a real
leader, not leader-epoch bumps, so a quorum-mode failover (fence at -1, then elect) counts once,
as in the simulation (harness/sim/checks/replicas.py `count_change`) and the nodes' metrics."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.check import elections as el
from harness.jepsen.workload_queue import QueueOptions, QueueWorkload

NO = el.NO_LEADER


def count(states: list[tuple[int, int]], quorum: bool, from_epoch: int | None = None) -> int:
    return el.count_elections(states, quorum_mode=quorum, from_epoch=from_epoch)


def test_a_quorum_failover_is_one_election_and_two_epoch_changes() -> None:
    seq = [(5, 1), (6, NO), (7, 2)]  # leader 1, fenced at 6, broker 2 elected at 7
    assert count(seq, quorum=True) == 1
    assert el.epoch_changes(dict(seq)) == 2  # what the old count reported


def test_an_isr_failover_is_one_election() -> None:
    assert count([(5, 1), (6, 2)], quorum=False) == 1


def test_quorum_reelection_of_the_fenced_leader_counts() -> None:
    # the same broker elected again after its fence: a change from -1 to a real leader
    assert count([(5, 1), (6, NO), (7, 1)], quorum=True) == 1


def test_a_partition_left_offline_had_no_election() -> None:
    assert count([(5, 1), (6, NO)], quorum=True) == 0
    assert count([(5, 1), (6, NO)], quorum=False) == 0
    assert count([(5, 1)], quorum=True) == 0


def test_two_quorum_failovers_and_an_offline_spell() -> None:
    seq = [(0, 1), (1, NO), (2, 2), (3, NO), (4, 3), (5, NO)]
    assert count(seq, quorum=True) == 2
    assert el.epoch_changes(dict(seq)) == 5


def test_states_before_the_run_are_not_counted() -> None:
    seq = [(1, 1), (2, NO), (3, 2), (4, NO), (5, 3)]
    assert count(seq, quorum=True, from_epoch=3) == 1
    assert el.epoch_changes(dict(seq), from_epoch=3) == 2


def test_gaps_are_filled_by_the_mode_rule() -> None:
    # quorum: the hidden states alternate through -1
    assert count([(5, 1), (7, 2)], quorum=True) == 1
    assert count([(5, 1), (9, 3)], quorum=True) == 2
    assert count([(5, NO), (8, 2)], quorum=True) == 2  # 2, -1, 2
    assert count([(5, 1), (8, NO)], quorum=True) == 1  # -1, x, -1
    # ISR: the hidden changes went straight to another replica
    assert count([(5, 1), (7, 3)], quorum=False) == 2
    assert count([(5, 1), (7, NO)], quorum=False) == 1


@st.composite
def quorum_history(draw: st.DrawFn) -> list[tuple[int, int]]:
    """A quorum-mode leader history: every change of a real leader goes through -1."""
    epoch = draw(st.integers(0, 50))
    leader = draw(st.sampled_from([NO, 1, 2, 3]))
    seq = [(epoch, leader)]
    for _ in range(draw(st.integers(0, 12))):
        epoch += 1
        leader = draw(st.sampled_from([1, 2, 3])) if leader == NO else NO
        seq.append((epoch, leader))
    return seq


@given(quorum_history(), st.data())
def test_quorum_count_is_the_sims_rule_whatever_states_were_missed(
    seq: list[tuple[int, int]], data: st.DataObject
) -> None:
    # the simulation's rule on the full history (each epoch step is a leader change): a
    # change to a real leader is an election
    expected = sum(1 for _, leader in seq[1:] if leader != NO)
    assert count(seq, quorum=True) == expected
    # any observation that kept the first and last state counts the same
    inner = data.draw(st.lists(st.sampled_from(seq[1:-1]), unique=True)) if len(seq) > 2 else []
    seen = [seq[0], *inner, seq[-1]] if len(seq) > 1 else seq
    assert count(seen, quorum=True) == expected


def _event(name: str, topic: str, partition: int, leader: int | None, epoch: int) -> str:
    return json.dumps({"event": name, "topic": topic, "partition": partition, "leader": leader,
                       "leader_epoch": epoch, "isr": [1, 2]})


def test_broker_logs_give_the_states_the_watcher_missed(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "broker-4.log").write_text("\n".join([
        _event("broker.partition_follower", "q", 0, 5, 3),
        _event("broker.partition_offline", "q", 0, None, 4),  # the watcher missed this one
        "not json at all",
        _event("broker.partition_leader", "other-topic", 0, 4, 9),
        json.dumps({"event": "broker.partition_leader", "topic": "q", "partition": "x"}),
    ]) + "\n")
    (logs / "broker-5.log").write_text(_event("broker.partition_leader", "q", 0, 5, 3) + "\n")
    (logs / "controller-1.log").write_text(_event("broker.partition_leader", "q", 0, 1, 7) + "\n")
    assert el.broker_log_states(logs, "q") == {0: {3: 5, 4: NO}}

    # ISR mode: the watcher saw 5 at epoch 3, then 6 at epoch 5: a gap read as two direct
    # elections; the brokers' logs show epoch 4 had no leader, so there was one.
    workload = QueueWorkload(QueueOptions(topic="q", partitions=1, acks="all"))
    workload.leader_epochs_start = {0: 3}
    workload.leader_states = {0: {3: 5, 5: 6}}
    assert workload.count_elections()["partition_leader_elections"] == 2
    assert workload.count_elections(logs) == {"partition_leader_elections": 1,
                                              "partition_leader_changes": 2}


def test_raft_counts_each_observed_epoch_with_a_leader() -> None:
    # Raft epochs also grow with failed candidacies: an epoch seen with a leader is an election,
    # an unseen one is not counted; the controller dropping a fenced leader (-1, same epoch
    # first seen with its leader) is no election.
    seq = [(3, 1), (7, 2), (8, NO), (9, 3)]
    assert el.count_elections(seq, quorum_mode=False, raft_mode=True) == 2
    assert el.count_elections([(3, 1), (3, NO)], quorum_mode=False, raft_mode=True) == 0
    assert el.count_elections(seq, quorum_mode=False, raft_mode=True, from_epoch=7) == 1

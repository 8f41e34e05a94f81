"""replication.mode=quorum: the same log and RPCs, but an offset commits on a majority of the
replicas (not the ISR), acks=all means a majority, min.insync.replicas does not apply; and the
leader choice the controller should make from (last epoch, LEO)."""

from __future__ import annotations

from partition.replica import ReplicaConfig, ReplicaPosition, choose_quorum_leader
from quorum.metadata.errors import Errors
from tests.replica.router import Cluster


def _quorum(**kw: object) -> ReplicaConfig:
    return ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode="quorum", **kw)  # type: ignore[arg-type]


def test_majority_commits_where_isr_mode_waits_for_the_laggard() -> None:
    for mode, expected_hw in (("quorum", 1), ("isr", 0)):
        c = Cluster(
            replicas=(1, 2, 3),
            config=ReplicaConfig(replica_fetch_wait_max_ms=0, replication_mode=mode),
        )
        r = c.produce("a", acks=-1)
        c.fetch(2)
        c.fetch(2)  # 2 of 3 hold offset 0; 3 (in the ISR) never fetched
        assert c.nodes[1].core.high_watermark == expected_hw, mode
        assert (r in c.responses) == (mode == "quorum")


def test_quorum_acks_all_ignores_min_insync_and_needs_a_majority() -> None:
    c = Cluster(replicas=(1, 2, 3, 4, 5), isr=(1,), config=_quorum(min_insync_replicas=3))
    r = c.produce("a", acks=-1)
    assert r not in c.responses  # no NOT_ENOUGH_REPLICAS: the ISR does not decide here
    c.fetch(2)
    c.fetch(2)
    assert r not in c.responses and c.nodes[1].core.high_watermark == 0  # 2 of 5
    c.fetch(3)
    c.fetch(3)
    assert c.responses[r].error is Errors.NONE and c.nodes[1].core.high_watermark == 1  # 3 of 5


def test_position_reports_last_epoch_and_leo() -> None:
    c = Cluster(replicas=(1, 2, 3), config=_quorum())
    c.produce("a", "b", acks=1)
    c.elect(1)
    c.produce("c", acks=1)
    assert c.nodes[1].core.position() == ReplicaPosition(1, 1, 3)
    c.fetch(2)
    assert c.nodes[2].core.position() == ReplicaPosition(2, 1, 3)
    assert c.nodes[3].core.position() == ReplicaPosition(3, -1, 0)


def test_choose_quorum_leader() -> None:
    replicas = (1, 2, 3)
    p = {r: ReplicaPosition(r, e, leo) for r, e, leo in ((1, 2, 10), (2, 3, 5), (3, 3, 7))}
    assert choose_quorum_leader(replicas, p.values()) == 3  # highest (last epoch, LEO)
    assert choose_quorum_leader(replicas, [p[1], p[2]]) == 2  # epoch beats length
    assert choose_quorum_leader(replicas, [p[1]]) is None  # no live majority: no leader
    tie = [ReplicaPosition(3, 1, 4), ReplicaPosition(2, 1, 4)]
    assert choose_quorum_leader((2, 3, 1), tie) == 2  # ties go to assignment order
    assert (
        choose_quorum_leader(replicas, [p[1], ReplicaPosition(9, 9, 99)]) is None
    )  # 9 is no replica

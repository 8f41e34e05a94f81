"""RaftConfig.spare_voter_linger_ms: an append is handed at once only to as many parked voters as
a commit needs besides the leader (one of two followers, two of four); the other voters' long
polls take it with the next append, or within the linger. Parked fetches are served in arrival
order, so with one write at a time the two followers of a three-voter quorum take turns: each
fetches every other append (two entries at a time), and per commit the leader answers and hears
from one follower instead of two (the "thrifty" optimisation of EPaxos, Moraru et al., SOSP 2013,
applied to pull replication). Nothing about what commits changes: only when a spare voter gets
its copy."""

from __future__ import annotations

import structlog

from quorum.raft.config import RaftConfig
from quorum.raft.log import OffsetAndEpoch
from quorum.raft.messages import FetchResponse
from tests.raft.cluster import Cluster
from tests.raft.test_hw_linger import fetch_answers, settled

LINGER_MS = 20


def config(**overrides: int) -> RaftConfig:
    values = {"hw_linger_ms": LINGER_MS, "spare_voter_linger_ms": LINGER_MS,
              "max_idle_interval_ms": 0} | overrides  # fmt: skip
    return RaftConfig(**values)


def answers_with_records(c: Cluster, since: int) -> list[tuple[int, FetchResponse]]:
    return [(to, a) for to, a in fetch_answers(c, since) if a.records]


def test_sequential_commits_alternate_between_the_two_followers() -> None:
    c, leader = settled(config())
    followers = sorted(n for n in c.nodes if n != leader)
    mark = len(c.effect_log)
    results = [c.commit(leader, b"r%d" % i) for i in range(10)]
    answers = answers_with_records(c, mark)
    # One answer with records per commit, not one per follower.
    assert len(answers) == len(results)
    # Turns: no follower is answered twice in a row.
    order = [to for to, _ in answers]
    assert all(a != b for a, b in zip(order, order[1:], strict=False))
    assert set(order) == set(followers)
    # After the first, every answer carries the follower's missed append and the new one.
    for to, answer in answers[2:]:
        assert len(answer.records) == 2, (to, answer.fetch_offset)
    # And every record reached every follower's log in order.
    c.advance(2 * LINGER_MS)
    last = results[-1].last_offset
    for f in followers:
        node = c.nodes[f]
        assert [node.committed[r.last_offset][1] for r in results] == [b"r%d" % i for i in range(10)]
        assert node.core.high_watermark > last


def test_an_idle_spare_voter_gets_the_records_within_the_linger() -> None:
    c, leader = settled(config())
    result = c.commit(leader, b"a")
    committed_at = c.now
    followers = [c.nodes[n] for n in c.nodes if n != leader]
    while any(f.log.end_offset <= result.last_offset for f in followers):
        c.advance(1)
    assert c.now - committed_at <= LINGER_MS + 2 * c.latency_ms


def test_a_silent_eager_follower_delays_a_commit_by_the_linger_at_most() -> None:
    """The follower handed the append does not answer (its link is cut): the spare voter takes
    the records when its linger ends and its acknowledgement commits them."""
    c, leader = settled(config())
    c.commit(leader, b"warm")  # one turn taken: the next append goes to the other follower
    mark = len(c.effect_log)
    first = c.propose(leader, b"x")
    c.advance(0)
    eager = [to for to, _ in answers_with_records(c, mark)]
    assert len(eager) == 1
    c.cut |= {(eager[0], leader), (leader, eager[0])}
    proposed_at = c.now
    while c.nodes[leader].core.high_watermark <= first.last_offset:
        c.advance(1)
        assert c.now - proposed_at <= LINGER_MS + 4 * c.latency_ms + 2
    spare = next(n for n in c.nodes if n not in (leader, eager[0]))
    c.advance(2 * LINGER_MS)  # the spare learns the HW with the linger too
    assert c.nodes[spare].committed[first.last_offset][1] == b"x"


def test_five_voters_hand_each_append_to_two_followers_at_once() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    c = Cluster(voters=5, config=config(), seed=5)
    leader = c.wait_for_leader().node_id
    c.advance(2 * LINGER_MS + 1000)
    mark = len(c.effect_log)
    c.propose(leader, b"y")
    c.advance(0)
    assert len(answers_with_records(c, mark)) == 2  # majority 3: the leader and two followers


def test_observers_are_never_spare() -> None:
    """Brokers serve metadata to clients: they take every append at once."""
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
    c = Cluster(config=config(), seed=3, observers=(10,))
    leader = c.wait_for_leader().node_id
    c.advance(2 * 500)
    for i in range(4):
        mark = len(c.effect_log)
        c.propose(leader, b"o%d" % i)
        c.advance(0)
        answered = [to for to, _ in answers_with_records(c, mark)]
        assert 10 in answered
        assert len([to for to in answered if to != 10]) == 1
        c.advance(10)


def test_without_it_every_parked_voter_is_answered_at_once() -> None:
    """Kafka's behaviour, the core's default."""
    c, leader = settled(config(spare_voter_linger_ms=0))
    mark = len(c.effect_log)
    c.propose(leader, b"z")
    c.advance(0)
    assert len(answers_with_records(c, mark)) == 2


def test_a_snapshot_deleting_the_prefix_answers_a_spare_waiting_below_it_first() -> None:
    """A spare voter's long poll can wait below the log end; when a snapshot lets the leader
    delete the prefix past it, the spare takes its records first (while they are in the log),
    then follows on from the new log start, and the leader never reads below its log."""
    c, leader = settled(config(snapshot_retention_entries=0))
    node = c.nodes[leader]
    results = [c.commit(leader, b"s%d" % i) for i in range(3)]
    ls = node.core._member.qs.leader
    assert ls is not None
    behind = [p for p in ls.parked if p.request.fetch_offset < node.log.end_offset]
    assert len(behind) == 1  # the spare, one append behind
    spare = behind[0].src
    snap = OffsetAndEpoch(node.core.high_watermark, node.core.epoch)
    node.log.write_snapshot(snap, b"image")
    mark = len(c.effect_log)
    c.run(node, node.core.snapshot_taken(snap, c.now))
    assert node.log.start_offset == snap.offset
    sent = [(to, a) for to, a in fetch_answers(c, mark) if to == spare]
    assert len(sent) == 1 and sent[0][1].records  # its records, read before the deletion
    c.commit(leader, b"after")
    c.advance(3 * LINGER_MS)
    assert c.nodes[spare].committed[results[-1].last_offset][1] == b"s2"
    assert c.nodes[spare].log.end_offset == node.log.end_offset

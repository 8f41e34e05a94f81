"""Elections among a raft partition's replicas, with no controller anywhere: the first leader, a
leader killed (its connections closed, or silently), a leader cut off by the network, a
controlled shutdown, and the describe view."""

from __future__ import annotations

import pytest
import structlog

from partition.log import batch as rb
from partition.raft import MIN_INSYNC_REPLICAS_NOTE
from partition.replica import FetchResponse
from quorum import codec
from quorum.metadata.errors import Errors
from quorum.raft.messages import LeaderChangeRecord
from tests.raftpart.router import Router

ELECTION_TIMEOUT_MS = 1000  # RaftConfig defaults (controller.quorum.*)
FETCH_TIMEOUT_MS = 2000


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def new_leader_after(r: Router, old: int, within_ms: int) -> int:
    """Run until one replica other than `old` leads and has committed in its epoch; the time."""
    start = r.now_ms

    def elected() -> bool:
        leaders = [x for x in r.leaders() if x.node_id != old]
        return len(leaders) == 1 and leaders[0].core.high_watermark > 0

    r.run_until(elected, within_ms, "a new leader")
    return r.now_ms - start


def data_batches(response: FetchResponse) -> list[list[bytes]]:
    """What a consumer delivers: records of non-control batches (control batches skipped)."""
    data = response.records
    return [[rec.value or b"" for rec in rb.decode_records(data, h)]
            for h in rb.iter_headers(data) if not h.is_control]  # fmt: skip


def test_replicas_elect_a_leader_among_themselves() -> None:
    r = Router(seed=3)
    leader = r.wait_for_leader(within_ms=2 * ELECTION_TIMEOUT_MS + 100)
    node, epoch = leader.node_id, leader.core.leader_epoch
    assert epoch == 1
    for broker in r.brokers.values():
        replica = broker.replicas[r.keys[0]]
        assert (replica.core.leader_id, replica.core.leader_epoch) == (node, epoch)
        assert replica.core.is_leader == (broker.node_id == node)
    # The epoch opens with the new leader's LeaderChange control batch, its epoch marker.
    first = leader.store.read(0, 1 << 20)[0]
    assert (first.offset, first.epoch, first.control) == (0, 1, True)
    record = codec.decode(first.data)
    assert isinstance(record, LeaderChangeRecord)
    assert (record.leader_id, record.leader_epoch, record.voters) == (node, 1, (1, 2, 3))
    assert r.commit("a", "b").error is Errors.NONE
    fetched = r.consume(0)
    assert fetched is not None and fetched.error is Errors.NONE
    headers = list(rb.iter_headers(fetched.records))
    assert [h.is_control for h in headers] == [True, False]  # consumers skip the first
    assert data_batches(fetched) == [[b"a", b"b"]]


@pytest.mark.parametrize("seed", range(5))
def test_a_killed_leader_is_replaced_at_once_when_its_connections_close(seed: int) -> None:
    r = Router(seed=seed)
    old = r.wait_for_leader().node_id
    r.commit("before")
    r.advance(300)
    r.kill(old)  # kill -9: the peers' connections to it close
    # The followers start a pre-vote at once (PeerUnreachable), no fetch timeout, no controller.
    assert new_leader_after(r, old, within_ms=ELECTION_TIMEOUT_MS) < ELECTION_TIMEOUT_MS // 2
    assert r.commit("after").error is Errors.NONE


@pytest.mark.parametrize("seed", range(5))
def test_a_silently_dead_leader_is_replaced_after_a_refused_fetch(seed: int) -> None:
    r = Router(seed=seed)
    old = r.wait_for_leader().node_id
    r.advance(300)
    r.kill(old, connections_closed=False)
    # A follower's fetch is re-sent after fetch_retry_ms (550) and refused: pre-vote at once.
    assert new_leader_after(r, old, within_ms=ELECTION_TIMEOUT_MS) < ELECTION_TIMEOUT_MS


@pytest.mark.parametrize("seed", range(5))
def test_a_leader_cut_from_its_followers_is_replaced_and_resigns(seed: int) -> None:
    r = Router(seed=seed)
    old = r.wait_for_leader()
    r.advance(300)
    r.isolate(old.node_id)
    waiting = r.produce("stranded")  # acks=all on the cut-off leader
    took = new_leader_after(
        r, old.node_id, within_ms=FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS
    )
    assert took <= FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS
    assert r.commit("majority side").error is Errors.NONE
    # Check-quorum: no fetch from a majority for fetch.timeout * 1.5, the old leader resigns
    # and its waiting produce fails (indeterminate for the producer: retriable).
    r.advance(int(FETCH_TIMEOUT_MS * 1.5))
    assert not old.core.is_leader
    answer = r.responses[waiting]
    assert answer.error is Errors.NOT_LEADER_OR_FOLLOWER and answer.error.retriable
    r.heal()
    r.advance(2 * FETCH_TIMEOUT_MS)
    leader = r.leader()
    assert old.core.leader_id == leader.node_id
    assert old.core.high_watermark == leader.core.high_watermark


def test_controlled_shutdown_hands_over_without_a_timeout() -> None:
    r = Router(seed=1)
    old = r.wait_for_leader()
    r.advance(300)
    r.resign(old.node_id)
    assert not old.core.is_leader
    assert new_leader_after(r, old.node_id, within_ms=200) < 200


def test_describe_shows_voters_roles_and_lag() -> None:
    r = Router(seed=2)
    leader = r.wait_for_leader()
    node = leader.node_id
    behind, other = [b for b in r.brokers if b != node]
    r.commit("a")
    r.advance(100)
    r.kill(behind, connections_closed=False)
    for i in range(3):
        r.commit(f"b{i}")
    r.advance(FETCH_TIMEOUT_MS + 100)
    status = leader.core.status()
    assert (status.role, status.leader_id, status.leader_epoch) == ("leader", node, 1)
    assert status.acks_all_needs == 2 and status.note == MIN_INSYNC_REPLICAS_NOTE
    rows = {v.node_id: v for v in status.voters}
    assert (rows[node].role, rows[node].lag) == ("leader", 0)
    assert (rows[other].role, rows[other].lag) == ("follower", 0)
    assert (rows[behind].role, rows[behind].lag) == ("unreachable", 3)  # three batches behind
    assert status.high_watermark == status.log_end_offset == 5
    follower = r.replica(other).core.status()
    assert (follower.role, follower.leader_id) == ("follower", node)
    assert {v.node_id: v.role for v in follower.voters} == {
        node: "leader", other: "follower", behind: "unknown"}  # fmt: skip

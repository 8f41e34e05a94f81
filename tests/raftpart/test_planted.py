"""Planted bugs the invariant checker must catch: counting an unflushed append toward the majority.

- Followers acknowledge unflushed appends: RaftConfig(flush_on_append=False), so a follower's
  next Fetch reports a log end the disk may not hold.
- The leader counts its own unflushed appends: a driver that drops the leader's FlushLog (the
  router's `drop_flush_log`), the very mistake partition/raft/effects.py's rule 1 warns of.

Each has a pinned scenario (two power faults of three: the acked copy that was only in a page
cache is lost, the other copy's broker dies, and the remaining majority elects a log without the
write), run against the correct code too, where nothing is lost; and the chaos sweep must find
each within a few seeds.
"""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from partition.raft import RaftPartitionConfig, data_partition_raft_config
from quorum.metadata.errors import Errors
from quorum.raft.errors import InvariantViolation
from tests.raftpart import chaos
from tests.raftpart.checker import Violation
from tests.raftpart.router import Router

FOLLOWERS_ACK_UNFLUSHED = RaftPartitionConfig(data_partition_raft_config(flush_on_append=False))


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def lose_the_follower_copy(config: RaftPartitionConfig) -> Router:
    """Leader A and follower B commit a write while C is cut off; B loses power, A dies, and B
    (restarted) and C elect a leader between them."""
    r = Router(seed=1, config=config)
    a = r.wait_for_leader().node_id
    b, c = [n for n in r.brokers if n != a]
    r.advance(100)
    r.isolate(c)
    request = r.produce("precious")
    r.run_until(lambda: request in r.responses, 1000, "the acks=all answer")
    assert r.responses[request].error is Errors.NONE
    r.power_loss(b)
    r.kill(a)
    r.heal()
    r.restart(b)
    r.run_until(lambda: any(x.core.high_watermark > 2 for x in r.leaders()), 10_000,
                "a leader of B and C with a commit of its own epoch")  # fmt: skip
    return r


def lose_the_leader_copy(drop_flush_log: bool) -> Router:
    """Leader A and follower C commit a write while B is cut off; A loses power, C dies, and A
    (restarted) and B elect a leader between them."""
    r = Router(seed=1, drop_flush_log=drop_flush_log)
    a = r.wait_for_leader().node_id
    b, c = [n for n in r.brokers if n != a]
    r.advance(100)
    r.isolate(b)
    request = r.produce("precious")
    r.run_until(lambda: request in r.responses, 1000, "the acks=all answer")
    assert r.responses[request].error is Errors.NONE
    r.power_loss(a)
    r.kill(c)
    r.heal()
    r.restart(a)
    r.run_until(lambda: any(x.core.high_watermark > 2 for x in r.leaders()), 10_000,
                "a leader of A and B with a commit of its own epoch")  # fmt: skip
    return r


def test_followers_acknowledging_unflushed_appends_lose_an_acked_write() -> None:
    with pytest.raises(Violation) as caught:
        lose_the_follower_copy(FOLLOWERS_ACK_UNFLUSHED)
    assert caught.value.name == "divergence-below-hw"


def test_with_follower_flushes_the_same_faults_lose_nothing() -> None:
    r = lose_the_follower_copy(RaftPartitionConfig())
    r.checker.check_acked_present(r.leader())
    assert not r.checker.violations


def test_a_leader_counting_its_unflushed_append_loses_an_acked_write() -> None:
    with pytest.raises(Violation) as caught:
        lose_the_leader_copy(drop_flush_log=True)
    assert caught.value.name == "divergence-below-hw"


def test_with_the_leader_flush_the_same_faults_lose_nothing() -> None:
    r = lose_the_leader_copy(drop_flush_log=False)
    r.checker.check_acked_present(r.leader())
    assert not r.checker.violations


@pytest.mark.parametrize(
    "bug",
    [{"config": FOLLOWERS_ACK_UNFLUSHED}, {"drop_flush_log": True}],
    ids=["follower", "leader"],
)
def test_the_chaos_sweep_finds_each_planted_bug(bug: dict[str, Any]) -> None:
    for seed in range(30):
        try:
            chaos.run(seed, **bug)
        except (Violation, InvariantViolation):
            return  # the checker, or the Raft core's own guard (truncation below the HW)
    pytest.fail("no seed of 30 caught the planted bug")

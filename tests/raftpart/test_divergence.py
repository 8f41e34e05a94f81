"""Diverging-epoch truncation (KIP-595 Fetch, after KIP-101/279/320): a deposed leader's
uncommitted tail is cut exactly where the new leader's log leaves its epoch, never below the
HW, and its producer state follows."""

from __future__ import annotations

import pytest
import structlog

from partition.log import batch as rb
from quorum.metadata.errors import Errors
from quorum.raft.effects import TruncateLog
from quorum.raft.log import OffsetAndEpoch
from tests.raftpart.router import Replica, Router


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


def log_of(replica: Replica) -> list[tuple[int, int, bool, list[bytes]]]:
    """(base offset, epoch, control, values) of every batch."""
    out = []
    for h in replica.plog.batch_headers(0):
        data = replica.plog.read(h.base_offset, 1)
        values = (
            []
            if h.is_control
            else [r.value or b"" for r in rb.decode_records(data, rb.read_header(data))]
        )
        out.append((h.base_offset, h.partition_leader_epoch, h.is_control, values))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_a_deposed_leaders_tail_is_truncated_at_the_epoch_boundary(seed: int) -> None:
    r = Router(seed=seed)
    old = r.wait_for_leader()
    assert r.commit("committed").error is Errors.NONE  # offset 1, epoch 1
    r.advance(100)
    r.isolate(old.node_id)
    for value in ("lost-1", "lost-2"):  # acks=1: answered by the old leader alone
        assert r.responses[r.produce(value, acks=1)].error is Errors.NONE
    assert old.store.end_offset == 4 and old.core.high_watermark == 2
    others = [b.replicas[r.keys[0]] for b in r.brokers.values() if b.node_id != old.node_id]
    r.run_until(lambda: any(x.core.is_leader for x in others), 5000, "a majority-side leader")
    new = next(x for x in others if x.core.is_leader)
    epoch = new.core.leader_epoch  # 2, or more after a split vote
    assert epoch >= 2
    for value in ("new-1", "new-2", "new-3"):
        request = r.produce(value, to=new.node_id)
        r.run_until(lambda request=request: request in r.responses, 1000, value)
    # Epoch 1 ends at offset 2 on the new leader (its LeaderChange batch opens its epoch there).
    assert new.store.end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)
    r.heal()
    r.advance(4000)
    truncations = [e for node, key, effects in r.effect_log if node == old.node_id
                   for e in effects if isinstance(e, TruncateLog)]  # fmt: skip
    assert truncations == [TruncateLog(2)]  # once, exactly at the boundary, above the HW of 2
    assert log_of(old) == log_of(new)
    assert [v for _, _, control, v in log_of(old) if not control] == [
        [b"committed"], [b"new-1"], [b"new-2"], [b"new-3"]]  # fmt: skip
    assert [(o, e) for o, e, _, _ in log_of(old)] == [(0, 1), (1, 1)] + [
        (o, epoch) for o in range(2, 6)
    ]
    assert old.core.high_watermark == new.core.high_watermark == 6


def test_two_deposed_leaders_with_tails_of_different_epochs_converge() -> None:
    r = Router(brokers=(1, 2, 3, 4, 5), seed=4)
    first = r.wait_for_leader()
    assert r.commit("base").error is Errors.NONE
    r.advance(100)
    a = first.node_id
    # The epoch-1 leader writes a tail only it has, then loses its followers.
    r.isolate(a)
    r.produce("a-tail-1", acks=1)
    r.produce("a-tail-2", acks=1)
    others = [b.replicas[r.keys[0]] for b in r.brokers.values() if b.node_id != first.node_id]
    r.run_until(lambda: any(x.core.is_leader for x in others), 5000, "an epoch-2 leader")
    second = next(x for x in others if x.core.is_leader)
    # The epoch-2 leader writes its own tail, and a majority moves on without it too.
    b = second.node_id
    r.isolate(b)
    r.produce("b-tail", acks=1, to=b)
    rest = [x for x in others if x is not second]
    r.run_until(lambda: any(x.core.is_leader and x.core.leader_epoch > 2 for x in rest), 5000,
                "a later leader")  # fmt: skip
    r.heal()
    r.advance(6000)
    truncated = {node for node, _, effects in r.effect_log
                 if any(isinstance(e, TruncateLog) for e in effects)}  # fmt: skip
    assert {a, b} <= truncated  # each cut its own tail
    final = r.leader()
    assert final.core.leader_epoch > 2
    request = r.produce("after")
    r.run_until(lambda: request in r.responses, 1000, "a commit after the heal")
    r.advance(1000)
    expected = log_of(final)
    for broker in r.brokers.values():
        assert log_of(broker.replicas[r.keys[0]]) == expected
    values = [v for _, _, control, v in expected if not control]
    assert [b"base"] in values and [b"after"] in values
    assert not any(v in ([b"a-tail-1"], [b"a-tail-2"], [b"b-tail"]) for v in values)

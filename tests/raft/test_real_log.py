"""The Raft core on the project's real log (partition.raft.log.RaftLogStore over partition/log's
SimStorage) instead of the test MemLog: checks that the two sides of the RaftLog contract agree
(epoch lookups, reads at the log end, truncation, snapshot install and prefix deletion)."""

from __future__ import annotations

from partition.log.storage import SimStorage
from partition.raft.log import RaftLogStore
from quorum.raft.config import RaftConfig
from quorum.raft.effects import ElectionState
from quorum.raft.log import Entry, OffsetAndEpoch
from tests.raft.cluster import Cluster


def real_log(nid: int) -> RaftLogStore:
    return RaftLogStore.open(SimStorage(), f"/data/{nid}")


def entries(log: RaftLogStore) -> list[tuple[int, int, bytes]]:
    return [(e.offset, e.epoch, e.data) for e in log.read(log.start_offset, 1 << 30)]


def test_replication_and_leader_change_on_the_real_log() -> None:
    c = Cluster(log_factory=real_log)
    first = c.wait_for_leader()
    first_epoch = first.core.epoch
    for i in range(20):
        c.commit(first.node_id, b"a%d" % i)
    c.run(first, first.core.resign(c.now))
    second = c.wait_for_leader(within_ms=3000)
    assert second is not first and second.core.epoch == first_epoch + 1
    for i in range(20):
        c.commit(second.node_id, b"b%d" % i)
    c.advance(100)
    expected = entries(second.log)
    assert [d for _, _, d in expected if not d.startswith(b"\xc7")][-1] == b"b19"
    for n in c.nodes.values():
        assert entries(n.log) == expected
        assert n.log.end_offset_for_epoch(first_epoch).epoch == first_epoch


def test_divergent_tail_is_truncated_on_the_real_log() -> None:
    def seeded(nid: int) -> RaftLogStore:
        log = real_log(nid)
        epochs = (1, 1, 2) if nid == 1 else (1, 1, 3, 3)
        # Same (offset, epoch), same data (log matching); only node 1 holds the epoch-2 entry.
        log.append(
            [Entry(i, e, b"n%d-%d" % (nid if e == 2 else 0, i)) for i, e in enumerate(epochs)]
        )
        log.flush()
        return log

    c = Cluster(log_factory=seeded)
    for nid, node in c.nodes.items():
        node.persisted = ElectionState(3, leader_id=2) if nid != 1 else ElectionState(2)
        c.restart(nid)
    leader = c.wait_for_leader()
    c.commit(leader.node_id, b"z")
    c.advance(100)
    expected = entries(leader.log)
    assert expected[2][1] == 3
    for n in c.nodes.values():
        assert entries(n.log) == expected


def test_snapshot_fetch_on_the_real_log() -> None:
    config = RaftConfig(
        snapshot_chunk_bytes=5, snapshot_retention_entries=0, max_idle_interval_ms=0
    )
    c = Cluster(config=config, log_factory=real_log)
    leader = c.wait_for_leader()
    lagging = next(n for n in c.nodes.values() if n is not leader)
    lagging.up = False
    for i in range(10):
        c.commit(leader.node_id, b"v%d" % i)
    snap = OffsetAndEpoch(leader.core.high_watermark, leader.core.epoch)
    for n in c.nodes.values():
        if n.up:
            n.log.write_snapshot(snap, b"image-bytes-0123456789")
            c.run(n, n.core.snapshot_taken(snap, c.now))
    assert leader.log.start_offset == snap.offset
    lagging = c.restart(lagging.node_id)  # same log, new core: it fetches at once
    c.advance(300)
    assert lagging.installed == [snap]
    assert lagging.log.read_snapshot(snap, 0, 100) == b"image-bytes-0123456789"
    c.commit(leader.node_id, b"after")
    c.advance(50)
    assert entries(lagging.log) == entries(leader.log)

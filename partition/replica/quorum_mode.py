"""Leader choice for `replication.mode=quorum` (DESIGN.md): the replica with the highest
(last epoch, LEO) among a live majority of the replicas, or none without a live majority.

This is the Raft vote rule (a candidate's log is at least as up to date as a majority's, Raft
thesis 3.6.1) applied by the controller instead of by votes: every offset committed in quorum mode
is held by a majority of the replicas, any live majority intersects it, so the most up-to-date
live replica holds every committed offset. The controller (quorum/) cannot import partition/
(DESIGN.md), so it gets the positions as ReplicaPosition values (from the replicas' reports) and
this pure function is the rule it should apply; see docs/replication.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from partition.replica.messages import ReplicaPosition


def choose_quorum_leader(replicas: tuple[int, ...], live: Iterable[ReplicaPosition]) -> int | None:
    """The new leader, or None when fewer than a majority of `replicas` are live. Ties on
    (last epoch, LEO) go to the earlier replica in assignment order (the preferred leader)."""
    positions = {p.replica_id: p for p in live if p.replica_id in replicas}
    if len(positions) < len(replicas) // 2 + 1:
        return None
    order = {r: i for i, r in enumerate(replicas)}
    best = max(
        positions.values(), key=lambda p: (p.last_epoch, p.log_end_offset, -order[p.replica_id])
    )
    return best.replica_id

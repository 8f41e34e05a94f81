"""The describe view of a raft partition replica: what `kraftlab topic describe`, the admin API,
`/metrics` and the simulator's checks show (leader, epoch, HW, voters with their roles and lag),
built from RaftCore.status() (Kafka's DescribeQuorum answer for this partition's group).

Only the leader knows every voter's position (from their fetches). A follower shows itself and
names the leader; the other voters are "unknown" there. Voter roles as the leader sees them:
"leader"; "follower" (fetched within controller.quorum.fetch.timeout.ms); "unreachable" (no fetch
for that long: it no longer counts toward check-quorum); "unknown" (no fetch yet in this epoch).
`lag` is records behind the leader's log end offset.

The in-sync voters (`in_sync_voters`: what a raft partition's leader reports to the controller
as its ISR, and the admin API shows) are the leader and the voters that fetched within the fetch
timeout; a voter with no fetch yet in this epoch counts while the epoch is younger than that
timeout (the leader's check-quorum gives it that long too, quorum/raft/leader.py), so an
election leaves no transient under-replicated ISR.

Who leads, in a Metadata answer (`metadata_leader`): the image's leader, unless the broker's own
replica knows a newer Raft epoch with a leader (or the same epoch, where the image names
nobody); so with every controller down, a broker still sends clients to the new leader, with the
epoch they must present (KIP-320).

min.insync.replicas does not apply to raft partitions: acks=all waits for a majority of the
voters (`acks_all_needs`), whatever min.insync.replicas says (MIN_INSYNC_REPLICAS_NOTE).
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.raft.core import QuorumStatus

__all__ = [
    "MIN_INSYNC_REPLICAS_NOTE",
    "RaftPartitionStatus",
    "VoterStatus",
    "describe",
    "in_sync_voters",
    "metadata_leader",
]

MIN_INSYNC_REPLICAS_NOTE = (
    "min.insync.replicas does not apply: acks=all waits for a majority of the voters"
)
NO_LEADER = -1
# Voter roles that count as in sync: fetched within the fetch timeout.
LIVE_ROLES = frozenset({"leader", "follower"})


@dataclass(frozen=True, slots=True)
class VoterStatus:
    node_id: int
    role: str  # "leader" | "follower" | "unreachable" | "unknown", or this replica's own role
    log_end_offset: int  # -1: unknown
    lag: int | None  # records behind the leader's log end offset; None: unknown
    last_fetch_ms: int | None  # core time of its last fetch (leader's view)
    last_caught_up_ms: int | None


@dataclass(frozen=True, slots=True)
class RaftPartitionStatus:
    topic_id: str
    partition: int
    node_id: int
    role: str  # this replica's Raft role: leader, follower, candidate, prospective, voted, ...
    leader_id: int  # NO_LEADER (-1) when unknown
    leader_epoch: int
    voted_id: int | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    voters: tuple[VoterStatus, ...]
    acks_all_needs: int  # voters (the leader included) that must hold a batch for acks=all
    replication_mode: str = "raft"
    note: str = MIN_INSYNC_REPLICAS_NOTE


def describe(
    status: QuorumStatus,
    topic_id: str,
    partition: int,
    log_start_offset: int,
    fetch_timeout_ms: int,
    now_ms: int,
) -> RaftPartitionStatus:
    """The describe view from the Raft core's status (times are the core's `now_ms`)."""
    leader = status.leader_id if status.leader_id is not None else NO_LEADER
    rows = {r.node_id: r for r in status.replicas if r.is_voter}
    voters: list[VoterStatus] = []
    for v in status.voters:
        row = rows.get(v)
        if v == status.node_id:
            voters.append(VoterStatus(v, status.role, status.log_end_offset, 0 if v == leader
                                      else None, None, None))  # fmt: skip
        elif row is None:
            voters.append(VoterStatus(v, "leader" if v == leader else "unknown", -1, None,
                                      None, None))  # fmt: skip
        else:
            voters.append(_row(row.node_id, row.log_end_offset, row.last_fetch_ms,
                               row.last_caught_up_ms, status.log_end_offset, fetch_timeout_ms,
                               now_ms))  # fmt: skip
    return RaftPartitionStatus(
        topic_id, partition, status.node_id, status.role, leader, status.epoch, status.voted_id,
        status.high_watermark, log_start_offset, status.log_end_offset, tuple(voters),
        len(status.voters) // 2 + 1,
    )  # fmt: skip


def in_sync_voters(status: RaftPartitionStatus, now_ms: int, fetch_timeout_ms: int) -> list[int]:
    """The leader and the voters that fetched from it within the fetch timeout, in assignment
    order; a voter that has not fetched yet in this epoch counts while the epoch is younger than
    the timeout (module docstring). `now_ms` is the core's time."""
    return [v.node_id for v in status.voters
            if v.role in LIVE_ROLES or (v.role == "unknown" and v.last_fetch_ms is not None
                                        and now_ms - v.last_fetch_ms <= fetch_timeout_ms)]  # fmt: skip


def metadata_leader(image_leader: int, image_epoch: int, raft_leader: int,
                    raft_epoch: int) -> tuple[int, int]:  # fmt: skip
    """(leader, epoch) for a Metadata answer from the image's and the replica's (leader, epoch)
    (module docstring); a replica that knows no leader (a negative id) leaves the image's."""
    if raft_leader >= 0 and (raft_epoch > image_epoch
                             or (raft_epoch == image_epoch and image_leader == NO_LEADER)):  # fmt: skip
        return raft_leader, raft_epoch
    return image_leader, image_epoch


def _row(node_id: int, end_offset: int, last_fetch_ms: int | None, last_caught_up_ms: int | None,
         leader_end: int, fetch_timeout_ms: int, now_ms: int) -> VoterStatus:  # fmt: skip
    if end_offset < 0:
        return VoterStatus(node_id, "unknown", -1, None, last_fetch_ms, last_caught_up_ms)
    live = last_fetch_ms is not None and now_ms - last_fetch_ms <= fetch_timeout_ms
    return VoterStatus(node_id, "follower" if live else "unreachable", end_offset,
                       max(0, leader_end - end_offset), last_fetch_ms, last_caught_up_ms)  # fmt: skip

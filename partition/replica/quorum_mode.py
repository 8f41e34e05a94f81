"""`replication.mode=quorum` on the replica side: an offset commits once a majority of
the replicas hold it, and leadership changes through a Raft-style fencing election run by the
controller (quorum/controller/partition_change.py has the controller's half).

The election, as the replica core takes part in it:
1. The controller commits a fencing PartitionChange: leader -1 at a new leader epoch E.
2. A replica that applies epoch E goes Offline(E). From then on it sends no fetch to any
   leader of an earlier epoch and drops whatever such a leader still answers (a fetch response
   is only taken from the leader of the epoch the follower is in), and it serves nobody: produce
   and fetch get NOT_LEADER_OR_FOLLOWER. So its log is frozen until a leader of an epoch > E.
3. It reports (last epoch, LEO) tagged with E (`position_report`, effect SendReplicaPosition),
   at once and every `position_report_interval_ms` while it stays fenced. The driver persists E
   (the fenced epoch) before the report leaves; after a restart the core gets it back and never
   acts on partition state of an earlier epoch, nor of one below its log's last epoch.
4. The controller elects the replica with the highest (last epoch, LEO) among acceptable
   replicas that reported at E and form a majority (`choose_quorum_leader` is the same rule), at
   epoch E+1, or nobody (the partition stays offline without a majority).
5. The new leader, if its HW is below its LEO, appends an epoch marker (`epoch_marker_batch`,
   a control batch of its own epoch, Raft's no-op entry) at once: its HW may pass the earlier
   epochs' tail only together with an entry of its own epoch (the figure-8 rule, Raft thesis
   3.6.2), and without the marker a leader that only receives idempotent retries of that tail
   would never get one.

Why a committed offset cannot be lost (quorum intersection, Raft thesis 3.6.3). Say offset o
is committed by the leader of epoch e: its HW passed o, so a majority M1 of the replicas had
fetched past o at epoch e (the leader counts a follower's LEO only from fetches carrying its own
epoch, after the divergence check, so their logs match its log up to there), and by the
figure-8 rule the prefix they hold ends with an entry of epoch e. Claim: every leader elected at
an epoch > e holds o. Take the first one that would not, elected at E+1 from a majority M2 that
reported at the fenced epoch E >= e+1. M1 and M2 share a replica r. r's fetch that counted for o
was sent while r was at epoch e, hence before r saw E; since then r only appended, or truncated
to match leaders of epochs in (e, E), which hold o by the claim, so the log r reported holds o,
with a last epoch >= e. The elected log X has (last epoch, LEO) >= r's. Same last epoch: both
end with entries copied from that epoch's leader, so the shorter is a prefix of the longer (log
matching) and X holds o. Greater last epoch g: X matches the epoch-g leader's log up to the end
of X, that leader holds o (the claim), and X ends past its epoch start, which is past o. Conversely, an
old leader that never saw E cannot commit anything the reports miss: the replicas of M2 no
longer fetch from it, so it never again counts a majority. Limits: a replica that loses
unflushed data after it reported, or after its fetch was counted, would break the argument (as
Raft without fsync does), so in quorum mode appends are fsynced before they count: a follower
flushes a fetch answer's batches before its next fetch (or report) carries the new LEO, the
leader flushes before its own LEO counts (`flush=True` on AppendAsFollower / AppendAsLeader).
And a restarted replica must not act on a stale image (the broker's initial catch-up, plus the
fenced-epoch floor above); see docs/replication.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from partition.log import batch as rb
from partition.replica.messages import ReplicaPosition
from quorum.controller.messages import ReportReplicaPositionRequest

# Control record of an epoch marker: key = (version 0, type 2 = LeaderChange, as KRaft's
# ControlRecordType), value empty. Consumers skip control batches. The timestamp is -1 (no
# timestamp): the core has no wall clock, and -1 never makes a segment look old to retention.
EPOCH_MARKER_KEY = b"\x00\x00\x00\x02"
EPOCH_MARKER_VALUE = b""


def epoch_marker_batch() -> bytes:
    """One control batch (offset and epoch patched in by the leader like any produced batch)."""
    record = rb.Record(EPOCH_MARKER_VALUE, EPOCH_MARKER_KEY, timestamp_ms=-1)
    return rb.encode_batch([record], is_control=True)


def position_report(broker_id: int, broker_epoch: int, topic_id: str, partition: int,
                    leader_epoch: int, position: ReplicaPosition) -> ReportReplicaPositionRequest:  # fmt: skip
    """The report of step 3: `position` as seen at the fenced `leader_epoch`."""
    return ReportReplicaPositionRequest(broker_id, broker_epoch, topic_id, partition, leader_epoch,
                                        position.last_epoch, position.log_end_offset)  # fmt: skip


def choose_quorum_leader(replicas: tuple[int, ...], live: Iterable[ReplicaPosition]) -> int | None:
    """The new leader, or None when fewer than a majority of `replicas` reported. Ties on
    (last epoch, LEO) go to the earlier replica in assignment order (the preferred leader).
    The controller applies the same rule to the reports of the fenced epoch."""
    positions = {p.replica_id: p for p in live if p.replica_id in replicas}
    if len(positions) < len(replicas) // 2 + 1:
        return None
    order = {r: i for i, r in enumerate(replicas)}
    best = max(
        positions.values(), key=lambda p: (p.last_epoch, p.log_end_offset, -order[p.replica_id])
    )
    return best.replica_id

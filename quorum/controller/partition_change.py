"""Partition leader election and the PartitionChange records that carry it (Kafka's
PartitionChangeBuilder, KIP-631/704/841/966), as pure functions of the image.

Election (ONLINE): keep the current leader while it is in the ISR and acceptable; else the first
replica in assignment order that is in the ISR and acceptable; else (KIP-966, when enabled, and
only with an empty ISR) the first acceptable ELR member, which becomes the ISR; else (KIP-966,
ISR and ELR both empty) the last known leader, when it is the one member of LastKnownElr and
acceptable ("balanced recovery": the pre-4.0 behaviour when every replica was offline; Kafka's
PartitionChangeBuilder.canElectLastKnownLeader), elected as an unclean election is; else, if
unclean election is allowed, the first acceptable replica (then ISR := [leader],
leader_recovery_state := RECOVERING, KIP-704); else no leader (-1).
LastKnownElr (KIP-966, Kafka 4.x with useLastKnownLeaderInBalancedRecovery): the leader the
partition had when its ISR became empty, set once then; cleared when a leader is elected or the
ISR is back at min ISR. An unclean shutdown takes a broker out of the ELR, not out of
LastKnownElr (controller.py).
PREFERRED: replicas[0] if it is in the ISR and acceptable. UNCLEAN (on demand): ONLINE, then
any acceptable replica. Acceptable = registered, unfenced, not in controlled shutdown (KIP-841)
and not being fenced or shut down by the records built alongside.

`replication.mode=quorum` (Raft's election, run by the controller; docs/replication.md):
1. FENCE. A partition whose leader must go (unusable, removed) first gets a change with leader
   -1, which bumps the leader epoch to E (no leader). A replica that applies epoch E stops
   fetching from any earlier leader and drops what an earlier leader still sends it (the replica
   core), so from then on its log cannot grow behind the controller's back.
2. REPORT. Each replica at epoch E reports (last epoch, LEO) tagged with E (ReplicaLogState,
   from ReportReplicaPositionRequest). Reports tagged with any other epoch are ignored.
3. ELECT. Once acceptable replicas forming a majority of the replicas have reported at E, the one
   with the highest (last epoch, LEO) leads (ties: assignment order), at epoch E+1. Without such
   a majority the partition stays offline: the honest answer without a quorum.
Why no committed offset is lost (quorum intersection, Raft thesis 3.6.3): an offset o is
committed when a majority M1 holds it with an entry of the committing leader's epoch (the leader
counts a follower only from fetches at its own epoch, and applies the "figure 8" rule). The
reporting majority M2 intersects M1 in some replica r. r's counted fetch was sent before r saw
E (after that it never fetches at an earlier epoch), so r's reported log holds o; the chosen
leader's (last epoch, LEO) is >= r's, and by the Raft log-matching argument (induction over the
epochs elected this way) its log holds o too. An old leader that never saw E cannot commit past
the reports either: the replicas of M2 no longer fetch from it, so it lacks a majority.
PREFERRED elections and the periodic rebalance do not move a valid quorum-mode leader (that
would skip the fence); UNCLEAN is the same as ONLINE there (no majority, no leader).

`replication.mode=raft`: no election here at all; the replicas elect (raft_leaders.py).

Invariants of every change built here:
- without ELR the ISR never becomes empty (the last member stays, leader -1: Kafka's rule);
- a chosen leader is in the resulting ISR;
- `leader` is set in the record only when the leader changes, so applying it bumps leader_epoch
  exactly then; partition_epoch is bumped by every record (image.py);
- no record is produced when nothing changes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from quorum.controller.raft_leaders import raft_leave
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, LeaderRecoveryState, Partition, PartitionChange


class ElectionType(enum.Enum):
    ONLINE = "online"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class ReplicaLogState:
    """Where a replica's log ends, as it reported it at the fenced `leader_epoch`: the input of
    a quorum-mode election (a report counts only at the partition's current epoch)."""

    broker_id: int
    last_epoch: int
    log_end_offset: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ElectionRules:
    """What the topic and controller configs say about electing this partition's leader."""

    unclean_allowed: bool = False
    elr_enabled: bool = False
    min_isr: int = 1
    quorum_mode: bool = False
    raft_mode: bool = False  # replication.mode=raft: never elect (quorum/controller/raft_leaders.py)
    log_states: Mapping[int, ReplicaLogState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Target:
    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    recovery: int


def is_acceptable(image: MetadataImage, broker_id: int, unusable: Collection[int]) -> bool:
    """May lead or be in an ISR: registered, unfenced, not shutting down (KIP-841)."""
    return broker_id not in unusable and image.is_broker_usable(broker_id)


def build_change(
    image: MetadataImage,
    part: Partition,
    rules: ElectionRules,
    *,
    election: ElectionType = ElectionType.ONLINE,
    remove: Collection[int] = (),
    isr: tuple[int, ...] | None = None,
    recovery_state: int | None = None,
    unusable: Collection[int] = (),
) -> PartitionChange | None:
    """The PartitionChange that takes `remove` out of the ISR (or sets the ISR to `isr`), applies
    `recovery_state`, and elects a leader by `election`; None when nothing would change.
    `unusable` are brokers being fenced or shut down by records built in the same batch.
    A raft partition elects its own leader: only `remove` applies to it (raft_leaders.py)."""
    if rules.raft_mode:
        return raft_leave(part, remove)
    new_isr, elr, last_known_elr = _target_isr(part, rules, remove, isr)
    recovery = part.leader_recovery_state if recovery_state is None else recovery_state
    target = _Target(part.leader, new_isr, elr, last_known_elr, recovery)
    target = _elect(image, part, rules, election, target, frozenset(unusable) | frozenset(remove))
    return _diff(part, target)


def _target_isr(
    part: Partition, rules: ElectionRules, remove: Collection[int], isr: tuple[int, ...] | None
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(isr, elr, last_known_elr) after the membership change, before the election."""
    new_isr = isr if isr is not None else tuple(r for r in part.isr if r not in remove)
    if not rules.elr_enabled:
        if not new_isr:
            new_isr = part.isr  # the ISR never becomes empty: the last member stays (Kafka)
        return new_isr, (), ()
    # KIP-966: members leaving the ISR while it is below min ISR stay eligible (ELR); the ELR
    # is cleared once the ISR is back at min ISR. ISR members are never in the ELR.
    if len(new_isr) >= rules.min_isr:
        return new_isr, (), ()
    left = [r for r in part.isr if r not in new_isr]
    elr = tuple(r for r in (*part.elr, *left) if r not in new_isr)
    elr = tuple(dict.fromkeys(elr))
    return new_isr, elr, part.last_known_elr


def _elect(
    image: MetadataImage,
    part: Partition,
    rules: ElectionRules,
    election: ElectionType,
    target: _Target,
    unusable: frozenset[int],
) -> _Target:
    def ok(b: int) -> bool:
        return is_acceptable(image, b, unusable)

    if rules.quorum_mode:
        return _quorum_election(part, rules, target, ok)
    if election is ElectionType.PREFERRED:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if preferred in target.isr and ok(preferred):
            return _with_leader(target, preferred)
    current = target.leader
    if current != NO_LEADER and current in target.isr and ok(current):
        return target  # ONLINE keeps a valid leader
    for r in part.replicas:
        if r in target.isr and ok(r):
            return _with_leader(target, r)
    if not target.isr:
        for r in part.replicas:
            if r in target.elr and ok(r):
                # KIP-966: an ELR member is elected and becomes the ISR.
                elr = tuple(e for e in target.elr if e != r)
                return _Target(r, (r,), elr, (), target.recovery)
    if rules.elr_enabled and not target.isr and not target.elr:
        lke = part.last_known_elr
        if len(lke) == 1 and ok(lke[0]):
            # KIP-966: nobody is eligible; the last known leader is the likeliest to hold what
            # was acknowledged. Elected as an unclean election is (ISR := it, RECOVERING).
            return _Target(lke[0], (lke[0],), (), (), LeaderRecoveryState.RECOVERING)
    if rules.unclean_allowed or election is ElectionType.UNCLEAN:
        for r in part.replicas:
            if ok(r):
                # Unclean: the ISR restarts at the new leader, RECOVERING (KIP-704).
                return _Target(r, (r,), (), (), LeaderRecoveryState.RECOVERING)
    if not target.isr and rules.elr_enabled and current != NO_LEADER:
        # KIP-966: remember the last leader when the partition becomes leaderless with an
        # empty ISR (once: later changes keep it while there is no leader).
        return _Target(NO_LEADER, target.isr, target.elr, (current,), target.recovery)
    return _with_leader(target, NO_LEADER)


def _quorum_election(
    part: Partition, rules: ElectionRules, target: _Target, ok: Callable[[int], bool]
) -> _Target:
    """replication.mode=quorum: keep a valid leader; else fence (leader -1, a new epoch); else,
    once fenced, elect the most up-to-date (last epoch, LEO) replica among acceptable replicas
    that reported at the current epoch and form a majority; else stay offline (module doc)."""
    current = target.leader
    if current != NO_LEADER and current in target.isr and ok(current):
        return target
    if part.leader != NO_LEADER:
        return _with_leader(target, NO_LEADER)  # step 1: the fencing epoch, no leader
    reported = [r for r in part.replicas if ok(r) and _reported_at(rules, r, part.leader_epoch)]
    if len(reported) < len(part.replicas) // 2 + 1:
        return _with_leader(target, NO_LEADER)  # no majority at the fenced epoch: offline

    def position(r: int) -> tuple[int, int, int]:
        s = rules.log_states[r]
        return (s.last_epoch, s.log_end_offset, -part.replicas.index(r))  # ties: assignment order

    leader = max(reported, key=position)
    # The reporting majority is the new ISR (informational in quorum mode: commits count the
    # replicas, not the ISR); the leader is always in it.
    return _Target(leader, tuple(reported), (), (), target.recovery)


def _reported_at(rules: ElectionRules, broker_id: int, leader_epoch: int) -> bool:
    s = rules.log_states.get(broker_id)
    return s is not None and s.leader_epoch == leader_epoch


def _with_leader(target: _Target, leader: int) -> _Target:
    # A partition with a leader has no last known leader to remember (KIP-966).
    lke = () if leader != NO_LEADER else target.last_known_elr
    return _Target(leader, target.isr, target.elr, lke, target.recovery)


def _diff(part: Partition, target: _Target) -> PartitionChange | None:
    leader = None if target.leader == part.leader else target.leader
    isr = None if target.isr == part.isr else target.isr
    elr = None if target.elr == part.elr else target.elr
    lke = None if target.last_known_elr == part.last_known_elr else target.last_known_elr
    rec = None if target.recovery == part.leader_recovery_state else target.recovery
    if leader is None and isr is None and elr is None and lke is None and rec is None:
        return None
    return PartitionChange(
        topic_id=part.topic_id,
        partition=part.partition,
        leader=leader,
        isr=isr,
        elr=elr,
        last_known_elr=lke,
        leader_recovery_state=rec,
        expected_partition_epoch=part.partition_epoch,
    )

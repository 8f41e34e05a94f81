"""Partition leader election and the PartitionChange records that carry it (Kafka's
PartitionChangeBuilder, KIP-631/704/841/966), as pure functions of the image.

Election (ONLINE): keep the current leader while it is in the ISR and acceptable; else the first
replica in assignment order that is in the ISR and acceptable; else (KIP-966, when enabled) the
first acceptable ELR member; else, if unclean election is allowed, the first acceptable replica
(then ISR := [leader], leader_recovery_state := RECOVERING, KIP-704); else no leader (-1).
PREFERRED: replicas[0] if it is in the ISR and acceptable. UNCLEAN (on demand): ONLINE, then
any acceptable replica. Acceptable = registered, unfenced, not in controlled shutdown (KIP-841)
and not being fenced or shut down by the records built alongside.

`replication.mode=quorum`: the leader is the replica with the highest (last epoch, log end
offset) among the acceptable replicas, and only when they are a majority of the replicas;
`ReplicaLogState` is the hook through which those log positions reach the controller.

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

from quorum.metadata.image import MetadataImage
from quorum.metadata.records import NO_LEADER, LeaderRecoveryState, Partition, PartitionChange


class ElectionType(enum.Enum):
    ONLINE = "online"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


@dataclass(frozen=True, slots=True)
class ReplicaLogState:
    """Where a replica's log ends: the input a quorum-mode election needs (hook: the partition
    layer reports these, e.g. with heartbeats or an election round)."""

    broker_id: int
    last_epoch: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class ElectionRules:
    """What the topic and controller configs say about electing this partition's leader."""

    unclean_allowed: bool = False
    elr_enabled: bool = False
    min_isr: int = 1
    quorum_mode: bool = False
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
    `unusable` are brokers being fenced or shut down by records built in the same batch."""
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

    if election is ElectionType.PREFERRED:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if preferred in target.isr and ok(preferred):
            return _with_leader(target, preferred)
    current = target.leader
    if current != NO_LEADER and current in target.isr and ok(current):
        return target  # ONLINE keeps a valid leader
    if rules.quorum_mode:
        return _quorum_election(part, rules, target, ok)
    for r in part.replicas:
        if r in target.isr and ok(r):
            return _with_leader(target, r)
    for r in part.replicas:
        if r in target.elr and ok(r):
            # KIP-966: an ELR member is elected and becomes the ISR.
            elr = tuple(e for e in target.elr if e != r)
            return _Target(r, (r,), elr, target.last_known_elr, target.recovery)
    if rules.unclean_allowed or election is ElectionType.UNCLEAN:
        for r in part.replicas:
            if ok(r):
                # Unclean: the ISR restarts at the new leader, RECOVERING (KIP-704).
                return _Target(r, (r,), (), (), LeaderRecoveryState.RECOVERING)
    if not target.isr and rules.elr_enabled and current != NO_LEADER:
        # KIP-966: remember the last leader when nobody is eligible any more.
        lke = tuple(dict.fromkeys((*target.last_known_elr, current)))
        return _Target(NO_LEADER, target.isr, target.elr, lke, target.recovery)
    return _with_leader(target, NO_LEADER)


def _quorum_election(
    part: Partition, rules: ElectionRules, target: _Target, ok: Callable[[int], bool]
) -> _Target:
    """replication.mode=quorum: the most up-to-date (last epoch, LEO) replica among a live
    majority of the replicas; no majority alive, no leader."""
    live = [r for r in part.replicas if ok(r)]
    if len(live) < len(part.replicas) // 2 + 1:
        return _with_leader(target, NO_LEADER)

    def position(r: int) -> tuple[int, int, int]:
        s = rules.log_states.get(r)
        pos = (-1, -1) if s is None else (s.last_epoch, s.log_end_offset)
        return (pos[0], pos[1], -part.replicas.index(r))  # ties: assignment order

    leader = max(live, key=position)
    return _Target(leader, tuple(live), (), (), target.recovery)


def _with_leader(target: _Target, leader: int) -> _Target:
    return _Target(leader, target.isr, target.elr, target.last_known_elr, target.recovery)


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

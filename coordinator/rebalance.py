"""The rebalance machinery of classic groups: preparing a rebalance, completing the join phase,
handing out the leader's assignment, and the deadlines that drive them (the classic-group half of
Kafka's GroupMetadataManager.java). The request handlers (membership.py) call into it; so do the
shard's timers and append completions.

The rules it keeps (each cites the Kafka behaviour it follows):
- A rebalance of an Empty group waits group.initial.rebalance.delay.ms, extended while new
  members keep arriving, never past the rebalance timeout (KIP-134); any other rebalance completes
  as soon as every member has rejoined, or at the rebalance timeout (the longest of the members').
- At the end of the join phase, dynamic members that did not rejoin are removed; static members
  (KIP-345) stay. The leader is kept if it rejoined, else the first member that did. The
  generation goes up by one, and the chosen protocol is the one most members prefer among those
  all of them support. Every rejoined member gets its JoinGroup answer, the leader with the
  member list. A group left empty becomes Empty and is persisted (a GroupMetadata record).
- CompletingRebalance waits for the leader's SyncGroup. Its assignment is persisted first
  (group metadata with every member's assignment); only once that record is committed does the
  group become Stable and the parked SyncGroups get their assignments. Members that never send
  SyncGroup within the rebalance timeout are removed and the group rebalances again.
- A member's session expires when no heartbeat (or commit) comes within its session timeout,
  unless it is waiting in a join or sync phase; a member new in this rebalance expires at the
  new-member join timeout even while waiting.

Every parked request is answered exactly once: completed, failed with the error Kafka gives, or
(where Kafka would leave a superseded request dangling) failed with REBALANCE_IN_PROGRESS.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from coordinator.config import GroupCoordinatorConfig
from coordinator.errors import InvariantViolation, append_error_to_response_error
from coordinator.group import ClassicGroup, GroupState, Member
from coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    JoinGroupResponse,
    SyncGroupResponse,
)
from coordinator.outbox import GroupMetadataWrite, Outbox, StaticMemberWrite, SyncAssignmentWrite
from coordinator.records import GroupMetadataKey, group_metadata_record
from coordinator.timers import (
    HeartbeatExpiry,
    InitialRebalanceDelay,
    JoinDeadline,
    SyncDeadline,
    Timers,
)
from quorum.metadata.errors import Errors

__all__ = ["Rebalancer"]

log = structlog.get_logger("coordinator")

_S = GroupState


class Rebalancer:
    def __init__(self, config: GroupCoordinatorConfig, groups: dict[str, ClassicGroup],
                 timers: Timers, outbox: Outbox) -> None:  # fmt: skip
        self.config = config
        self.groups = groups
        self.timers = timers
        self.outbox = outbox

    # ------------------------------------------------------------------------- heartbeats

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, now_ms: int,
                             timeout_ms: int | None = None) -> None:  # fmt: skip
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.schedule(HeartbeatExpiry(group.group_id, member.member_id), now_ms + timeout)

    def heartbeat_expired(self, action: HeartbeatExpiry, now_ms: int) -> None:
        group = self.groups.get(action.group_id)
        if group is None or group.is_in(_S.DEAD):
            return
        if action.member_id in group.pending_join_members:
            log.info("coordinator.pending_member_expired", group=group.group_id,
                     member=action.member_id)  # fmt: skip
            group.remove(action.member_id)
            if group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group, now_ms)
            return
        member = group.members.get(action.member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("coordinator.member_expired", group=group.group_id, member=member.member_id,
                 generation=group.generation_id)  # fmt: skip
        self.drop_member(group, member)
        if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group, now_ms)

    def drop_member(self, group: ClassicGroup, member: Member) -> None:
        """Remove `member`; its parked JoinGroup or SyncGroup is told UNKNOWN_MEMBER_ID (it may
        rejoin as a new member if it is still alive)."""
        self.timers.cancel_heartbeat(group.group_id, member.member_id)
        if member.awaiting_join is not None:
            self.outbox.respond(JoinGroupResponse(member.awaiting_join, Errors.UNKNOWN_MEMBER_ID,
                                                  member_id=UNKNOWN_MEMBER_ID))  # fmt: skip
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self.outbox.respond(SyncGroupResponse(member.awaiting_sync, Errors.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        group.remove(member.member_id)

    # ------------------------------------------------------------------------- join phase

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, now_ms)
        else:
            self.maybe_complete_join_phase(group, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.is_in(_S.COMPLETING_REBALANCE):
            # Members waiting for an assignment that will never come: rejoin.
            self.reset_and_propagate_assignment(group, Errors.REBALANCE_IN_PROGRESS, now_ms)
        group.pending_sync_members.clear()
        self.timers.cancel_sync(group.group_id)
        initial = group.is_in(_S.EMPTY)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(InitialRebalanceDelay(group.group_id, delay, remaining),
                                 now_ms + delay)  # fmt: skip
        group.transition_to(_S.PREPARING_REBALANCE, now_ms)
        log.info("coordinator.preparing_rebalance", group=group.group_id,
                 generation=group.generation_id, members=len(group.members))  # fmt: skip
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group, now_ms)
            else:
                self.timers.schedule(JoinDeadline(group.group_id),
                                     now_ms + group.rebalance_timeout_ms())  # fmt: skip

    def maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> None:
        """Complete the join phase if everyone has rejoined, except during an initial rebalance
        (which always waits out its delay)."""
        if (group.is_in(_S.PREPARING_REBALANCE) and group.previous_state is not _S.EMPTY
                and group.has_all_members_joined()):  # fmt: skip
            self.complete_join(group, now_ms)

    def initial_delay_expired(self, action: InitialRebalanceDelay, now_ms: int) -> None:
        group = self.groups.get(action.group_id)
        if group is None:
            return
        if group.new_member_added and action.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, action.remaining_ms)
            remaining = max(action.remaining_ms - action.delay_ms, 0)
            self.timers.schedule(InitialRebalanceDelay(group.group_id, delay, remaining),
                                 now_ms + delay)  # fmt: skip
        else:
            self.complete_join(group, now_ms)

    def join_deadline_expired(self, action: JoinDeadline, now_ms: int) -> None:
        group = self.groups.get(action.group_id)
        if group is not None:
            self.complete_join(group, now_ms)

    def complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        self.timers.cancel_join(group.group_id)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self.drop_member(group, member)
        if group.is_in(_S.DEAD):
            return
        if not group.is_in(_S.PREPARING_REBALANCE):
            raise InvariantViolation(f"join phase of {group.group_id} completed in "
                                     f"{group.state.value}")  # fmt: skip
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or for their
            # sessions to expire) one more rebalance timeout.
            self.timers.schedule(JoinDeadline(group.group_id),
                                 now_ms + group.rebalance_timeout_ms())  # fmt: skip
            return
        generation_before = group.generation_id
        group.init_next_generation(now_ms)
        if group.generation_id != generation_before + 1:
            raise InvariantViolation(f"generation of {group.group_id} went from "
                                     f"{generation_before} to {group.generation_id}")  # fmt: skip
        if group.is_in(_S.EMPTY):
            log.info("coordinator.group_empty", group=group.group_id,
                     generation=group.generation_id)  # fmt: skip
            self.persist(group, {}, GroupMetadataWrite(group.group_id))
            return
        log.info("coordinator.join_completed", group=group.group_id,
                 generation=group.generation_id, leader=group.leader_id,
                 protocol=group.protocol_name, members=len(group.members))  # fmt: skip
        for member in group.members.values():
            if member.awaiting_join is not None:
                self.outbox.respond(self.join_response(group, member, member.awaiting_join))
                member.awaiting_join = None
            self.reschedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.timers.schedule(SyncDeadline(group.group_id, group.generation_id),
                             now_ms + group.rebalance_timeout_ms())  # fmt: skip

    def join_response(self, group: ClassicGroup, member: Member, request_id: int, *,
                      skip_assignment: bool = False) -> JoinGroupResponse:  # fmt: skip
        """The JoinGroup answer of the current generation; the leader's carries the members."""
        is_leader = group.is_leader(member.member_id)
        return JoinGroupResponse(
            request_id, Errors.NONE, member_id=member.member_id,
            generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "",
            skip_assignment=skip_assignment,
            members=group.join_response_members() if is_leader else (),
        )  # fmt: skip

    def persist(self, group: ClassicGroup, assignment: Mapping[str, bytes],
                then: GroupMetadataWrite | SyncAssignmentWrite | StaticMemberWrite) -> None:  # fmt: skip
        record = group_metadata_record(
            GroupMetadataKey(group.group_id), group.to_record(assignment)
        )
        self.outbox.append([record], then)

    # ------------------------------------------------------------------------- sync phase

    def sync_deadline_expired(self, action: SyncDeadline, now_ms: int) -> None:
        group = self.groups.get(action.group_id)
        if group is None or group.generation_id != action.generation_id:
            return
        if not group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync_members:
            return
        missing = sorted(group.pending_sync_members)
        log.info("coordinator.sync_expired", group=group.group_id,
                 generation=group.generation_id, members=missing)  # fmt: skip
        for member_id in missing:
            self.drop_member(group, group.members[member_id])
        self.prepare_rebalance(group, now_ms)

    def sync_written(self, write: SyncAssignmentWrite, error: Errors, now_ms: int) -> None:
        """The leader's assignment is committed (or failed): Stable and hand it out, or tell the
        parked members and rebalance."""
        group = self.groups.get(write.group_id)
        if (group is None or not group.is_in(_S.COMPLETING_REBALANCE)
                or group.generation_id != write.generation_id):  # fmt: skip
            return  # the group moved on (a join or a leave); its members were told to rejoin
        if error is not Errors.NONE:
            self.reset_and_propagate_assignment(group, append_error_to_response_error(error),
                                                now_ms)  # fmt: skip
            self.maybe_prepare_rebalance_or_complete_join(group, now_ms)
            return
        assignment = dict(write.assignment)
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.propagate_assignment(group, Errors.NONE, now_ms)
        group.transition_to(_S.STABLE, now_ms)
        log.info("coordinator.group_stable", group=group.group_id,
                 generation=group.generation_id)  # fmt: skip

    def reset_and_propagate_assignment(self, group: ClassicGroup, error: Errors,
                                       now_ms: int) -> None:  # fmt: skip
        if not group.is_in(_S.COMPLETING_REBALANCE):
            raise InvariantViolation(f"assignment of {group.group_id} reset in {group.state.value}")
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error, now_ms)

    def propagate_assignment(self, group: ClassicGroup, error: Errors, now_ms: int) -> None:
        ok = error is Errors.NONE
        for member in group.members.values():
            if member.awaiting_sync is None:
                continue
            self.outbox.respond(SyncGroupResponse(
                member.awaiting_sync, error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            ))  # fmt: skip
            member.awaiting_sync = None
            # A session that expired while the member waited was ignored; start a new one.
            self.reschedule_heartbeat(group, member, now_ms)

    # --------------------------------------------------------------------------- unloading

    def fail_parked(self, group: ClassicGroup, error: Errors) -> None:
        """Answer every parked JoinGroup and SyncGroup of `group` with `error` (the offsets
        partition moved away: NOT_COORDINATOR, so clients find the new coordinator)."""
        for member in group.members.values():
            if member.awaiting_join is not None:
                self.outbox.respond(JoinGroupResponse(member.awaiting_join, error,
                                                      member_id=member.member_id))  # fmt: skip
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                self.outbox.respond(SyncGroupResponse(member.awaiting_sync, error))
                member.awaiting_sync = None

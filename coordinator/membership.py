"""The classic group requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the read views
ListGroups and DescribeGroups (GroupMetadataManager.java's classicGroupJoin, classicGroupSync,
classicGroupHeartbeat, classicGroupLeave, listGroups, describeGroups). What each state answers:

    request    Empty              PreparingRebalance     CompletingRebalance   Stable
    JoinGroup  new member:        park until the join    same metadata: this   leader, or new
               rebalance          phase completes        generation at once;   metadata: rebalance;
                                                         else rebalance        else this generation
    SyncGroup  UNKNOWN_MEMBER_ID  REBALANCE_IN_PROGRESS  park; the leader's    the member's
                                                         assignment is stored  assignment
    Heartbeat  UNKNOWN_MEMBER_ID  REBALANCE_IN_PROGRESS  NONE                  NONE
    LeaveGroup UNKNOWN_MEMBER_ID  remove; maybe complete remove; rebalance     remove; rebalance

Before any of that, a request naming a member is checked: FENCED_INSTANCE_ID when its
group.instance.id belongs to another member id (KIP-345), UNKNOWN_MEMBER_ID when the member is
not in the group, ILLEGAL_GENERATION when SyncGroup or Heartbeat carry another generation; a Dead
group (being deleted) answers COORDINATOR_NOT_AVAILABLE. Member ids are "<client.id or
group.instance.id>-<suffix>", the suffix from the driver (Kafka: a random UUID).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from coordinator.config import GroupCoordinatorConfig
from coordinator.errors import InvariantViolation, append_error_to_response_error
from coordinator.group import ClassicGroup, GroupState, Member
from coordinator.messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordinator.outbox import StaticMemberWrite, SyncAssignmentWrite
from coordinator.rebalance import Rebalancer
from coordinator.timers import HeartbeatExpiry
from quorum.metadata.errors import Errors

__all__ = ["GroupMembership"]

log = structlog.get_logger("coordinator")

_S = GroupState
# KIP-394: from JoinGroup v4 a new dynamic member first gets its id with MEMBER_ID_REQUIRED.
_MEMBER_ID_REQUIRED_VERSION = 4
# KIP-814: from JoinGroup v9 a static leader rejoining a Stable group may skip the assignment.
_SKIP_ASSIGNMENT_VERSION = 9


class GroupMembership:
    def __init__(self, config: GroupCoordinatorConfig, rebalancer: Rebalancer,
                 member_id_suffix: Callable[[], str]) -> None:  # fmt: skip
        self.config = config
        self.rb = rebalancer
        self.groups = rebalancer.groups
        self.outbox = rebalancer.outbox
        self._suffix = member_id_suffix

    # ---------------------------------------------------------------------------- JoinGroup

    def join(self, req: JoinGroupRequest, now_ms: int) -> None:
        group = self.groups.get(req.group_id)
        is_new_group = group is None
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                self._join_error(req, Errors.UNKNOWN_MEMBER_ID, req.member_id)
                return
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
        if not self._accepts_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self.rb.drop_member(group, member)
            self._join_error(req, Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif req.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, req, now_ms)
        else:
            self._join_existing_member(group, req, now_ms)
        if is_new_group and group.is_in(_S.EMPTY) and not group.members \
                and not group.pending_join_members:  # fmt: skip
            del self.groups[req.group_id]  # nothing joined: leave no trace

    def _join_error(self, req: JoinGroupRequest, error: Errors, member_id: str) -> None:
        self.outbox.respond(JoinGroupResponse(req.request_id, error, member_id=member_id))

    def _accepts_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size (GroupMetadataManager.acceptJoiningMember)."""
        limit = self.config.group_max_size
        if group.is_in(_S.EMPTY, _S.DEAD):
            return True
        if group.is_in(_S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) \
                or group.num_awaiting_join() < limit  # fmt: skip
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: JoinGroupRequest, now_ms: int) -> None:
        if group.is_in(_S.DEAD):
            self._join_error(req, Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
            return
        if not group.supports_protocols(req.protocol_type, _names(req)):
            self._join_error(req, Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
            return
        new_id = f"{req.group_instance_id or req.client_id}-{self._suffix()}"
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                self._replace_static_member(group, req, existing, new_id, now_ms)
            else:
                self._add_member(group, req, new_id, now_ms)
        elif req.api_version >= _MEMBER_ID_REQUIRED_VERSION:
            # KIP-394: no member without a known id; it must come back with this one.
            if new_id in group.members or new_id in group.pending_join_members:
                raise InvariantViolation(f"member id {new_id} handed out twice")
            group.pending_join_members.add(new_id)
            self.rb.timers.schedule(HeartbeatExpiry(group.group_id, new_id),
                                   now_ms + req.session_timeout_ms)  # fmt: skip
            self._join_error(req, Errors.MEMBER_ID_REQUIRED, new_id)
        else:
            self._add_member(group, req, new_id, now_ms)

    def _join_existing_member(self, group: ClassicGroup, req: JoinGroupRequest,
                              now_ms: int) -> None:  # fmt: skip
        member_id = req.member_id
        if group.is_in(_S.DEAD):
            self._join_error(req, Errors.COORDINATOR_NOT_AVAILABLE, member_id)
            return
        if not group.supports_protocols(req.protocol_type, _names(req)):
            self._join_error(req, Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
            return
        if member_id in group.pending_join_members:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException: a pending member is never static.
                self._join_error(req, Errors.UNKNOWN_SERVER_ERROR, member_id)
                return
            self._add_member(group, req, member_id, now_ms)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not Errors.NONE:
            self._join_error(req, error, member_id)
            return
        member = group.members[member_id]
        same = member.protocols == req.protocols
        if group.is_in(_S.PREPARING_REBALANCE):
            self._update_member_then_rebalance(group, member, req, now_ms)
        elif group.is_in(_S.COMPLETING_REBALANCE) and same:
            # It missed its JoinGroup answer: give it again.
            self.outbox.respond(self.rb.join_response(group, member, req.request_id))
        elif group.is_in(_S.STABLE) and same and not group.is_leader(member_id):
            self.outbox.respond(JoinGroupResponse(
                req.request_id, Errors.NONE, member_id=member_id,
                generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=group.leader_id or "",
            ))  # fmt: skip
        elif group.is_in(_S.COMPLETING_REBALANCE, _S.STABLE):
            # New metadata, or the leader asking for a rebalance (e.g. topic metadata changed).
            self._update_member_then_rebalance(group, member, req, now_ms)
        else:
            self._join_error(req, Errors.UNKNOWN_MEMBER_ID, member_id)

    def _park_join(self, member: Member, request_id: int) -> None:
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            # Superseded by a new JoinGroup of the same member (Kafka drops the old future).
            self.outbox.respond(JoinGroupResponse(member.awaiting_join,
                                                  Errors.REBALANCE_IN_PROGRESS,
                                                  member_id=member.member_id))  # fmt: skip
        member.awaiting_join = request_id

    def _update_member_then_rebalance(self, group: ClassicGroup, member: Member,
                                      req: JoinGroupRequest, now_ms: int) -> None:  # fmt: skip
        self._park_join(member, req.request_id)
        group.update_member(member, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, req.request_id)  # fmt: skip
        self.rb.maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _add_member(self, group: ClassicGroup, req: JoinGroupRequest, member_id: str,
                    now_ms: int) -> None:  # fmt: skip
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        req.protocols, awaiting_join=req.request_id, is_new=True)  # fmt: skip
        if group.is_in(_S.PREPARING_REBALANCE) and group.previous_state is _S.EMPTY:
            group.new_member_added = True
        group.add(member)
        # A new member cannot heartbeat before its first JoinGroup answer, and a client that
        # gave up waiting may retry with yet another new member: bound its wait.
        self.rb.reschedule_heartbeat(group, member, now_ms, self.config.new_member_join_timeout_ms)
        log.info("coordinator.member_added", group=group.group_id, member=member_id,
                 instance=req.group_instance_id, state=group.state.value)  # fmt: skip
        self.rb.maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _replace_static_member(self, group: ClassicGroup, req: JoinGroupRequest, old_id: str,
                               new_id: str, now_ms: int) -> None:  # fmt: skip
        """KIP-345: a known group.instance.id rejoins with no member id (a restart)."""
        assert req.group_instance_id is not None
        leader_before = group.leader_id
        old, new = group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._fence(old)
        self.rb.timers.cancel_heartbeat(group.group_id, old_id)
        self.rb.reschedule_heartbeat(group, new, now_ms)
        undo = StaticMemberWrite(group.group_id, req.request_id, req.api_version,
                                 req.group_instance_id, old_id, new_id, new.protocols,
                                 new.rebalance_timeout_ms, new.session_timeout_ms,
                                 leader_before)  # fmt: skip
        group.update_member(new, req.protocols, req.rebalance_timeout_ms,
                            req.session_timeout_ms, req.request_id)  # fmt: skip
        log.info("coordinator.static_member_replaced", group=group.group_id,
                 instance=req.group_instance_id, old=old_id, new=new_id)  # fmt: skip
        if group.is_in(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: no rebalance, just persist the new
                # member id, and answer once that is committed.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                self.rb.persist(group, assignment, undo)
            else:
                self.rb.maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in(_S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: rebalance.
            self.rb.prepare_rebalance(group, now_ms)
        elif group.is_in(_S.PREPARING_REBALANCE):
            self.rb.maybe_complete_join_phase(group, now_ms)
        else:
            raise InvariantViolation(f"static member {req.group_instance_id} replaced in "
                                     f"{group.state.value} group {group.group_id}")  # fmt: skip

    def _fence(self, old: Member) -> None:
        """The replaced member's parked requests: FENCED_INSTANCE_ID (it is a zombie now)."""
        if old.awaiting_join is not None:
            self.outbox.respond(JoinGroupResponse(old.awaiting_join, Errors.FENCED_INSTANCE_ID,
                                                  member_id=old.member_id))  # fmt: skip
        if old.awaiting_sync is not None:
            self.outbox.respond(SyncGroupResponse(old.awaiting_sync, Errors.FENCED_INSTANCE_ID))

    def static_member_written(self, write: StaticMemberWrite, error: Errors, now_ms: int) -> None:
        group = self.groups.get(write.group_id)
        member = None if group is None else group.members.get(write.new_member_id)
        if group is None or member is None or member.awaiting_join != write.request_id:
            return  # removed or superseded meanwhile: its JoinGroup was answered then
        if error is not Errors.NONE:
            # Kafka reverts to the old member id: the restart did not happen as far as the log
            # and the group know; the client retries.
            group.update_member(member, write.old_protocols, write.old_rebalance_timeout_ms,
                                write.old_session_timeout_ms, None)  # fmt: skip
            _, old = group.replace_static_member(write.instance_id, write.new_member_id,
                                                 write.old_member_id)  # fmt: skip
            self.rb.timers.cancel_heartbeat(group.group_id, write.new_member_id)
            self.rb.reschedule_heartbeat(group, old, now_ms)
            self.outbox.respond(JoinGroupResponse(
                write.request_id, append_error_to_response_error(error),
                member_id=UNKNOWN_MEMBER_ID, generation_id=group.generation_id,
                protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                leader=write.leader_before or "",
            ))  # fmt: skip
            return
        if not group.is_in(_S.STABLE):
            return  # a rebalance started meanwhile: the member is answered when it completes
        member.awaiting_join = None
        if write.api_version >= _SKIP_ASSIGNMENT_VERSION:
            is_leader = group.is_leader(member.member_id)
            self.outbox.respond(self.rb.join_response(group, member, write.request_id,
                                                      skip_assignment=is_leader))  # fmt: skip
        else:
            # Older clients must not believe they lead (they would reassign): the old leader id.
            self.outbox.respond(JoinGroupResponse(
                write.request_id, Errors.NONE, member_id=member.member_id,
                generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=write.leader_before or "",
            ))  # fmt: skip

    # ---------------------------------------------------------------------------- SyncGroup

    def sync(self, req: SyncGroupRequest, now_ms: int) -> None:
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(_S.EMPTY):
            self.outbox.respond(SyncGroupResponse(req.request_id, Errors.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, req)
        if error is not Errors.NONE:
            self.outbox.respond(SyncGroupResponse(req.request_id, error))
        elif group.is_in(_S.PREPARING_REBALANCE):
            self.outbox.respond(SyncGroupResponse(req.request_id, Errors.REBALANCE_IN_PROGRESS))
        elif group.is_in(_S.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            if member.awaiting_sync is not None:
                self.outbox.respond(SyncGroupResponse(member.awaiting_sync,
                                                      Errors.REBALANCE_IN_PROGRESS))  # fmt: skip
            member.awaiting_sync = req.request_id
            self._synced(group, req.member_id)
            if group.is_leader(req.member_id):
                given = {a.member_id: a.assignment for a in req.assignments}
                assignment = {m: given.get(m, b"") for m in group.members}
                log.info("coordinator.assignment_received", group=group.group_id,
                         generation=group.generation_id, leader=req.member_id)  # fmt: skip
                self.rb.persist(group, assignment, SyncAssignmentWrite(
                    group.group_id, group.generation_id, tuple(assignment.items())))  # fmt: skip
        else:  # Stable
            self._synced(group, req.member_id)
            member = group.members[req.member_id]
            self.outbox.respond(SyncGroupResponse(req.request_id, Errors.NONE,
                                                  group.protocol_type, group.protocol_name,
                                                  member.assignment))  # fmt: skip

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> Errors:
        if group.is_in(_S.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not Errors.NONE:
            return error
        if req.generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.rb.timers.cancel_sync(group.group_id)

    # ---------------------------------------------------------------------------- Heartbeat

    def heartbeat(self, req: HeartbeatRequest, now_ms: int) -> None:
        group = self.groups.get(req.group_id)
        error = Errors.UNKNOWN_MEMBER_ID
        if group is not None and group.is_in(_S.DEAD):
            error = Errors.COORDINATOR_NOT_AVAILABLE
        elif group is not None:
            error = group.validate_member(req.member_id, req.group_instance_id)
            if error is Errors.NONE and req.generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
            if error is Errors.NONE:
                # Members validated, so the group is not Empty.
                self.rb.reschedule_heartbeat(group, group.members[req.member_id], now_ms)
                if group.is_in(_S.PREPARING_REBALANCE):
                    error = Errors.REBALANCE_IN_PROGRESS
        self.outbox.respond(HeartbeatResponse(req.request_id, error))

    # --------------------------------------------------------------------------- LeaveGroup

    def leave(self, req: LeaveGroupRequest, now_ms: int) -> None:
        group = self.groups.get(req.group_id)
        if group is None:
            results = tuple(LeaveMemberResponse(m.member_id, m.group_instance_id,
                                                Errors.UNKNOWN_MEMBER_ID) for m in req.members)  # fmt: skip
            self.outbox.respond(LeaveGroupResponse(req.request_id, Errors.NONE, results))
            return
        if group.is_in(_S.DEAD):
            self.outbox.respond(LeaveGroupResponse(req.request_id,
                                                   Errors.COORDINATOR_NOT_AVAILABLE))  # fmt: skip
            return
        results = tuple(self._leave_one(group, identity) for identity in req.members)
        if any(r.error is Errors.NONE for r in results):
            if group.is_in(_S.STABLE, _S.COMPLETING_REBALANCE):
                self.rb.maybe_prepare_rebalance_or_complete_join(group, now_ms)
            elif group.is_in(_S.PREPARING_REBALANCE):
                self.rb.maybe_complete_join_phase(group, now_ms)
        self.outbox.respond(LeaveGroupResponse(req.request_id, Errors.NONE, results))

    def _leave_one(self, group: ClassicGroup, who: MemberIdentity) -> LeaveMemberResponse:
        error = Errors.NONE
        if who.member_id == UNKNOWN_MEMBER_ID:
            # KIP-345: an admin removes a static member by its instance id alone.
            member_id = None if who.group_instance_id is None \
                else group.static_member_id(who.group_instance_id)  # fmt: skip
            if member_id is None:
                error = Errors.UNKNOWN_MEMBER_ID
            else:
                self.rb.drop_member(group, group.members[member_id])
        elif who.member_id in group.pending_join_members:
            group.remove(who.member_id)
            self.rb.timers.cancel_heartbeat(group.group_id, who.member_id)
        else:
            error = group.validate_member(who.member_id, who.group_instance_id)
            if error is Errors.NONE:
                self.rb.drop_member(group, group.members[who.member_id])
        if error is Errors.NONE:
            log.info("coordinator.member_left", group=group.group_id, member=who.member_id,
                     instance=who.group_instance_id, reason=who.reason)  # fmt: skip
        return LeaveMemberResponse(who.member_id, who.group_instance_id, error)

    # -------------------------------------------------------------------------------- views

    def listed(self, states: tuple[str, ...], types: tuple[str, ...]) -> list[ListedGroup]:
        wanted_states = {s.strip().lower() for s in states}
        wanted_types = {t.strip().lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return []
        return [ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if not wanted_states or g.state.value.lower() in wanted_states]  # fmt: skip

    def describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, Errors.NONE)
        stable = group.is_in(_S.STABLE)
        members = tuple(DescribedGroupMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
            m.assignment,
        ) for m in group.members.values())  # fmt: skip
        return DescribedGroup(group_id, Errors.NONE, group.state.value,
                              group.protocol_type or "",
                              (group.protocol_name or "") if stable else "", members)  # fmt: skip


def _names(req: JoinGroupRequest) -> frozenset[str]:
    return frozenset(p.name for p in req.protocols)


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current

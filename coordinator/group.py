"""A classic group: its members, generation, leader and chosen protocol, and the one place its
state changes (Kafka's ClassicGroup.java and ClassicGroupState.java).

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
      ^                 |      ^                                             |
      |   no member     |      |  join, leave, member failure, leader join   | leader's SyncGroup
      +--left at the ---+      +------------------ Stable <------------------+ (assignment stored)
         join deadline                              |
    Dead <-- from any state: DeleteGroups (Empty only), the offsets partition is unloaded

`_VALID_PREVIOUS` is the transition table (ClassicGroupState.validPreviousStates); a transition
outside it is an InvariantViolation, as is a generation that does not increase by one.

A member is *awaiting join* while its JoinGroup is parked (`awaiting_join` holds the request id)
and *awaiting sync* while its SyncGroup is; the coordinator answers those later. Static members
(KIP-345) are indexed by group.instance.id; pending members (KIP-394) have been given a member id
but have not joined with it yet.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from coordinator.errors import InvariantViolation
from coordinator.messages import JoinGroupProtocol, JoinGroupResponseMember
from coordinator.records import GroupMetadataValue, MemberMetadata
from quorum.metadata.errors import Errors

__all__ = ["ClassicGroup", "GroupState", "Member", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
_VALID_PREVIOUS: Mapping[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    assignment: bytes = b""
    awaiting_join: int | None = None  # request id of the parked JoinGroup
    awaiting_sync: int | None = None  # request id of the parked SyncGroup
    # A member added in this rebalance: its heartbeat deadline is the new-member join timeout,
    # and it can expire even while awaiting join (ClassicGroupMember.hasSatisfiedHeartbeat).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.protocols)

    def metadata(self, protocol_name: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        raise InvariantViolation(f"member {self.member_id} does not support {protocol_name}")

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among `candidates`."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise InvariantViolation(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int, *, state: GroupState = GroupState.EMPTY,
                 generation_id: int = 0, protocol_type: str | None = None,
                 protocol_name: str | None = None, leader_id: str | None = None) -> None:  # fmt: skip
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp_ms = now_ms
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_join_members: set[str] = set()  # KIP-394: given an id, not joined yet
        self.pending_sync_members: set[str] = set()  # joined this generation, not synced yet
        self._supported_protocols: Counter[str] = Counter()
        # Another member joined during the initial rebalance delay: extend it (KIP-134).
        self.new_member_added = False

    # ------------------------------------------------------------------------- transitions

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise InvariantViolation(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not a transition"
            )
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def undo_delete(self, now_ms: int) -> None:
        """The tombstones of a DeleteGroups failed to be written: the group is Empty again, as
        the log still says (Kafka reverts its in-memory timeline to the last committed offset)."""
        if self.state is not GroupState.DEAD or self.previous_state is not GroupState.EMPTY:
            raise InvariantViolation(f"group {self.group_id}: no deletion to undo")
        self.state, self.previous_state = GroupState.EMPTY, GroupState.DEAD
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def init_next_generation(self, now_ms: int) -> None:
        """The join phase is over: next generation, its protocol, and CompletingRebalance (or
        Empty when nobody is left)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # ----------------------------------------------------------------------------- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise InvariantViolation(f"static member {member.group_instance_id} added twice")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.protocol_type != self.protocol_type or not self.supports_protocols(
            member.protocol_type, member.protocol_names()
        ):
            raise InvariantViolation(f"member {member.member_id} cannot join {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names())
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported_protocols.subtract(member.protocol_names())
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: Member, protocols: tuple[JoinGroupProtocol, ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      awaiting_join: int | None) -> None:  # fmt: skip
        self._supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self._supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = awaiting_join

    def replace_static_member(self, instance_id: str, old_member_id: str,
                              new_member_id: str) -> tuple[Member, Member]:  # fmt: skip
        """KIP-345: the instance rejoined without its member id; it takes over the old member's
        place under a new id. Returns (old, new); the caller fences the old one's parked
        requests (FENCED_INSTANCE_ID)."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise InvariantViolation(f"no member {old_member_id} to replace in {self.group_id}")
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                     old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                     old.protocols, old.assignment)  # fmt: skip
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return old, new

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did. False when nobody
        rejoined (or the group has no leader)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (ClassicGroup.rebalanceTimeoutMs)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, instance_id: str | None) -> Errors:
        """FENCED_INSTANCE_ID when `instance_id` belongs to another member id (KIP-345),
        UNKNOWN_MEMBER_ID when the member is not in the group, else NONE."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return Errors.FENCED_INSTANCE_ID
        return Errors.NONE if member_id in self.members else Errors.UNKNOWN_MEMBER_ID

    def validate_offset_commit(self, member_id: str, instance_id: str | None,
                               generation_id: int) -> Errors:  # fmt: skip
        """ClassicGroup.validateOffsetCommit for a non-transactional commit."""
        if self.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return Errors.NONE  # a simple commit (admin client, manual assignment)
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not Errors.NONE:
                return error
            if generation_id != self.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif self.state is not GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID  # no member id: only an empty group takes it
        if self.state is GroupState.COMPLETING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    # --------------------------------------------------------------------------- protocols

    def supports_protocols(self, protocol_type: str, names: frozenset[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return protocol_type == self.protocol_type and any(
            self._supported_protocols[name] == n for name in names
        )

    def candidate_protocols(self) -> frozenset[str]:
        n = len(self.members)
        return frozenset(name for name, count in self._supported_protocols.items() if count == n)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports; the most
        votes wins (ties: the first to reach the count, in member order)."""
        if not self.members:
            raise InvariantViolation(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    # ------------------------------------------------------------------------------- views

    def join_response_members(self) -> tuple[JoinGroupResponseMember, ...]:
        """Every member's metadata for the chosen protocol: what the leader assigns from."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise InvariantViolation(f"no member list of {self.group_id} in {self.state.value}")
        protocol = self.protocol_name or ""
        return tuple(JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                     for m in self.members.values())  # fmt: skip

    def to_record(self, assignment: Mapping[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue of this group with `assignment` (member id -> bytes)."""
        members = []
        for m in self.members.values():
            if self.protocol_name is None:
                raise InvariantViolation(f"non-empty group {self.group_id} has no protocol")
            members.append(MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
                assignment.get(m.member_id, b""),
            ))  # fmt: skip
        return GroupMetadataValue(self.protocol_type or "", self.generation_id,
                                  self.protocol_name, self.leader_id, self.state_timestamp_ms,
                                  tuple(members))  # fmt: skip

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """The group a GroupMetadataValue describes: Stable with its members, or Empty
        (GroupMetadataManager.replay). Each member supports only the chosen protocol."""
        group = cls(
            group_id, value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0
            else now_ms,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            generation_id=value.generation, protocol_type=value.protocol_type or None,
            protocol_name=value.protocol, leader_id=value.leader,
        )  # fmt: skip
        for m in value.members:
            rebalance_ms = (
                m.session_timeout_ms if m.rebalance_timeout_ms == -1 else m.rebalance_timeout_ms
            )
            group.add(Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance_ms,
                m.session_timeout_ms, value.protocol_type,
                (JoinGroupProtocol(value.protocol or "", m.subscription),), m.assignment,
            ))  # fmt: skip
        return group

    def is_simple(self) -> bool:
        """A group only used to store offsets (no protocol type, no generation)."""
        return self.protocol_type is None and self.generation_id == 0 and not self.members

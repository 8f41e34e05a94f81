"""A Hypothesis rule-based state machine: five consumer clients (three dynamic, two static) in
group "g" and a manual-assignment client committing to group "h", against the coordinator, with
time, appends committed or failed in order, and coordinator failovers (in-flight appends lost or
in the log). Clients behave like Kafka's: they join (again after MEMBER_ID_REQUIRED or
UNKNOWN_MEMBER_ID), sync (the leader assigns every member), heartbeat, commit, leave, restart.

Checked after every step, against a simple model:
- every request is answered at most once, and, when everything has settled, exactly once;
- within a coordinator's life a group's generation never decreases, and the GroupMetadata
  records of "g" in the log never go back a generation;
- one leader per generation: JoinGroup answers of a generation agree on the leader within a
  coordinator's life, and the assignments handed out for a generation all come from one leader
  (static members count as their instance: KIP-345 keeps their place under a new member id);
- a member (or pending member id) removed from the group gets UNKNOWN_MEMBER_ID (or, when its
  instance id now belongs to another member id, FENCED_INSTANCE_ID) for as long as that
  coordinator lives;
- the committed offsets of both groups are exactly the last value whose record reached the log
  (acknowledged commits always do), before and after every failover;
- a group's leader is one of its members, a parked SyncGroup exists only in
  CompletingRebalance, an Empty group has no members.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from coordinator import (
    CoordinatorRecord,
    DeleteGroupsRequest,
    GroupCoordinatorConfig,
    GroupState,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
    decode_key,
    decode_value,
)
from coordinator.group import ClassicGroup
from coordinator.offsets import OffsetStore
from coordinator.outbox import (
    GroupMetadataWrite,
    OffsetCommitWrite,
    StaticMemberWrite,
    SyncAssignmentWrite,
)
from coordinator.rebalance import Rebalancer
from coordinator.records import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue
from quorum.metadata.errors import Errors
from tests.coordinator.driver import Broker

CONFIG = GroupCoordinatorConfig(
    offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=1_000
)
CLIENTS = ("d0", "d1", "d2", "s0", "s1")  # s*: static (group.instance.id = the name)
PARTITIONS = (("t", 0), ("t", 1), ("t", 2))
SUBSCRIPTIONS = (
    (JoinGroupProtocol("range", b"v1"),),
    (JoinGroupProtocol("range", b"v2"), JoinGroupProtocol("roundrobin", b"v2")),
)
REJECTED_IDENTITY = {Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID}


def identity(member_id: str) -> str:
    """Who a member is: its instance for a static member ("s0-7" -> "s0"), else its id."""
    prefix = member_id.rsplit("-", 1)[0]
    return prefix if prefix.startswith("s") else member_id


@dataclass
class Client:
    name: str
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: tuple[str, ...] = ()  # the leader's member list of its generation
    skip_assignment: bool = False
    subscription: int = 0
    version: int = 5  # the JoinGroup version its client library speaks

    @property
    def instance(self) -> str | None:
        return self.name if self.name.startswith("s") else None


@dataclass
class Sent:
    client: str | None
    kind: str
    member_id: str
    epoch: int
    must_be_rejected: bool
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    group: str = "g"


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b = Broker(CONFIG, auto_commit=False)
        self.clients = {name: Client(name) for name in CLIENTS}
        self.sent: dict[int, Sent] = {}
        self.seen = 0  # answers processed
        self.model: dict[str, dict[tuple[str, int], int]] = {"g": {}, "h": {}}
        self.leaders: dict[tuple[int, int], str] = {}  # (epoch, generation) -> leader identity
        self.assigned_by: dict[int, str] = {}  # generation -> identity of the assigning leader
        self.max_generation = 0
        self.removed: set[str] = set()
        self.known = self._known_ids()
        self.latest: dict[tuple[str, str], int] = {}  # (client, kind) -> its latest request

    # ------------------------------------------------------------------------------ helpers

    def _send(self, client: Client | None, kind: str, naming: str, make: object,
              offsets: dict[tuple[str, int], int] | None = None, group: str = "g",
              **kwargs: object) -> None:  # fmt: skip
        """Send a request naming member id `naming`; if that member was removed from the group
        by this coordinator, the answer must reject it."""
        rejected = bool(naming) and naming in self.removed
        rid, _ = self.b.send(make, **kwargs)
        self.sent[rid] = Sent(client.name if client else None, kind, naming, self.b.epoch,
                              rejected, offsets or {}, group)  # fmt: skip
        if client is not None:
            self.latest[(client.name, kind)] = rid
        self._process()

    def _process(self) -> None:
        while self.seen < len(self.b.answered):
            rid = self.b.answered[self.seen]
            self.seen += 1
            sent = self.sent.get(rid)
            if sent is not None:
                self._react(rid, sent, self.b.responses[rid])

    def _react(self, rid: int, sent: Sent, response: object) -> None:
        """Check the answer, then do what a Kafka consumer does with it: rejoin with the id it
        was given, sync right after joining, rejoin when told a rebalance is on or its
        generation is stale, start over when it is unknown or fenced."""
        client = self.clients.get(sent.client or "")
        error = getattr(response, "error", Errors.NONE)
        if isinstance(response, LeaveGroupResponse) and response.members:
            error = response.members[0].error
        if isinstance(response, OffsetCommitResponse):
            self._committed(sent, response)
            return
        if sent.must_be_rejected and sent.epoch == self.b.epoch:
            assert error in REJECTED_IDENTITY, (sent, response)
            event(f"a removed member's {sent.kind} was rejected")
        if client is None or sent.epoch != self.b.epoch:
            return
        if self.latest.get((client.name, sent.kind)) != rid:
            return  # a request the client has given up on (it sent another since)
        if error in REJECTED_IDENTITY:
            client.member_id, client.generation = "", -1
        elif isinstance(response, JoinGroupResponse):
            self._joined(client, sent, response)
        elif isinstance(response, SyncGroupResponse):
            self._synced(client, response)
        elif (
            error in (Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION) and client.member_id
        ):
            self._join(client)

    def _joined(self, client: Client, sent: Sent, r: JoinGroupResponse) -> None:
        if r.error is Errors.MEMBER_ID_REQUIRED:
            client.member_id = r.member_id
            self._join(client)
        elif r.error is Errors.NONE:
            key = (sent.epoch, r.generation_id)
            leader = identity(r.leader)
            assert self.leaders.setdefault(key, leader) == leader, (key, leader, self.leaders[key])
            client.member_id, client.generation, client.leader = (
                r.member_id,
                r.generation_id,
                r.leader,
            )
            client.members = tuple(m.member_id for m in r.members)
            client.skip_assignment = r.skip_assignment
            self._sync(client)

    def _synced(self, client: Client, r: SyncGroupResponse) -> None:
        if r.error is Errors.REBALANCE_IN_PROGRESS:
            self._join(client)
        if r.error is not Errors.NONE or not r.assignment:
            return
        generation, leader, member = r.assignment.decode().split(":")
        assert int(generation) == client.generation, (client, r)
        assert identity(member) == identity(client.member_id), (client, r)
        assert self.assigned_by.setdefault(int(generation), leader) == leader
        event(
            f"assignments reached generation {min(int(generation), 3)}{'+' * (int(generation) >= 3)}"
        )

    def _join(self, c: Client) -> None:
        self._send(c, "join", c.member_id, JoinGroupRequest, api_version=c.version, group_id="g",
                   session_timeout_ms=10_000, rebalance_timeout_ms=15_000, member_id=c.member_id,
                   protocol_type="consumer", protocols=SUBSCRIPTIONS[c.subscription],
                   group_instance_id=c.instance, client_id=c.name)  # fmt: skip

    def _sync(self, c: Client) -> None:
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if c.leader == c.member_id and not c.skip_assignment:
            leader = identity(c.member_id)
            assignments = tuple(SyncGroupAssignment(m, f"{c.generation}:{leader}:{m}".encode())
                                for m in c.members)  # fmt: skip
        self._send(c, "sync", c.member_id, SyncGroupRequest, api_version=5, group_id="g",
                   generation_id=c.generation, member_id=c.member_id,
                   group_instance_id=c.instance, assignments=assignments)  # fmt: skip

    def _committed(self, sent: Sent, r: OffsetCommitResponse) -> None:
        """A removed member's commit is rejected; an acknowledged one is the log's last word
        for its partition (the model follows the log as appends land)."""
        for topic in r.topics:
            for p in topic.partitions:
                if sent.must_be_rejected and sent.epoch == self.b.epoch:
                    assert p.error in REJECTED_IDENTITY, (sent, r)
                    event("a removed member's commit was rejected")
                if p.error is Errors.NONE:
                    part = (topic.name, p.partition_index)
                    assert self.model[sent.group].get(part) == sent.offsets[part], (sent, r)

    def _known_ids(self) -> set[str]:
        group = self.b.group("g")
        return set() if group is None else set(group.members) | group.pending_join_members

    # -------------------------------------------------------------------------------- rules

    @rule(name=st.sampled_from(CLIENTS), version=st.sampled_from([3, 5, 9]), change=st.booleans())
    def join(self, name: str, version: int, change: bool) -> None:
        """A (re)join: a new process, a subscription change (`change`), a poll after a while."""
        c = self.clients[name]
        c.version = version
        if change:
            c.subscription = 1 - c.subscription
        self._join(c)

    @rule(name=st.sampled_from(CLIENTS))
    def sync(self, name: str) -> None:
        c = self.clients[name]
        if c.generation >= 0:
            self._sync(c)

    @rule(name=st.sampled_from(CLIENTS))
    def heartbeat(self, name: str) -> None:
        c = self.clients[name]
        if c.member_id:
            self._send(c, "heartbeat", c.member_id, HeartbeatRequest, api_version=4, group_id="g",
                       generation_id=c.generation, member_id=c.member_id,
                       group_instance_id=c.instance)  # fmt: skip

    @rule(
        name=st.sampled_from(CLIENTS),
        partition=st.sampled_from(PARTITIONS),
        offset=st.integers(0, 99),
    )
    def commit(self, name: str, partition: tuple[str, int], offset: int) -> None:
        c = self.clients[name]
        if c.generation >= 0:
            self._commit(c, "g", partition, offset, c.generation, c.member_id, c.instance)

    @rule(partition=st.sampled_from(PARTITIONS), offset=st.integers(0, 99))
    def simple_commit(self, partition: tuple[str, int], offset: int) -> None:
        self._commit(None, "h", partition, offset, -1, "", None)

    def _commit(self, c: Client | None, group: str, partition: tuple[str, int], offset: int,
                generation: int, member_id: str, instance: str | None) -> None:  # fmt: skip
        topics = (OffsetCommitTopic(partition[0], (OffsetCommitPartition(partition[1], offset),)),)
        self._send(c, "commit", member_id, OffsetCommitRequest, {partition: offset}, group,
                   api_version=8, group_id=group, topics=topics, generation_id=generation,
                   member_id=member_id, group_instance_id=instance)  # fmt: skip

    @rule(name=st.sampled_from(CLIENTS))
    def leave(self, name: str) -> None:
        c = self.clients[name]
        if c.member_id:
            self._send(c, "leave", c.member_id, LeaveGroupRequest, api_version=4, group_id="g",
                       members=(MemberIdentity(c.member_id, c.instance),))  # fmt: skip

    @rule(name=st.sampled_from(CLIENTS))
    def restart(self, name: str) -> None:
        """The process restarts: no member id (a static one keeps its instance id); what its
        previous incarnation was waiting for is nobody's business now."""
        self.clients[name] = Client(name)
        self.latest = {k: rid for k, rid in self.latest.items() if k[0] != name}

    @rule()
    def delete_h(self) -> None:
        self._send(None, "delete", "", DeleteGroupsRequest, group="h", api_version=2,
                   groups_names=("h",))  # fmt: skip

    @rule(ms=st.sampled_from([1, 300, 1_000, 4_000, 10_000, 16_000]))
    def advance(self, ms: int) -> None:
        self.b.advance(ms)
        self._process()

    @rule()
    def progress(self) -> None:
        """A healthy second: every append commits, every member heartbeats."""
        self.complete(True, len(self.b.pending))
        self.b.advance(1_000)
        self._process()
        for c in self.clients.values():
            if c.member_id and c.generation >= 0:
                self.heartbeat(c.name)

    @rule(ok=st.booleans(), n=st.sampled_from([1, 100]))
    def complete(self, ok: bool, n: int) -> None:
        """The oldest `n` appends are committed (or fail: the ISR shrank below min.insync)."""
        for _ in range(min(n, len(self.b.pending))):
            append = self.b.pending[0]
            self.b.complete(1, Errors.NONE if ok else Errors.NOT_ENOUGH_REPLICAS)
            if ok:
                self._log_landed(append.records)
            self._process()

    @rule(landed=st.booleans())
    def failover(self, landed: bool) -> None:
        in_flight = self.b.failover(pending_reach_the_log=landed)
        group = self.b.group("g")
        if group is not None and group.state is GroupState.STABLE:
            event("a failover loaded a Stable group")
        if landed:
            for append in in_flight:
                self._log_landed(append.records)
        self._process()
        self.removed.clear()
        self.known = self._known_ids()
        self.max_generation = 0
        group = self.b.group("g")
        if group is not None:
            self.max_generation = group.generation_id

    def _log_landed(self, records: tuple[CoordinatorRecord, ...]) -> None:
        """Records reached the log: the model's offsets follow them (deletes included)."""
        for record in records:
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey):
                value = decode_value(key, record.value)
                part = (key.topic, key.partition)
                if value is None:
                    self.model[key.group].pop(part, None)
                else:
                    assert isinstance(value, OffsetCommitValue)
                    self.model[key.group][part] = value.offset

    # --------------------------------------------------------------------------- invariants

    @invariant()
    def removed_members_stay_removed(self) -> None:
        now = self._known_ids()
        self.removed |= self.known - now
        self.known = now

    @invariant()
    def group_structure(self) -> None:
        group = self.b.group("g")
        if group is None:
            return
        assert group.generation_id >= self.max_generation
        self.max_generation = group.generation_id
        if group.members:
            assert group.leader_id in group.members
        else:
            assert group.leader_id is None
        if group.state is GroupState.EMPTY:
            assert not group.members
        for member in group.members.values():
            if member.awaiting_sync is not None:
                assert group.state is GroupState.COMPLETING_REBALANCE
        for instance, member_id in group.static_members.items():
            assert group.members[member_id].group_instance_id == instance

    @invariant()
    def logged_generations_never_go_back(self) -> None:
        generation = -1
        for record in self.b.logs[self.b.coord.partition_for("g")]:
            key = decode_key(record.key)
            if key is not None and not isinstance(key, OffsetCommitKey) and key.group == "g":
                value = decode_value(key, record.value)
                assert isinstance(value, GroupMetadataValue)
                assert value.generation >= generation
                generation = value.generation

    @invariant()
    def committed_offsets_are_the_log_s_last_word(self) -> None:
        for group in ("g", "h"):
            seen = self.seen
            assert self.b.fetch(group) == self.model[group], group
            self.seen = seen + (len(self.b.answered) - seen)  # our own fetch: nothing to react to

    def teardown(self) -> None:
        """Settle: commit every append, let every deadline pass. Every request is answered."""
        for _ in range(20):
            self.complete(True, len(self.b.pending))
            self.b.advance(60_000)
            self._process()
        unanswered = sorted(set(self.sent) - set(self.b.responses))
        assert not unanswered, [self.sent[r] for r in unanswered]


GroupMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
TestGroupMachine = GroupMachine.TestCase


# ----------------------------------------------------------------------------- planted bugs

PersistThen = GroupMetadataWrite | SyncAssignmentWrite | StaticMemberWrite


def _offsets_visible_before_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    original = OffsetStore.commit_written

    def eager(self: OffsetStore, write: OffsetCommitWrite, error: Errors) -> None:
        for key, value in write.offsets:
            self.apply(key, value)
        original(self, write, error)

    monkeypatch.setattr(OffsetStore, "commit_written", eager)


def _assignment_handed_out_before_committed(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Rebalancer.persist

    def eager(self: Rebalancer, group: ClassicGroup, assignment: Mapping[str, bytes],
              then: PersistThen) -> None:  # fmt: skip
        original(self, group, assignment, then)
        if isinstance(then, SyncAssignmentWrite):
            self.sync_written(then, Errors.NONE, group.state_timestamp_ms)

    monkeypatch.setattr(Rebalancer, "persist", eager)


@pytest.mark.parametrize(
    "plant", [_offsets_visible_before_committed, _assignment_handed_out_before_committed]
)
def test_the_machine_catches_planted_bugs(monkeypatch: pytest.MonkeyPatch,
                                          plant: Callable[[pytest.MonkeyPatch], None]) -> None:  # fmt: skip
    """The oracle is not blind: a coordinator that shows offsets before their record is
    committed, or hands out an assignment before it is, is caught."""
    plant(monkeypatch)
    with pytest.raises(AssertionError):
        run_state_machine_as_test(GroupMachine, settings=settings(
            max_examples=400, stateful_step_count=60, deadline=None, database=None,
            phases=[Phase.generate], suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        ))  # fmt: skip

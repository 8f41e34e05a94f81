"""A test driver for the group coordinator: one broker leading every `__consumer_offsets`
partition, executing effects exactly as a runtime must (appends to an in-memory log per partition,
completed in order, responses recorded once per request id), with explicit simulated time.

`auto_commit=True` completes every append at once (a healthy ISR); otherwise appends wait in
`pending` until `complete()` commits or fails the oldest ones, which is how tests look at what is
visible before and after records are committed.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

from coordinator import (
    AppendCompleted,
    AppendRecords,
    CoordinatorRecord,
    Effect,
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupResponse,
    GroupState,
    HeartbeatRequest,
    JoinGroupProtocol,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    OffsetFetchGroup,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SendResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from coordinator.group import ClassicGroup
from quorum.metadata.errors import Errors

RANGE = (JoinGroupProtocol("range", b"sub-range"),)
CONFIG = GroupCoordinatorConfig(offsets_topic_num_partitions=3)


class Broker:
    def __init__(self, config: GroupCoordinatorConfig = CONFIG, *, auto_commit: bool = True,
                 logs: dict[int, list[CoordinatorRecord]] | None = None, epoch: int = 0,
                 now_ms: int = 0) -> None:  # fmt: skip
        self.config = config
        self.auto_commit = auto_commit
        self.now_ms = now_ms
        self.epoch = epoch
        self._suffixes = itertools.count(1)
        self.coord = GroupCoordinator(config, member_id_suffix=lambda: str(next(self._suffixes)))
        self.logs: dict[int, list[CoordinatorRecord]] = defaultdict(list)
        self.pending: list[AppendRecords] = []
        self.responses: dict[int, GroupResponse] = {}
        self.answered: list[int] = []  # request ids in the order they were answered
        self._request_ids = itertools.count(1)
        for partition, records in (logs or {}).items():
            self.logs[partition] = list(records)
        self._load_all()

    def _load_all(self) -> None:
        for partition in range(self.config.offsets_topic_num_partitions):
            self.run(self.coord.load(partition, self.epoch, self.logs[partition], self.now_ms))

    def failover(self, *, pending_reach_the_log: bool) -> list[AppendRecords]:
        """The coordinator broker dies; another one (with the same log, as an ISR member would)
        becomes leader of every offsets partition and loads it. Appends in flight either made it
        into the log or not; their requests were answered NOT_COORDINATOR. Request ids go on.
        Returns the appends that were in flight."""
        for partition in range(self.config.offsets_topic_num_partitions):
            self.run(self.coord.unload(partition, self.epoch + 1))
        in_flight, self.pending = self.pending, []
        if pending_reach_the_log:
            for append in in_flight:
                self.logs[append.partition] += append.records
        self.epoch += 1
        self.coord = GroupCoordinator(
            self.config, member_id_suffix=lambda: str(next(self._suffixes))
        )
        self._load_all()
        return in_flight

    # ------------------------------------------------------------------------ effects, time

    def run(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, SendResponse):
                rid = effect.response.request_id
                assert rid not in self.responses, f"request {rid} answered twice"
                self.responses[rid] = effect.response
                self.answered.append(rid)
            else:
                assert isinstance(effect, AppendRecords)
                assert effect.leader_epoch == self.epoch
                self.pending.append(effect)
        if self.auto_commit and self.pending:
            self.complete()

    def complete(self, n: int | None = None, error: Errors = Errors.NONE) -> None:
        """Commit (or fail with `error`) the `n` oldest pending appends (all by default)."""
        count = len(self.pending) if n is None else n
        for _ in range(count):
            append = self.pending.pop(0)
            if error is Errors.NONE:
                self.logs[append.partition] += append.records
            self.run(self.coord.append_completed(
                AppendCompleted(append.partition, append.append_id, error), self.now_ms))  # fmt: skip

    def advance(self, ms: int) -> None:
        """Move time forward by `ms`, firing every deadline at its own time on the way."""
        target = self.now_ms + ms
        while (deadline := self.coord.next_deadline_ms()) is not None and deadline <= target:
            self.now_ms = max(self.now_ms, deadline)
            self.run(self.coord.tick(self.now_ms))
        self.now_ms = target
        self.run(self.coord.tick(self.now_ms))

    def advance_to(self, now_ms: int) -> None:
        self.advance(now_ms - self.now_ms)

    # ----------------------------------------------------------------------------- requests

    def send(self, make: Any, **kwargs: Any) -> tuple[int, GroupResponse | None]:
        rid = next(self._request_ids)
        self.run(self.coord.handle(make(request_id=rid, **kwargs), self.now_ms))
        return rid, self.responses.get(rid)

    def join(self, group: str, member_id: str = "", *, version: int = 5,
             protocols: tuple[JoinGroupProtocol, ...] = RANGE, session_ms: int = 10_000,
             rebalance_ms: int = 30_000, instance: str | None = None, client: str = "c",
             protocol_type: str = "consumer") -> tuple[int, Any]:  # fmt: skip
        return self.send(JoinGroupRequest, api_version=version, group_id=group,
                         session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                         member_id=member_id, protocol_type=protocol_type, protocols=protocols,
                         group_instance_id=instance, client_id=client, client_host="/127.0.0.1")  # fmt: skip

    def sync(self, group: str, member_id: str, generation: int,
             assignments: dict[str, bytes] | None = None, *, instance: str | None = None,
             protocol_name: str | None = None) -> tuple[int, Any]:  # fmt: skip
        given = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
        return self.send(SyncGroupRequest, api_version=5, group_id=group,
                         generation_id=generation, member_id=member_id,
                         group_instance_id=instance, protocol_type="consumer",
                         protocol_name=protocol_name, assignments=given)  # fmt: skip

    def heartbeat(self, group: str, member_id: str, generation: int,
                  instance: str | None = None) -> Errors:  # fmt: skip
        _, response = self.send(HeartbeatRequest, api_version=4, group_id=group,
                                generation_id=generation, member_id=member_id,
                                group_instance_id=instance)  # fmt: skip
        assert response is not None
        return response.error  # type: ignore[no-any-return]

    def leave(self, group: str, *members: MemberIdentity) -> Any:
        return self.send(LeaveGroupRequest, api_version=5, group_id=group, members=members)[1]

    def commit(self, group: str | None, offsets: dict[tuple[str, int], int], *,
               generation: int = -1, member_id: str = "", instance: str | None = None,
               version: int = 8, metadata: str = "") -> tuple[int, Any]:  # fmt: skip
        topics: dict[str, list[OffsetCommitPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitPartition(partition, offset, metadata, committed_leader_epoch=1)
            )
        return self.send(OffsetCommitRequest, api_version=version, group_id=group,
                         topics=tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()),
                         generation_id=generation, member_id=member_id,
                         group_instance_id=instance)  # fmt: skip

    def fetch(self, group: str, *, require_stable: bool = False) -> dict[tuple[str, int], Any]:
        """Every committed offset of `group`: (topic, partition) -> offset, or the error."""
        _, response = self.send(OffsetFetchRequest, api_version=8,
                                groups=(OffsetFetchGroup(group),), require_stable=require_stable)  # fmt: skip
        assert isinstance(response, OffsetFetchResponse)
        (result,) = response.groups
        assert result.error is Errors.NONE, result.error
        return {(t.name, p.partition_index): p.committed_offset if p.error is Errors.NONE
                else p.error for t in result.topics for p in t.partitions}  # fmt: skip

    # ---------------------------------------------------------------------------- inspection

    def group(self, group_id: str) -> ClassicGroup | None:
        shard = self.coord.shard(self.coord.partition_for(group_id))
        assert shard is not None
        return shard.groups.get(group_id)

    def state(self, group_id: str) -> GroupState | None:
        group = self.group(group_id)
        return None if group is None else group.state

    def reloaded(self, *, after_ms: int = 0, **kwargs: Any) -> Broker:
        """A new leader of every offsets partition, loading the committed records `after_ms`
        after this broker's last moment (this one is left as it was: dead)."""
        return Broker(self.config, logs=dict(self.logs), epoch=self.epoch + 1,
                      now_ms=self.now_ms + after_ms, **kwargs)  # fmt: skip


def stable_group(b: Broker, group: str, n: int, *, version: int = 5,
                 instances: tuple[str | None, ...] | None = None) -> tuple[list[str], int]:  # fmt: skip
    """Bring `n` members into a Stable group (each gets assignment b"a-<member>"); returns the
    member ids (the leader first) and the generation."""
    ids: list[str] = []
    parked: list[int] = []
    for i in range(n):
        instance = None if instances is None else instances[i]
        rid, response = b.join(group, version=version, instance=instance, client=f"c{i}")
        if response is not None and response.error is Errors.MEMBER_ID_REQUIRED:
            rid, response = b.join(group, response.member_id, version=version, client=f"c{i}")
        assert response is None, response
        parked.append(rid)
    while not all(rid in b.responses for rid in parked):  # KIP-134: the delay may extend
        b.advance(b.config.group_initial_rebalance_delay_ms)
    joins = [b.responses[rid] for rid in parked]
    assert all(r.error is Errors.NONE for r in joins), joins
    leader = joins[0].leader
    generation = joins[0].generation_id
    ids = [leader] + [r.member_id for r in joins if r.member_id != leader]
    b.sync(group, leader, generation, {m: f"a-{m}".encode() for m in ids})
    for member in ids[1:]:
        b.sync(group, member, generation)
    assert b.state(group) is GroupState.STABLE
    return ids, generation

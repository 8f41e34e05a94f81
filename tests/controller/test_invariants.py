"""Random controller operation sequences (hypothesis) against the controller's safety invariants:
a leader is in its ISR and usable; leader_epoch and partition_epoch only grow; without ELR the
ISR is never empty; a fenced or shutting-down broker is never added to an ISR (it stays only as
the last member of a partition with no leader, Kafka's rule); RECOVERING means an ISR of one;
every record the controller builds applies cleanly."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller import (
    AlterConfigsRequest,
    AlterPartitionRequest,
    BrokerState,
    ControllerConfig,
    DeleteTopicRequest,
    ElectLeadersRequest,
    ReportReplicaPositionRequest,
)
from quorum.metadata import NO_LEADER, Errors, LeaderRecoveryState, MetadataImage
from tests.controller.driver import Driver

BROKERS = (101, 102, 103, 104)
TOPICS = ("a", "b")

register_op = st.tuples(st.just("register"), st.sampled_from(BROKERS), st.booleans())
heartbeat_op = st.tuples(
    st.just("heartbeat"),
    st.sampled_from(BROKERS),
    st.integers(0, 3).map(lambda v: v != 0),  # mostly caught up
    st.integers(0, 9),  # 0: want_fence, 1: want_shut_down, else plain
)
advance_op = st.tuples(st.just("advance"), st.integers(0, 4000))
tick_op = st.tuples(st.just("tick"))
create_op = st.tuples(
    st.just("create"),
    st.sampled_from(TOPICS),
    st.integers(1, 3),
    st.integers(1, 3),
    st.booleans(),  # unclean
    st.integers(1, 2),  # min isr
    st.sampled_from(["isr", "quorum"]),
)
alter_op = st.tuples(
    st.just("alter"),
    st.sampled_from(TOPICS),
    st.integers(0, 2),
    st.integers(0, 15),  # bit mask over the replicas: the proposed ISR (bit 3: an outsider)
    st.integers(0, 5),  # 0: stale leader epoch, 1: stale partition epoch, 2: stale member epoch
)
elect_op = st.tuples(
    st.just("elect"), st.sampled_from(TOPICS), st.sampled_from(["preferred", "unclean"])
)
delete_op = st.tuples(st.just("delete"), st.sampled_from(TOPICS))
report_op = st.tuples(  # quorum mode: replicas' positions at the fenced epoch
    st.just("report"),
    st.sampled_from(TOPICS),
    st.integers(0, 2),
    st.integers(1, 7),  # bit mask over the replicas: who reports
    st.integers(-1, 3),  # last epoch (of the first reporter; the others vary)
    st.integers(0, 50),  # LEO (likewise)
    st.integers(0, 5),  # 0: an older epoch, 1: a newer one, else the current one
)
config_op = st.tuples(
    st.just("config"),
    st.sampled_from(TOPICS),
    st.sampled_from(["unclean.leader.election.enable", "min.insync.replicas"]),
    st.sampled_from([None, "1", "2", "true", "false"]),
)
# Weighted towards what moves partitions: heartbeats, ISR changes, time.
ops = st.one_of(
    heartbeat_op,
    heartbeat_op,
    heartbeat_op,
    heartbeat_op,
    alter_op,
    alter_op,
    alter_op,
    advance_op,
    advance_op,
    tick_op,
    tick_op,
    register_op,
    create_op,
    config_op,
    elect_op,
    delete_op,
    report_op,
    report_op,
)


def run(d: Driver, op: tuple[Any, ...]) -> None:
    match op:
        case ("register", b, new):
            d.register(b, new_incarnation=new)
        case ("heartbeat", b, caught_up, mode):
            if d.image.broker(b) is None:
                return
            offset = d.image.applied_offset if caught_up else -1
            d.heartbeat(b, offset=offset, want_fence=mode == 0, want_shut_down=mode == 1)
        case ("advance", ms):
            d.now_ms += ms
        case ("tick",):
            d.tick()
        case ("create", name, partitions, rf, unclean, min_isr, mode):
            d.create(
                name,
                partitions,
                rf,
                unclean_leader_election_enable=str(unclean).lower(),
                min_insync_replicas=str(min_isr),
                replication_mode=mode,
            )
        case ("alter", name, index, members, stale):
            alter(d, name, index, members, stale)
        case ("elect", name, kind):
            d.send(ElectLeadersRequest(name, None, kind))
        case ("config", name, key, value):
            d.send(AlterConfigsRequest(name, ((key, value),)))
        case ("delete", name):
            d.send(DeleteTopicRequest(name))
        case ("report", name, index, mask, last_epoch, leo, stale):
            topic = d.image.topic(name)
            part = None if topic is None else d.image.partition(topic.topic_id, index)
            if part is None:
                return
            epoch = part.leader_epoch - (stale == 0) + (stale == 1)
            for i, broker in enumerate(part.replicas):
                if mask >> i & 1 and d.image.broker(broker) is not None:
                    d.send(ReportReplicaPositionRequest(broker, d.epoch(broker), part.topic_id,
                                                        index, epoch, last_epoch - i % 2,
                                                        leo + 7 * i % 5))  # fmt: skip
        case _:
            raise AssertionError(op)


def alter(d: Driver, name: str, index: int, mask: int, stale: int) -> None:
    topic = d.image.topic(name)
    part = None if topic is None else d.image.partition(topic.topic_id, index)
    if part is None or part.leader == NO_LEADER:
        return
    leader = d.image.broker(part.leader)
    assert leader is not None
    members = {r for i, r in enumerate(part.replicas) if mask >> i & 1}
    if mask & 8:
        members.add(next(b for b in BROKERS if b not in part.replicas))
    isr = tuple(sorted(members | {part.leader}))
    states = []
    for m in isr:
        b = d.image.broker(m)
        epoch = -1 if b is None else b.broker_epoch
        states.append(BrokerState(m, epoch - 1 if stale == 2 and m != part.leader else epoch))
    d.send(
        AlterPartitionRequest(
            part.leader,
            leader.broker_epoch,
            part.topic_id,
            index,
            part.leader_epoch - (stale == 0),
            tuple(states),
            part.partition_epoch - (stale == 1),
            part.leader_recovery_state,
        )
    )


def check(image: MetadataImage, seen: dict[tuple[str, int], tuple[int, int, int]], elr: bool) -> None:
    for _, p in image.all_partitions():
        assert len(set(p.isr)) == len(p.isr) and set(p.isr) <= set(p.replicas), p
        if not elr:
            assert p.isr, f"empty ISR without ELR: {p}"
            assert p.elr == () and p.last_known_elr == (), p
        assert not set(p.elr) & set(p.isr) and set(p.elr) <= set(p.replicas), p
        if p.leader != NO_LEADER:
            assert p.leader in p.isr, f"leader outside the ISR: {p}"
            assert image.is_broker_usable(p.leader), f"unusable leader: {p}"
        unusable = [m for m in p.isr if not image.is_broker_usable(m)]
        if unusable:
            assert p.isr == tuple(unusable) and len(p.isr) == 1 and p.leader == NO_LEADER, p
        if p.leader_recovery_state == LeaderRecoveryState.RECOVERING:
            assert len(p.isr) <= 1, p
        key = (p.topic_id, p.partition)
        before = seen.get(key, (0, 0, NO_LEADER))
        assert p.leader_epoch >= before[0] and p.partition_epoch >= before[1], (p, before)
        quorum = image.topic_configs(image.topic_by_id(p.topic_id).name)["replication.mode"]  # type: ignore[union-attr]
        if quorum == "quorum" and NO_LEADER not in (before[2], p.leader):
            # Quorum mode: leadership never moves from one replica to another without the
            # fencing epoch (leader -1) in between, committed by an earlier operation.
            assert p.leader == before[2], (p, before)
        seen[key] = (p.leader_epoch, p.partition_epoch, p.leader)


@settings(max_examples=200, deadline=None)
@given(st.booleans(), st.lists(ops, min_size=1, max_size=60))
def test_random_operations_keep_the_invariants(
    elr: bool, operations: list[tuple[Any, ...]]
) -> None:
    d = Driver(
        ControllerConfig(
            eligible_leader_replicas_enable=elr, leader_imbalance_check_interval_ms=5000
        )
    )
    original_commit = d.commit

    def commit(result: Any) -> Any:
        response = original_commit(result)
        assert getattr(response, "error", None) is not Errors.NOT_CONTROLLER
        return response

    d.commit = commit  # type: ignore[method-assign]
    # A running cluster with one topic first, so that every sequence starts somewhere useful.
    d.start_brokers(*BROKERS)
    d.create("a", 3, 3, min_insync_replicas="2")
    d.create("b", 2, 3, replication_mode="quorum")  # fencing elections (report ops) too
    seen: dict[tuple[str, int], tuple[int, int, int]] = {}
    check(d.image, seen, elr)
    for op in operations:
        run(d, op)
        check(d.image, seen, elr)
    assert MetadataImage.restore(d.image.snapshot()) == d.image
    # No churn: once a tick has repaired everything, the next one at the same time writes nothing.
    d.tick()
    check(d.image, seen, elr)
    assert d.tick() == []


def test_same_operations_give_the_same_records() -> None:
    operations: list[tuple[Any, ...]] = [
        ("register", 101, False),
        ("register", 102, False),
        ("register", 103, False),
        ("heartbeat", 101, True, 5),
        ("heartbeat", 102, True, 5),
        ("heartbeat", 103, True, 5),
        ("create", "a", 3, 3, False, 1, "isr"),
        ("advance", 9000),
        ("heartbeat", 101, True, 5),
        ("tick",),
        ("elect", "a", "preferred"),
    ]
    runs = []
    for _ in range(2):
        d = Driver()
        for op in operations:
            run(d, op)
        runs.append((d.written, d.image.snapshot()))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) > 10

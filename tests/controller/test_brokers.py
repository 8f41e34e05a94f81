"""Broker lifecycle (KIP-631): registration, heartbeats, session fencing, controlled shutdown."""

from __future__ import annotations

from quorum.controller import AllocateProducerIdsRequest, ControllerConfig, QuorumController
from quorum.controller import BrokerHeartbeatRequest as HeartbeatReq
from quorum.metadata import (
    NO_LEADER,
    Errors,
    FenceBroker,
    KvPut,
    PartitionChange,
    RegisterBroker,
    UnfenceBroker,
    encode_record,
)
from tests.controller.driver import Driver


def test_registration_starts_fenced_and_the_epoch_is_the_record_offset() -> None:
    d = Driver()
    for offset in range(5):  # other records first: the epoch is an offset, not a counter
        d.image.apply(offset, 1, encode_record(KvPut("k", str(offset))))
    first = d.register(101)
    assert first.error is Errors.NONE and first.broker_epoch == 5
    second = d.register(102)
    assert second.broker_epoch == 6
    b = d.image.broker(101)
    assert b is not None and b.fenced and b.broker_epoch == 5
    assert first.heartbeat_interval_ms == 2000


def test_unfenced_once_metadata_offset_reaches_the_registration_offset() -> None:
    d = Driver()
    d.register(101)
    d.register(102)  # broker 102's epoch is offset 1
    behind = d.heartbeat(102, offset=0)
    assert (behind.is_fenced, behind.is_caught_up) == (True, False)
    assert d.written[-1] == RegisterBroker(102, "inc-102-1", d.written[-1].endpoints)  # type: ignore[union-attr]
    caught_up = d.heartbeat(102, offset=1)
    assert (caught_up.error, caught_up.is_fenced, caught_up.is_caught_up) == (
        Errors.NONE,
        False,
        True,
    )
    assert d.written[-1] == UnfenceBroker(102, 1)
    assert not d.image.broker(102).fenced  # type: ignore[union-attr]


def test_heartbeat_errors() -> None:
    d = Driver()
    assert d.heartbeat(7, epoch=0).error is Errors.BROKER_ID_NOT_REGISTERED
    d.register(101)
    stale = d.heartbeat(101, epoch=99)
    assert stale.error is Errors.STALE_BROKER_EPOCH
    assert d.image.broker(101).fenced  # type: ignore[union-attr]


def test_duplicate_registration_while_the_old_session_lives() -> None:
    d = Driver()
    d.start_brokers(101)
    d.now_ms = 5000
    d.heartbeat(101)
    d.now_ms = 6000
    dup = d.register(101, new_incarnation=True)
    assert dup.error is Errors.DUPLICATE_BROKER_REGISTRATION and not dup.error.retriable
    # The same incarnation may register again (a retried request): a new epoch.
    d2 = Driver()
    d2.start_brokers(101)
    again = d2.register(101)
    assert again.error is Errors.NONE and again.broker_epoch > 0


def test_restart_after_session_expiry_gets_a_new_epoch_and_leaves_isrs() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 3, 3)
    old_epoch = d.epoch(102)
    d.now_ms = 9000
    for b in (101, 103):
        d.heartbeat(b)
    d.tick()  # 102 silent for the session timeout: fenced
    assert d.image.broker(102).fenced  # type: ignore[union-attr]
    response = d.register(102, new_incarnation=True)
    assert response.error is Errors.NONE and response.broker_epoch > old_epoch
    assert response.broker_epoch == d.epoch(102)
    for i in range(3):
        assert 102 not in d.part("t", i).isr


def test_quick_restart_of_a_leader_leaves_isr_before_registering() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3)
    d.now_ms = 20_000  # 101's session expired, but no tick ran yet
    for b in (102, 103):
        d.heartbeat(b)
    response = d.register(101, new_incarnation=True)
    assert response.error is Errors.NONE
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_epoch) == (102, (102, 103), 1)
    assert isinstance(d.written[-2], PartitionChange) and isinstance(d.written[-1], RegisterBroker)


def test_session_timeout_fences_at_exactly_9000_ms() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 3, 3)
    d.now_ms = 8999
    assert d.tick() == []
    assert d.controller.next_deadline_ms() == 9000
    d.now_ms = 9000
    for b in (101, 103):
        d.heartbeat(b)
    records = d.tick()
    assert records[-1] == FenceBroker(102, d.epoch(102))
    assert d.image.broker(102).fenced  # type: ignore[union-attr]
    # 102 led partition 1 ([102, 103, 101]): 103 is next in replica order; 102 left every ISR.
    p1 = d.part("t", 1)
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.partition_epoch) == (103, (103, 101), 1, 1)
    p0 = d.part("t", 0)
    assert (p0.leader, p0.isr, p0.leader_epoch, p0.partition_epoch) == (101, (101, 103), 0, 1)


def test_regular_heartbeats_keep_the_session() -> None:
    d = Driver()
    d.start_brokers(101)
    for now in range(2000, 30_001, 2000):
        d.now_ms = now
        d.heartbeat(101)
        assert d.tick() == []
    assert not d.image.broker(101).fenced  # type: ignore[union-attr]


def test_want_fence_fences_and_a_fenced_broker_is_not_unfenced_while_it_wants_fence() -> None:
    d = Driver()
    d.start_brokers(101, 102)
    d.create("t", 1, 2)
    r = d.heartbeat(101, want_fence=True)
    assert r.is_fenced
    assert d.part("t").leader == 102
    assert d.heartbeat(101, want_fence=True).is_fenced
    assert not d.heartbeat(101).is_fenced


def test_fencing_the_last_isr_member_leaves_it_with_no_leader_then_unfence_reelects() -> None:
    d = Driver()
    d.start_brokers(101, 102)
    d.create("t", 1, 2)
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_fence=True)
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_epoch) == (NO_LEADER, (101,), 1)
    assert not d.heartbeat(101).is_fenced
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_epoch) == (101, (101,), 2)


def test_failover_gives_every_unfenced_broker_a_fresh_session() -> None:
    d = Driver()
    d.start_brokers(101)
    d.now_ms = 8000
    d.fail_over()
    d.now_ms = 9000
    assert d.tick() == []  # the old controller's clock is gone: 9 s from the failover
    d.now_ms = 17_000
    assert d.tick()[-1] == FenceBroker(101, d.epoch(101))


def test_tick_adopts_brokers_the_controller_never_heard_of() -> None:
    d = Driver()
    d.start_brokers(101)
    d.controller = QuorumController(ControllerConfig(), now_ms=1000)  # built without an image
    assert d.tick() == []
    d.now_ms = 10_000
    assert d.tick()[-1] == FenceBroker(101, d.epoch(101))


def test_controlled_shutdown_moves_leadership_then_allows_shutdown() -> None:
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 3, 3)
    first = d.heartbeat(101, want_shut_down=True)
    assert not first.should_shut_down and not first.is_fenced
    b = d.image.broker(101)
    assert b is not None and b.in_controlled_shutdown
    for i in range(3):
        p = d.part("t", i)
        assert p.leader != 101 and 101 not in p.isr
    assert d.part("t", 0).leader == 102
    # Not before every other active broker has seen the change.
    assert not d.heartbeat(101, want_shut_down=True).should_shut_down
    d.heartbeat(102)
    assert not d.heartbeat(101, want_shut_down=True).should_shut_down
    d.heartbeat(103)
    last = d.heartbeat(101, want_shut_down=True)
    assert last.should_shut_down and last.is_fenced
    # A clean restart registers at once: the old session was closed.
    assert d.register(101, new_incarnation=True).error is Errors.NONE


def test_controlled_shutdown_of_the_only_isr_member_leaves_no_leader() -> None:
    d = Driver()
    d.start_brokers(101, 102)
    d.create("t", 1, 2)
    d.alter("t", 0, (101,))
    d.heartbeat(101, want_shut_down=True)
    p = d.part("t")
    assert (p.leader, p.isr) == (NO_LEADER, (101,))
    d.heartbeat(102)
    assert d.heartbeat(101, want_shut_down=True).should_shut_down


def test_a_fenced_broker_may_shut_down_at_once() -> None:
    d = Driver()
    d.register(101)
    assert d.heartbeat(101, offset=-1, want_shut_down=True).should_shut_down


def test_controlled_shutdown_disabled_fences_at_once() -> None:
    d = Driver(ControllerConfig(controlled_shutdown_enable=False))
    d.start_brokers(101, 102)
    d.create("t", 1, 2)
    r = d.heartbeat(101, want_shut_down=True)
    assert r.should_shut_down and r.is_fenced
    assert d.part("t").leader == 102


def test_config_from_kafka_names() -> None:
    c = ControllerConfig.from_kafka(
        {
            "broker.session.timeout.ms": "3000",
            "eligible.leader.replicas.enable": "true",
            "leader.imbalance.check.interval.seconds": 5,
        }
    )
    assert (c.broker_session_timeout_ms, c.eligible_leader_replicas_enable) == (3000, True)
    assert c.leader_imbalance_check_interval_ms == 5000
    assert ControllerConfig().broker_session_timeout_ms == 9000


def test_a_change_built_on_a_stale_image_is_refused_and_answered_not_controller() -> None:
    """Two operations computed from the same image (a driver that broke the one-at-a-time
    contract): the second one's PartitionChange no longer applies, and nothing breaks."""
    d = Driver()
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3)
    first = d.controller.handle(AllocateProducerIdsRequest(101, d.epoch(101)), d.image, 0)
    fence_102 = d.controller.handle(
        HeartbeatReq(102, d.epoch(102), 99, want_fence=True), d.image, 0
    )
    fence_103 = d.controller.handle(
        HeartbeatReq(103, d.epoch(103), 99, want_fence=True), d.image, 0
    )
    d.commit(first)
    assert d.commit(fence_102).error is Errors.NONE  # type: ignore[union-attr]
    late = d.commit(fence_103)
    assert late is not None and late.error is Errors.NOT_CONTROLLER and late.error.retriable
    p = d.part("t")
    assert p.isr == (101, 103)  # the stale change (which would re-add 102) did not apply
    # 103 is fenced but still in the ISR: the next tick repairs it.
    d.tick()
    assert d.part("t").isr == (101,)


def test_fencing_is_logged_with_its_reason() -> None:
    from structlog.testing import capture_logs

    d = Driver()
    d.start_brokers(101)
    d.now_ms = 9000
    with capture_logs() as logs:
        d.tick()
    assert [(e["event"], e["broker_id"], e["reason"]) for e in logs if "reason" in e] == [
        ("controller.fencing_broker", 101, "session_timeout")
    ]

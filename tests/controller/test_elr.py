"""KIP-966 Eligible Leader Replicas as a cluster feature: finalized in the metadata log
(FeatureLevel, from the controller's bootstrap features), honoured by every later controller;
clean and unclean restarts (KAFKA-15586: previous broker epoch); the last known leader elected
when the ISR and the ELR are both empty (Kafka's PartitionChangeBuilder.canElectLastKnownLeader);
and the describe lines Kafka 4.x prints for them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller import ControllerConfig
from quorum.metadata import NO_LEADER, LeaderRecoveryState, MetadataImage
from quorum.metadata.describe import describe_topic
from quorum.metadata.records import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    FeatureLevel,
    decode_record,
    encode_record,
)
from tests.controller.driver import Driver

ELR = ControllerConfig(bootstrap_features=((ELIGIBLE_LEADER_REPLICAS_VERSION, 1),))


def cluster(config: ControllerConfig = ELR, **topic_configs: str) -> Driver:
    d = Driver(config)
    d.start_brokers(101, 102, 103)
    d.create("t", 1, 3, min_insync_replicas="2", **topic_configs)  # leader 101
    return d


def down_to_leader(d: Driver) -> None:
    """The staggered drop: 103 leaves the ISR (still at min ISR), then 102 (below it: ELR)."""
    d.alter("t", 0, (101, 102))
    d.alter("t", 0, (101,))
    assert (d.part("t").isr, d.part("t").elr) == ((101,), (102,))


def crash(d: Driver, broker: int) -> None:
    """`broker`'s session expires (kill -9): the controller fences it on its next tick."""
    d.now_ms += 20_000
    for b in (101, 102, 103):
        if b != broker and not d.image.broker(b).fenced:  # type: ignore[union-attr]
            d.heartbeat(b)
    d.tick()
    assert d.image.broker(broker).fenced  # type: ignore[union-attr]


def restart(d: Driver, broker: int, *, clean: bool) -> None:
    """A new process of `broker` registers (with its previous broker epoch after a clean
    shutdown, -1 otherwise) and catches up."""
    previous = d.epoch(broker) if clean else -1
    assert d.register(broker, new_incarnation=True, previous_epoch=previous).error.name == "NONE"
    assert not d.heartbeat(broker).is_fenced


def test_the_first_operation_finalizes_the_bootstrap_feature_once() -> None:
    d = Driver(ELR)
    d.register(101)
    assert d.written[0] == FeatureLevel(ELIGIBLE_LEADER_REPLICAS_VERSION, 1)
    assert d.image.feature_level(ELIGIBLE_LEADER_REPLICAS_VERSION) == 1
    d.register(102)
    d.tick()
    assert sum(isinstance(r, FeatureLevel) for r in d.written) == 1
    # The broker epoch is still the offset of the registration, after the feature record.
    assert d.epoch(101) == 1
    # In snapshots too, and an old snapshot without the field still restores.
    assert MetadataImage.restore(d.image.snapshot()).features() == {
        ELIGIBLE_LEADER_REPLICAS_VERSION: 1}
    record = FeatureLevel(ELIGIBLE_LEADER_REPLICAS_VERSION, 1)
    assert decode_record(encode_record(record)) == record


def test_a_later_controller_honours_the_feature_from_the_log_whatever_its_config() -> None:
    d = cluster()
    d.controller = type(d.controller)(ControllerConfig(), image=d.image, now_ms=d.now_ms)
    down_to_leader(d)  # ELR tracked although this controller's config says nothing of it
    crash(d, 101)
    assert (d.part("t").leader, d.part("t").isr) == (102, (102,))


def test_without_the_feature_nothing_is_tracked_and_describe_says_n_a() -> None:
    d = cluster(ControllerConfig())
    d.alter("t", 0, (101, 102))
    d.alter("t", 0, (101,))
    assert d.part("t").elr == ()
    assert describe_topic(d.image, "t")[1].endswith("\tElr: N/A\tLastKnownElr: N/A")


def test_describe_prints_empty_lists_when_the_feature_is_on() -> None:
    d = cluster()
    line = describe_topic(d.image, "t")[1]
    assert line.endswith("\tIsr: 101,102,103\tElr: \tLastKnownElr: ")
    down_to_leader(d)
    assert describe_topic(d.image, "t")[1].endswith("\tIsr: 101\tElr: 102\tLastKnownElr: ")


def test_staggered_drop_then_leader_crash_elects_the_eligible_replica_not_the_stale_one() -> None:
    """KIP-966's motivation: 103 left first and lacks what 101 and 102 acknowledged after it
    left. 102, eligible, is elected before any unclean candidate is considered."""
    d = cluster(unclean_leader_election_enable="true")
    down_to_leader(d)
    crash(d, 101)
    p = d.part("t")
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (
        102, (102,), (101,), LeaderRecoveryState.RECOVERED)


def test_the_same_drop_without_elr_takes_the_unclean_candidate() -> None:
    """Unclean election takes the first live replica in assignment order, 102 here, which left
    the ISR first: what 101 and 103 acknowledged after that is lost."""
    d = cluster(ControllerConfig(), unclean_leader_election_enable="true")
    d.alter("t", 0, (101, 103))  # 102 leaves first here, so it is the stale one
    d.alter("t", 0, (101,))
    crash(d, 101)
    p = d.part("t")
    assert (p.leader, p.isr, p.leader_recovery_state) == (
        102, (102,), LeaderRecoveryState.RECOVERING)


def test_a_clean_restart_keeps_the_replica_eligible_an_unclean_one_does_not() -> None:
    d = cluster()
    down_to_leader(d)
    crash(d, 102)  # an ELR member fenced: still eligible (it may come back cleanly)
    assert d.part("t").elr == (102,)
    restart(d, 102, clean=True)
    assert d.part("t").elr == (102,)
    d2 = cluster()
    down_to_leader(d2)
    crash(d2, 102)
    restart(d2, 102, clean=False)
    assert d2.part("t").elr == ()


def test_last_known_leader_is_elected_once_nobody_is_eligible() -> None:
    """Every replica lost power (unclean restarts empty the ELR): the partition waits for the
    leader it had when its ISR became empty, and elects it when it returns, RECOVERING, even
    with unclean election off (Kafka 4.x's balanced recovery)."""
    d = cluster()
    down_to_leader(d)
    crash(d, 102)
    crash(d, 101)  # ISR empty: 101 joins the ELR, and is the last known leader
    p = d.part("t")
    assert (p.leader, p.isr, set(p.elr), p.last_known_elr) == (NO_LEADER, (), {101, 102}, (101,))
    assert describe_topic(d.image, "t")[1].endswith("\tIsr: \tElr: 102,101\tLastKnownElr: 101")
    restart(d, 102, clean=False)  # no longer eligible
    assert (d.part("t").leader, d.part("t").elr) == (NO_LEADER, (101,))
    restart(d, 101, clean=False)  # the ELR is empty now; 101 is the last known leader
    p = d.part("t")
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (
        101, (101,), (), (), LeaderRecoveryState.RECOVERING)


def test_last_known_leader_waits_while_an_eligible_replica_may_return() -> None:
    d = cluster()
    down_to_leader(d)
    crash(d, 102)
    crash(d, 101)
    restart(d, 101, clean=False)  # 102 is still eligible (it has not come back uncleanly)
    p = d.part("t")
    assert (p.leader, p.elr, p.last_known_elr) == (NO_LEADER, (102,), (101,))
    restart(d, 102, clean=True)  # the eligible replica comes back: it leads, not 101
    p = d.part("t")
    assert (p.leader, p.isr, p.last_known_elr, p.leader_recovery_state) == (
        102, (102,), (), LeaderRecoveryState.RECOVERED)


_broker = st.sampled_from((101, 102, 103))
elr_ops = st.lists(st.one_of(
    st.tuples(st.just("shrink"), _broker),
    st.tuples(st.just("expand"), _broker),
    st.tuples(st.just("crash"), _broker),
    st.tuples(st.just("restart"), _broker, st.booleans()),
), min_size=5, max_size=40)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.booleans(), elr_ops)
def test_a_clean_election_never_picks_a_replica_that_may_have_lost_data(
    unclean: bool, ops: list[tuple[Any, ...]]
) -> None:
    """KIP-966's safety claim against a model: a broker that restarted uncleanly (it may have lost
    an unflushed tail) is "stale" until its leader puts it back in the ISR (it caught up). A
    leader elected into a leaderless partition as a clean election (RECOVERED) is never stale;
    only the last-known-leader and unclean elections (RECOVERING) may pick one."""
    d = cluster(unclean_leader_election_enable=str(unclean).lower())
    stale: set[int] = set()
    for op in ops:
        before = d.part("t")
        usable = d.image.is_broker_usable
        match op:
            case ("shrink", b):
                if before.leader != NO_LEADER and b in before.isr and b != before.leader:
                    d.alter("t", 0, tuple(m for m in before.isr if m != b))
            case ("expand", b):
                if (before.leader != NO_LEADER and b not in before.isr and usable(b)
                        and d.alter("t", 0, (*before.isr, b)).error.name == "NONE"):
                    stale.discard(b)  # the leader saw it caught up
            case ("crash", b):
                if not d.image.broker(b).fenced:  # type: ignore[union-attr]
                    crash(d, b)
            case ("restart", b, clean):
                if d.image.broker(b).fenced:  # type: ignore[union-attr]
                    restart(d, b, clean=clean)
                    if not clean:
                        stale.add(b)
        after = d.part("t")
        elected = before.leader == NO_LEADER and after.leader != NO_LEADER
        if elected and after.leader_recovery_state == LeaderRecoveryState.RECOVERED:
            assert after.leader not in stale, (op, before, after, stale)
            assert after.leader in (*before.isr, *before.elr), (op, before, after)
        assert not set(after.elr) & stale, (op, after, stale)  # unclean restarts left the ELR
        if after.leader != NO_LEADER:
            # A leader's log is the partition's from then on (after an unclean or last-known
            # leader election too: what it lacks is lost for good, not "missing" any more).
            stale.discard(after.leader)

"""`leader.epoch.enable` as a topic config (kraftlab's switch for the pre-0.11 follower, KIP-101):
accepted as true/false on an ISR topic, refused with any other replication mode (their safety
rests on leader epochs), and reaching the replica's ReplicaConfig."""

from __future__ import annotations

from partition.replica.config import ReplicaConfig
from quorum.controller import AlterConfigsRequest, AlterConfigsResponse
from quorum.metadata import Errors
from tests.controller.driver import Driver


def brokers() -> Driver:
    d = Driver()
    d.start_brokers(101, 102, 103)
    return d


def test_false_is_accepted_on_an_isr_topic_and_reaches_the_replica_config() -> None:
    d = brokers()
    assert d.create("legacy", 1, 2, leader_epoch_enable="false").error is Errors.NONE
    configs = d.image.topic_configs("legacy")
    assert configs["leader.epoch.enable"] == "false"
    assert ReplicaConfig.from_topic_configs(configs).leader_epoch_enable is False
    assert d.create("safe", 1, 2).error is Errors.NONE
    assert ReplicaConfig.from_topic_configs(d.image.topic_configs("safe")).leader_epoch_enable


def test_other_values_and_other_modes_are_invalid_config() -> None:
    d = brokers()
    r = d.create("bad", 1, 2, leader_epoch_enable="no")
    assert r.error is Errors.INVALID_CONFIG and "leader.epoch.enable" in r.message
    r = d.create("q", 1, 3, leader_epoch_enable="false", replication_mode="quorum")
    assert r.error is Errors.INVALID_CONFIG and "replication.mode=isr" in r.message
    assert d.image.topic("q") is None
    assert d.create("q", 1, 3, replication_mode="quorum").error is Errors.NONE
    r = d.send(AlterConfigsRequest("q", (("leader.epoch.enable", "false"),)))
    assert isinstance(r, AlterConfigsResponse) and r.error is Errors.INVALID_CONFIG
    assert d.image.topic_configs("q")["leader.epoch.enable"] == "true"  # nothing changed

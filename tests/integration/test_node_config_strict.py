"""Node settings are parsed strictly (fast; no processes): integers are ASCII `-?[0-9]+` within
Java's long, as topic configs (quorum/metadata/configs.py), so "1_000", "+5", " 5 " and full-width
digits, which Python's int() takes, are refused with the key named; booleans are true/false/1/0;
log.retention.ms / log.retention.hours are range-checked at load; `kraftlab config` takes any
negative log.retention.bytes (unlimited, as the topic's retention.bytes and Kafka)."""

from __future__ import annotations

import re

import pytest

from harness.cli.config import check_overrides, plan_overrides
from harness.runtime.config import (
    ConfigError,
    from_properties,
    parse_integer,
    parse_properties,
    tunable_value,
)
from harness.runtime.log_configs import TopicLogConfigs
from quorum.metadata.configs import INT_MAX, LONG_MAX, LONG_MIN

BROKER = {"node.id": "101", "process.roles": "broker", "listeners": "127.0.0.1:9101",
          "cluster.id": "c1", "controller.quorum.voters": "1@127.0.0.1:9093",
          "kraftlab.admin.listeners": "101@127.0.0.1:8101", "metadata.log.dir": "/tmp/x"}

# int() takes the first six; the rest are plain garbage.
BAD = ["1_000", "+5", " 5 ", "5\n", "\uff15", "\u0665", "1e3", "0x10", "", "-", "--1", "5.0"]


@pytest.mark.parametrize("raw", BAD)
def test_strings_pythons_int_would_take_are_refused_naming_the_key(raw: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("broker.session.timeout.ms must be an "
                                                    "integer (ASCII digits with an optional '-')")):
        from_properties({**BROKER, "broker.session.timeout.ms": raw})
    with pytest.raises(ConfigError, match="^node.id must be an integer"):
        from_properties({**BROKER, "node.id": raw})


@pytest.mark.parametrize(("raw", "value"), [
    ("0", 0), ("-0", 0), ("007", 7), ("-1", -1), (str(LONG_MAX), LONG_MAX), (str(LONG_MIN), LONG_MIN),
    ("0" * 40 + "5", 5),
])  # fmt: skip
def test_ascii_integers_within_a_long_are_accepted(raw: str, value: int) -> None:
    assert parse_integer("k", raw) == value


@pytest.mark.parametrize("raw", [str(LONG_MAX + 1), str(LONG_MIN - 1), "9" * 5000, "-" + "9" * 5000])
def test_integers_past_a_long_are_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="^replica.fetch.wait.max.ms must be a 64-bit integer"):
        from_properties({**BROKER, "replica.fetch.wait.max.ms": raw})


def test_the_properties_file_syntax_still_strips_around_values() -> None:
    props = parse_properties("broker.session.timeout.ms =  7000  \n")
    assert props == {"broker.session.timeout.ms": "7000"}
    assert from_properties({**BROKER, **props}).broker_session_timeout_ms == 7000


@pytest.mark.parametrize("voters", ["\uff11@127.0.0.1:9093", "1@127.0.0.1:+9093", "1@127.0.0.1:9_093"])
def test_endpoint_ids_and_ports_are_ascii_integers(voters: str) -> None:
    with pytest.raises(ConfigError, match="controller.quorum.voters: expected id@host:port"):
        from_properties({**BROKER, "controller.quorum.voters": voters})


def test_booleans_take_true_false_or_1_0_and_integers_do_not_take_true() -> None:
    assert tunable_value("auto.leader.rebalance.enable", "TRUE") == 1
    assert tunable_value("auto.leader.rebalance.enable", "0") == 0
    with pytest.raises(ConfigError, match="auto.leader.rebalance.enable must be true or false"):
        tunable_value("auto.leader.rebalance.enable", "2")
    with pytest.raises(ConfigError, match="kraftlab.log.fsync must be true or false"):
        tunable_value("kraftlab.log.fsync", "yes")
    with pytest.raises(ConfigError, match="replica.lag.time.max.ms must be an integer"):
        from_properties({**BROKER, "replica.lag.time.max.ms": "true"})


@pytest.mark.parametrize(("key", "raw", "message"), [
    ("log.retention.ms", "-3", "log.retention.ms must be in [-2, 9223372036854775807] (-2: unset"),
    ("log.retention.hours", "-1", "log.retention.hours must be in [0, 2147483647]"),
    ("log.retention.hours", str(INT_MAX + 1), "log.retention.hours must be in [0, 2147483647]"),
])  # fmt: skip
def test_retention_time_settings_are_range_checked_at_load(key: str, raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        from_properties({**BROKER, key: raw})


def test_retention_time_settings_in_range_give_the_effective_retention_ms() -> None:
    def retention_ms(**props: str) -> int:
        config = from_properties({**BROKER, **props})
        return TopicLogConfigs(config).log_config({}).retention_ms

    assert retention_ms(**{"log.retention.ms": "-2", "log.retention.hours": "2"}) == 7_200_000
    assert retention_ms(**{"log.retention.ms": "-1", "log.retention.hours": "2"}) == -1
    assert retention_ms(**{"log.retention.hours": str(INT_MAX)}) == INT_MAX * 3_600_000
    assert retention_ms(**{"log.retention.hours": "0"}) == 0


def test_any_negative_log_retention_bytes_is_unlimited_in_cli_and_node() -> None:
    check_overrides({"log.retention.bytes": "-3"})
    check_overrides({"log.retention.bytes": str(LONG_MIN)})
    config = from_properties({**BROKER, "log.retention.bytes": "-3"})
    assert TopicLogConfigs(config).log_config({}).retention_bytes == -3
    # Still refused at the CLI: a retention.ms below -1 (the node reads -2 as "unset").
    with pytest.raises(ConfigError, match=re.escape("log.retention.ms must be >= -1 (-1: unlimited)")):
        check_overrides({"log.retention.ms": "-2"})


def test_per_node_override_ids_are_ascii() -> None:
    with pytest.raises(ConfigError, match="unknown config 'controller.\uff11.kraftlab.raft.seed'"):
        plan_overrides({"controller.\uff11.kraftlab.raft.seed": "3"}, [(1, "controller")])
    plan = plan_overrides({"controller.1.kraftlab.raft.seed": "3"}, [(1, "controller")])
    assert plan.nodes == {1: {"kraftlab.raft.seed": "3"}}


def test_every_default_round_trips_through_the_strict_parser() -> None:
    config = from_properties(BROKER)
    assert from_properties(parse_properties(config.to_properties())) == config


def test_group_coordinator_settings_are_parsed_and_checked() -> None:
    config = from_properties({**BROKER, "offsets.topic.num.partitions": "7",
                              "group.initial.rebalance.delay.ms": "0"})  # fmt: skip
    assert (config.offsets_topic_num_partitions, config.group_initial_rebalance_delay_ms) == (7, 0)
    assert (config.offsets_topic_replication_factor, config.offsets_commit_timeout_ms) == (3, 5000)
    with pytest.raises(ConfigError, match="offsets.topic.num.partitions"):
        from_properties({**BROKER, "offsets.topic.num.partitions": "0"})
    with pytest.raises(ConfigError, match="group.min.session.timeout.ms"):
        from_properties({**BROKER, "group.min.session.timeout.ms": "10000",
                         "group.max.session.timeout.ms": "9000"})  # fmt: skip

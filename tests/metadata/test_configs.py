"""Topic config values (quorum/metadata/configs.py): integers are ASCII `-?[0-9]+` within Kafka's
type (INT: 32-bit, LONG: 64-bit) and lower bound, stored canonical (`str(int(v))`). The lenient
forms Python's int() takes (" 5 ", "+5", "1_000", full-width digits) and values past the type
(segment.bytes 99999999999999999999, min.insync.replicas 2^31) are INVALID_CONFIG naming the key,
at the controller (create and alter: nothing stored); the broker-level synonyms in a node's
properties (log.segment.bytes, ...) must lie in the same ranges."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.runtime.config import ConfigError, from_properties, parse_properties
from quorum.controller import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
)
from quorum.metadata.configs import canonical_topic_config, validate_topic_config
from quorum.metadata.errors import Errors
from tests.controller.driver import Driver

INT_MAX, LONG_MAX = 2**31 - 1, 2**63 - 1
# Kafka's LogConfig / TopicConfig: (type maximum, atLeast) per integer topic config.
RANGES = {
    "segment.bytes": (14, INT_MAX),
    "min.insync.replicas": (1, INT_MAX),
    "max.message.bytes": (0, INT_MAX),
    "retention.ms": (-1, LONG_MAX),
    "retention.bytes": (-(2**63), LONG_MAX),
    "segment.ms": (1, LONG_MAX),
    "flush.messages": (1, LONG_MAX),
    "flush.ms": (0, LONG_MAX),
}
BAD = [
    ("segment.bytes", "99999999999999999999"), ("segment.bytes", str(INT_MAX + 1)),
    ("min.insync.replicas", "2147483648"), ("max.message.bytes", str(INT_MAX + 1)),
    ("retention.ms", "1_000"), ("retention.ms", " 5 "), ("retention.ms", "5\n"), ("retention.ms", "+5"),
    ("max.message.bytes", "\uff15"), ("segment.ms", "\u0661\u0662"), ("retention.ms", "99999999999999999999999"),
    ("retention.ms", "-2"), ("retention.bytes", str(-(2**63) - 1)), ("flush.messages", str(LONG_MAX + 1)),
    ("segment.ms", "0"), ("flush.messages", "0"), ("max.message.bytes", "-1"), ("retention.ms", ""),
    ("retention.ms", "-"), ("retention.ms", "1e3"), ("retention.ms", "0x10"), ("flush.ms", "1" * 5000),
]  # fmt: skip

integer_like = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.from_regex(r"\A[-+ ]?[0-9_\uff10-\uff19\u0660-\u0669]{0,25}[ \n]?\Z"),
    st.text(max_size=30),
)


@given(name=st.sampled_from(sorted(RANGES)), value=integer_like)
def test_an_accepted_value_is_ascii_in_range_and_stored_canonical(name: str, value: str) -> None:
    problem = validate_topic_config(name, value)
    if problem is not None:
        assert name in problem
        return
    assert re.fullmatch(r"-?[0-9]+", value, re.ASCII)
    canonical = canonical_topic_config(name, value)
    low, high = RANGES[name]
    assert canonical == str(int(value)) and low <= int(canonical) <= high
    assert validate_topic_config(name, canonical) is None
    assert canonical_topic_config(name, canonical) == canonical


@pytest.mark.parametrize("name", sorted(RANGES))
def test_kafkas_bounds_are_exact(name: str) -> None:
    low, high = RANGES[name]
    assert validate_topic_config(name, str(low)) is None and validate_topic_config(name, str(high)) is None
    for outside in (low - 1, high + 1):
        problem = validate_topic_config(name, str(outside))
        assert problem is not None and name in problem and str(high) in problem


@pytest.mark.parametrize(("name", "value"), BAD)
def test_lenient_and_out_of_range_values_are_refused_naming_the_key(name: str, value: str) -> None:
    problem = validate_topic_config(name, value)
    assert problem is not None and repr(name) in problem


def test_leading_zeros_and_minus_zero_are_stored_canonical() -> None:
    assert canonical_topic_config("retention.ms", "007") == "7"
    assert canonical_topic_config("retention.bytes", "-0") == "0"
    assert canonical_topic_config("segment.bytes", "0" * 5000 + "1024") == "1024"
    assert canonical_topic_config("cleanup.policy", "delete") == "delete"


@pytest.mark.parametrize(("name", "value"), BAD[:12])
def test_the_controller_refuses_them_at_create_and_alter_and_stores_nothing(name: str, value: str) -> None:
    d = Driver()
    d.start_brokers(101)
    created = d.send(CreateTopicRequest("t", 1, 1, ((name, value),)))
    assert isinstance(created, CreateTopicResponse)
    assert created.error is Errors.INVALID_CONFIG and name in created.message
    assert d.image.topic("t") is None
    plain = d.send(CreateTopicRequest("t", 1, 1, ()))
    assert isinstance(plain, CreateTopicResponse) and plain.error is Errors.NONE
    good = ("flush.ms", "5") if name != "flush.ms" else ("retention.ms", "5")
    altered = d.send(AlterConfigsRequest("t", (good, (name, value))))
    assert isinstance(altered, AlterConfigsResponse)
    assert altered.error is Errors.INVALID_CONFIG and name in altered.message
    assert d.image.topic_config_overrides("t") == {}  # all or nothing


def test_the_controller_stores_the_canonical_form() -> None:
    d = Driver()
    d.start_brokers(101)
    created = d.send(CreateTopicRequest("t", 1, 1, (("retention.ms", "0060000"), ("segment.bytes", "1024"))))
    assert isinstance(created, CreateTopicResponse) and created.error is Errors.NONE
    assert d.image.topic_config_overrides("t") == {"retention.ms": "60000", "segment.bytes": "1024"}
    altered = d.send(AlterConfigsRequest("t", (("retention.bytes", "-0"), ("segment.bytes", None))))
    assert isinstance(altered, AlterConfigsResponse) and altered.error is Errors.NONE
    assert d.image.topic_config_overrides("t") == {"retention.ms": "60000", "retention.bytes": "0"}


BROKER_PROPS = {"node.id": "101", "process.roles": "broker", "listeners": "127.0.0.1:9101",
                "cluster.id": "c1", "controller.quorum.voters": "1@127.0.0.1:9093",
                "kraftlab.admin.listeners": "101@127.0.0.1:8101", "metadata.log.dir": "/tmp/x"}


@pytest.mark.parametrize(("key", "value"), [
    ("log.segment.bytes", "99999999999"), ("log.segment.bytes", "13"),
    ("message.max.bytes", str(INT_MAX + 1)), ("log.roll.ms", "0"), ("log.flush.interval.messages", "0"),
])  # fmt: skip
def test_broker_level_synonyms_follow_the_topic_rules(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{re.escape(key)} is the broker default of topic config"):
        from_properties({**BROKER_PROPS, key: value})


def test_broker_level_synonyms_in_range_are_accepted_and_defaults_round_trip() -> None:
    config = from_properties({**BROKER_PROPS, "log.segment.bytes": str(INT_MAX),
                              "log.retention.bytes": "-1", "log.flush.interval.ms": str(LONG_MAX)})
    assert (config.log_segment_bytes, config.log_retention_bytes) == (INT_MAX, -1)
    assert from_properties(parse_properties(config.to_properties())) == config  # log.retention.ms=-2

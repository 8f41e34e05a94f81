"""Topic configs through the Kafka listener (harness/kafka/config_handlers.py): DescribeConfigs,
IncrementalAlterConfigs (KIP-339) and legacy AlterConfigs, on the wire and through real admin
clients (kafka-python's KafkaAdminClient, confluent-kafka's AdminClient). The alters are forwarded
to the active controller; Kafka's error codes come back per resource (UNKNOWN_TOPIC_OR_PARTITION
3, INVALID_CONFIG 40, INVALID_REQUEST 42) and a rejected alter changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from harness.kafka.config_handlers import legacy_pairs, refusals
from tests.kafka.conftest import BROKERS, KafkaCluster, Wire
from tests.live import poll

pytestmark = pytest.mark.integration

TOPIC = 2
BROKER = 4
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST = 3, 40, 42


def describe(c: KafkaCluster, broker: int, topic: str, version: int = 4) -> Any:
    cls = DescribeConfigsRequest[version]
    with Wire(c.kafka_port(broker)) as w:
        return w.call(cls(resources=[cls.DescribeConfigsResource(
            resource_type=TOPIC, resource_name=topic, configuration_keys=None)],
            include_synonyms=True, include_documentation=False)).results[0]  # fmt: skip


def overrides(c: KafkaCluster, broker: int, topic: str) -> dict[str, str]:
    r = describe(c, broker, topic)
    assert r.error_code == 0, r
    return {e.name: e.value for e in r.configs if e.config_source == DYNAMIC_TOPIC_CONFIG}


def incremental(c: KafkaCluster, topic: str, *ops: tuple[str, int, str | None],
                resource_type: int = TOPIC) -> Any:
    cls = IncrementalAlterConfigsRequest[1]
    res = cls.AlterConfigsResource
    with Wire(c.kafka_port(BROKERS[1])) as w:
        return w.call(cls(resources=[res(resource_type=resource_type, resource_name=topic,
                                         configs=[res.AlterableConfig(name=n, config_operation=o,
                                                                      value=v)
                                                  for n, o, v in ops])],
                          validate_only=False)).responses[0]  # fmt: skip


def incremental_many(c: KafkaCluster, *resources: tuple[str, list[tuple[str, int, str | None]]]
                     ) -> list[tuple[str, int, str | None]]:
    """One IncrementalAlterConfigs of several TOPIC resources: [(name, error code, message)]."""
    cls = IncrementalAlterConfigsRequest[1]
    res = cls.AlterConfigsResource
    with Wire(c.kafka_port(BROKERS[0])) as w:
        r = w.call(cls(resources=[res(resource_type=TOPIC, resource_name=topic, configs=[
            res.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops])
            for topic, ops in resources], validate_only=False))  # fmt: skip
    return [(x.resource_name, x.error_code, x.error_message) for x in r.responses]


def legacy(c: KafkaCluster, topic: str, *configs: tuple[str, str | None]) -> Any:
    cls = AlterConfigsRequest[2]
    res = cls.AlterConfigsResource
    with Wire(c.kafka_port(BROKERS[2])) as w:
        return w.call(cls(resources=[res(resource_type=TOPIC, resource_name=topic, configs=[
            res.AlterableConfig(name=n, value=v) for n, v in configs])],
            validate_only=False)).responses[0]  # fmt: skip


class Cfg:
    def __init__(self, name: str, value: str | None, op: int = 0) -> None:
        self.name, self.value, self.config_operation = name, value, op


class Res:
    def __init__(self, name: str, *configs: Cfg, rtype: int = TOPIC) -> None:
        self.resource_type, self.resource_name, self.configs = rtype, name, list(configs)


def test_legacy_replace_keeps_only_the_immutable_replication_mode() -> None:
    current = {"replication.mode": "quorum", "retention.ms": "60000", "segment.bytes": "4096"}
    assert legacy_pairs([("retention.bytes", "100")], current) == (
        ("retention.bytes", "100"), ("retention.ms", None), ("segment.bytes", None))
    # named: passed on as given (the controller refuses a change of value)
    assert legacy_pairs([("replication.mode", "isr")], current) == (
        ("replication.mode", "isr"), ("retention.ms", None), ("segment.bytes", None))
    assert legacy_pairs([], {"retention.ms": "1"}) == (("retention.ms", None),)


def test_refusals_follow_kafkas_preprocessing() -> None:
    def is_delete(c: Cfg) -> bool:
        return c.config_operation == 1

    resources = [Res("a", Cfg("retention.ms", "1")), Res("b", Cfg("retention.ms", "1")),
                 Res("a", Cfg("segment.bytes", "4096")), Res("a", Cfg("x", "1"), rtype=BROKER),
                 Res("c", Cfg("retention.ms", "1"), Cfg("retention.ms", "2")),
                 Res("d", Cfg("retention.ms", None, 0), Cfg("segment.bytes", None, 1)),
                 Res("e", Cfg("retention.ms", None, 1))]
    dup = (INVALID_REQUEST, "Each resource must appear at most once.")
    got = {i: (e.code, m) for i, (e, m) in refusals(resources, is_delete).items()}
    assert got == {0: dup, 2: dup,  # both occurrences of topic a; the BROKER "a" is another one
                   4: (INVALID_REQUEST, "Error due to duplicate config keys"),
                   5: (INVALID_REQUEST, "Null value not supported for : retention.ms")}
    # legacy: every null is refused, a DELETE does not exist there
    assert {i for i in refusals([Res("e", Cfg("retention.ms", None, 1))], lambda c: False)} == {0}


def test_incremental_alter_and_describe_on_the_wire(kcluster: KafkaCluster) -> None:
    c = kcluster
    c.create_topic("kp-configs", 1, "retention.ms=60000")
    assert overrides(c, BROKERS[0], "kp-configs") == {"retention.ms": "60000"}
    entry = {e.name: e for e in describe(c, BROKERS[0], "kp-configs").configs}
    assert entry["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.value, s.source) for s in entry["retention.ms"].synonyms] == [
        ("retention.ms", "60000", DYNAMIC_TOPIC_CONFIG),
        ("retention.ms", str(7 * 24 * 3600 * 1000), DEFAULT_CONFIG)]
    assert (entry["segment.bytes"].value, entry["segment.bytes"].config_source) == (
        str(1 << 30), DEFAULT_CONFIG)
    v0 = {e.name: e for e in describe(c, BROKERS[0], "kp-configs", 0).configs}
    assert v0["segment.bytes"].is_default and not v0["retention.ms"].is_default  # v0's field
    assert entry["segment.bytes"].config_type == 3  # INT

    r = incremental(c, "kp-configs", ("segment.bytes", 0, "4096"), ("retention.ms", 1, None))
    assert (r.error_code, r.resource_name) == (0, "kp-configs")
    def everywhere() -> bool:  # every broker's image learns it (answers come from the image)
        return all(overrides(c, b, "kp-configs") == {"segment.bytes": "4096"} for b in BROKERS)

    poll(everywhere, 10, "the altered configs on every broker")

    r = incremental(c, "kp-configs", ("segment.bytes", 0, "8192"), ("bogus.config", 0, "1"))
    assert r.error_code == INVALID_CONFIG and "bogus.config" in r.error_message
    r = incremental(c, "kp-configs", ("segment.bytes", 2, "1"))  # APPEND
    assert r.error_code == INVALID_CONFIG
    assert incremental(c, "nope", ("segment.bytes", 0, "4096")).error_code == (
        UNKNOWN_TOPIC_OR_PARTITION)
    assert incremental(c, "101", ("log.segment.bytes", 0, "4096"),
                       resource_type=BROKER).error_code == INVALID_REQUEST
    assert describe(c, BROKERS[0], "nope").error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert overrides(c, BROKERS[0], "kp-configs") == {"segment.bytes": "4096"}  # unchanged

    # Legacy AlterConfigs replaces the whole override set (segment.bytes goes back to default).
    cls = AlterConfigsRequest[2]
    res = cls.AlterConfigsResource
    with Wire(c.kafka_port(BROKERS[2])) as w:
        r = w.call(cls(resources=[res(resource_type=TOPIC, resource_name="kp-configs", configs=[
            res.AlterableConfig(name="retention.bytes", value="100000")])],
            validate_only=False)).responses[0]  # fmt: skip
    assert r.error_code == 0
    poll(lambda: overrides(c, BROKERS[2], "kp-configs") == {"retention.bytes": "100000"}, 10,
         "the replaced override set")
    for version in (0, 1, 2, 3):  # the older encodings decode too
        assert describe(c, BROKERS[0], "kp-configs", version).error_code == 0


def test_kafka_python_and_confluent_admin_clients(kcluster: KafkaCluster) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )
    from kafka.admin import ConfigResource as KpResource  # type: ignore[import-untyped]
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    c = kcluster
    c.create_topic("kp-configs-clients", 1)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "kp-configs-clients", incremental_configs=[
        ConfigEntry("max.message.bytes", "2048", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)

    def described() -> Any:
        answer = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC,
                                                        "kp-configs-clients")])  # fmt: skip
        return next(iter(answer.values())).result(timeout=15)

    # The alter is answered once the ConfigRecord is committed; DescribeConfigs answers from
    # the serving broker's metadata image, which may not have applied it yet (as on Kafka:
    # docs/kafka-peer.md, the kv workload's stale reads), so the first describe may be stale.
    poll(lambda: described()["max.message.bytes"].value == "2048", 10,
         "DescribeConfigs showing the override")
    entries = described()
    assert entries["retention.bytes"].value == "-1" and entries["retention.bytes"].is_default

    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=10_000)
    try:
        poll(lambda: all(overrides(c, b, "kp-configs-clients") == {"max.message.bytes": "2048"}
                         for b in BROKERS), 10, "the override on every broker")
        result = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "kp-configs-clients")])
        assert "max.message.bytes" in str(result) and "2048" in str(result), result
    finally:
        kp.close()


def test_alter_refusals_on_the_wire_and_replication_mode_kept(kcluster: KafkaCluster) -> None:
    c = kcluster
    c.create_topic("kp-cfg-quorum", 1, "replication.mode=quorum", "retention.ms=60000")
    c.create_topic("kp-cfg-other", 1)
    assert overrides(c, BROKERS[0], "kp-cfg-quorum") == {
        "replication.mode": "quorum", "retention.ms": "60000"}
    # a SET with a null value is INVALID_REQUEST, never a DELETE
    r = incremental(c, "kp-cfg-quorum", ("retention.ms", 0, None))
    assert r.error_code == INVALID_REQUEST and "retention.ms" in r.error_message
    # a topic named twice: both refused; the other resource of the request is done
    got = incremental_many(c, ("kp-cfg-quorum", [("retention.ms", 0, "1000")]),
                           ("kp-cfg-other", [("retention.ms", 0, "2000")]),
                           ("kp-cfg-quorum", [("retention.ms", 0, "3000")]))
    assert [(n, e) for n, e, _ in got] == [("kp-cfg-quorum", INVALID_REQUEST),
                                          ("kp-cfg-other", 0), ("kp-cfg-quorum", INVALID_REQUEST)]
    [(_, e, _)] = incremental_many(c, ("kp-cfg-other", [("retention.ms", 0, "5"),
                                                        ("retention.ms", 1, None)]))
    assert e == INVALID_REQUEST  # one key twice
    assert legacy(c, "kp-cfg-quorum", ("retention.bytes", None)).error_code == INVALID_REQUEST
    poll(lambda: overrides(c, BROKERS[0], "kp-cfg-other") == {"retention.ms": "2000"}, 10,
         "the one valid resource applied")
    assert overrides(c, BROKERS[0], "kp-cfg-quorum") == {
        "replication.mode": "quorum", "retention.ms": "60000"}  # every refusal changed nothing

    # legacy AlterConfigs naming only the key it changes: accepted, replication.mode kept
    r = legacy(c, "kp-cfg-quorum", ("retention.bytes", "100000"))
    assert r.error_code == 0, r
    poll(lambda: all(overrides(c, b, "kp-cfg-quorum") == {
        "replication.mode": "quorum", "retention.bytes": "100000"} for b in BROKERS), 10,
        "the replaced override set, replication.mode kept")
    r = legacy(c, "kp-cfg-quorum", ("replication.mode", "isr"))  # naming a change: refused
    assert r.error_code == INVALID_CONFIG and "replication.mode" in r.error_message

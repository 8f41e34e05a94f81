"""Kafka config APIs of the broker's Kafka listener: DescribeConfigs (32), AlterConfigs (33) and
IncrementalAlterConfigs (44, KIP-339), for TOPIC resources.

DescribeConfigs answers from this broker's metadata image (as a Kafka broker answers from its
metadata cache), with Kafka's sources: DYNAMIC_TOPIC_CONFIG (the topic's override),
STATIC_BROKER_CONFIG (this broker's `log.*` / message.max.bytes synonym, when it differs from
Kafka's default; harness/runtime/log_configs.py) or DEFAULT_CONFIG. The alters are forwarded to the
active controller as the one AlterConfigsRequest the admin API's PATCH /topics/{topic}/configs
also sends (quorum/controller/topics.py validates: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG;
all or nothing per topic), over the broker's controller channel (KIP-590 forwarding).

Not served (answered per resource with an error code, never a dropped connection): BROKER and
other resource types (INVALID_REQUEST), validate_only (INVALID_REQUEST, as CreateTopics here),
APPEND/SUBTRACT (INVALID_CONFIG: no topic config here is a list that takes more than one value).
Legacy AlterConfigs replaces a topic's whole override set: the overrides it does not name are
deleted, computed from this broker's image when the request arrives (Kafka's semantics; a
concurrent alter in between can be overwritten, which is why Kafka deprecated it for KIP-339).
One exception: `replication.mode` is immutable (quorum/controller/topics.py), so a legacy alter
that does not name it keeps it (deleting it would mean "back to isr", which the controller
refuses: a client sending only the key it changes could never alter a quorum topic). Naming it
with another value is still INVALID_CONFIG (docs/kafka-protocol.md).

Checked on this broker before anything is forwarded, as Kafka's ConfigAdminManager does, each
answered INVALID_REQUEST for that resource: a resource named twice in one request (every
occurrence: two alters of one topic would race as two controller calls), a config key named
twice in one resource, and a null value (legacy: any; incremental: on SET, where Kafka never
reads null as DELETE).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import (  # type: ignore[import-untyped]
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from harness.kafka.answer import Reply
from harness.runtime.broker import BrokerNode
from harness.runtime.log_configs import broker_topic_defaults
from quorum.controller.messages import AlterConfigsRequest
from quorum.controller.messages import AlterConfigsResponse as CoreAlter
from quorum.metadata.configs import (
    CLEANUP_POLICY,
    FLUSH_MESSAGES,
    FLUSH_MS,
    LEADER_EPOCH_ENABLE,
    MAX_MESSAGE_BYTES,
    MIN_INSYNC_REPLICAS,
    REPLICATION_MODE,
    RETENTION_BYTES,
    RETENTION_MS,
    SEGMENT_BYTES,
    SEGMENT_MS,
    TOPIC_CONFIG_DEFAULTS,
    UNCLEAN_LEADER_ELECTION_ENABLE,
)
from quorum.metadata.errors import Errors

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
# Kafka's DescribeConfigsResponse ConfigSource values.
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# Kafka's ConfigDef.Type ids (DescribeConfigs v3+ config_type).
_BOOLEAN, _STRING, _INT, _LONG, _LIST = 1, 2, 3, 5, 7
CONFIG_TYPES = {
    MIN_INSYNC_REPLICAS: _INT, UNCLEAN_LEADER_ELECTION_ENABLE: _BOOLEAN, SEGMENT_BYTES: _INT,
    RETENTION_MS: _LONG, RETENTION_BYTES: _LONG, SEGMENT_MS: _LONG, CLEANUP_POLICY: _LIST,
    FLUSH_MESSAGES: _LONG, FLUSH_MS: _LONG, MAX_MESSAGE_BYTES: _INT,
    LEADER_EPOCH_ENABLE: _BOOLEAN,
}  # fmt: skip
# IncrementalAlterConfigs operations (KIP-339).
OP_SET, OP_DELETE = 0, 1


def describe_configs(node: BrokerNode, version: int, request: Any) -> Any:
    cls = DescribeConfigsResponse[version]
    rcls = cls.DescribeConfigsResult
    ccls = rcls.DescribeConfigsResourceResult
    image = node.image
    broker_defaults = broker_topic_defaults(node.config)
    results = []
    for res in request.resources:
        def fail(error: Errors, message: str, res: Any = res) -> Any:
            return rcls(error_code=error.code, error_message=message,
                        resource_type=res.resource_type, resource_name=res.resource_name,
                        configs=[])  # fmt: skip

        if res.resource_type != TOPIC_RESOURCE:
            results.append(fail(Errors.INVALID_REQUEST, "only topic configs are described here"))
            continue
        if image.topic(res.resource_name) is None:
            results.append(fail(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                f"unknown topic {res.resource_name!r}"))  # fmt: skip
            continue
        overrides = image.topic_config_overrides(res.resource_name)
        wanted = None if res.configuration_keys is None else set(res.configuration_keys)
        configs = []
        for name, kafka_default in sorted(TOPIC_CONFIG_DEFAULTS.items()):
            if wanted is not None and name not in wanted:
                continue
            synonyms = []
            if name in overrides:
                value, source = overrides[name], DYNAMIC_TOPIC_CONFIG
                synonyms.append((name, value, DYNAMIC_TOPIC_CONFIG))
            static = broker_defaults.get(name)
            if static is not None and static != kafka_default:
                synonyms.append((name, static, STATIC_BROKER_CONFIG))
                if name not in overrides:
                    value, source = static, STATIC_BROKER_CONFIG
            elif name not in overrides:
                value, source = kafka_default, DEFAULT_CONFIG
            synonyms.append((name, kafka_default, DEFAULT_CONFIG))
            configs.append(ccls(
                name=name, value=value, read_only=False, config_source=source,
                is_default=source == DEFAULT_CONFIG, is_sensitive=False,
                synonyms=[ccls.DescribeConfigsSynonym(name=n, value=v, source=s)
                          for n, v, s in synonyms] if request.include_synonyms else [],
                config_type=CONFIG_TYPES.get(name, _STRING), documentation=None))  # fmt: skip
        results.append(rcls(error_code=0, error_message=None, resource_type=res.resource_type,
                            resource_name=res.resource_name, configs=configs))  # fmt: skip
    return cls(throttle_time_ms=0, results=results)


# Overrides a legacy AlterConfigs keeps when it does not name them: immutable after creation.
KEPT_BY_LEGACY_ALTER = frozenset({REPLICATION_MODE})


def legacy_pairs(given: list[tuple[str, str]], current: dict[str, str]
                 ) -> tuple[tuple[str, str | None], ...]:
    """Legacy AlterConfigs as (key, value or None for delete): the given configs become the
    topic's override set; the current overrides it does not name are deleted, except the
    immutable ones (KEPT_BY_LEGACY_ALTER), which stay as they are."""
    named = {n for n, _ in given}
    return (*given, *((n, None) for n in sorted(current)
                      if n not in named and n not in KEPT_BY_LEGACY_ALTER))


def refusals(resources: list[Any], null_ok: Any) -> dict[int, tuple[Errors, str]]:
    """Request-level checks before anything is forwarded (Kafka's ConfigAdminManager
    preprocessing): resource index -> INVALID_REQUEST and why. `null_ok(config)`: may this
    entry carry a null value (an incremental DELETE)?"""
    out: dict[int, tuple[Errors, str]] = {}
    first: dict[tuple[int, str], int] = {}
    for i, res in enumerate(resources):
        key = (res.resource_type, res.resource_name)
        if key in first:  # every occurrence is refused, the first one too
            for j in (first[key], i):
                out[j] = (Errors.INVALID_REQUEST, "Each resource must appear at most once.")
        else:
            first[key] = i
    for i, res in enumerate(resources):
        if i in out:
            continue
        names = [c.name for c in res.configs]
        if len(set(names)) != len(names):
            out[i] = (Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in res.configs if c.value is None and not null_ok(c)]
        if nulls:
            out[i] = (Errors.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    return out


def alter_configs(node: BrokerNode, version: int, request: Any, reply: Reply) -> None:
    """Legacy AlterConfigs: the given configs become the topic's whole override set (but for
    the immutable replication.mode, kept when not named: `legacy_pairs`)."""

    def pairs(res: Any) -> tuple[tuple[str, str | None], ...] | tuple[Errors, str]:
        return legacy_pairs([(c.name, c.value) for c in res.configs],
                            node.image.topic_config_overrides(res.resource_name))

    refused = refusals(list(request.resources), lambda c: False)
    _alter(node, AlterConfigsResponse[version], request, reply, pairs, refused)


def incremental_alter_configs(
    node: BrokerNode, version: int, request: Any, reply: Reply
) -> None:
    def pairs(res: Any) -> tuple[tuple[str, str | None], ...] | tuple[Errors, str]:
        out: list[tuple[str, str | None]] = []
        for c in res.configs:
            if c.config_operation == OP_SET:
                out.append((c.name, c.value))
            elif c.config_operation == OP_DELETE:
                out.append((c.name, None))
            else:
                return (Errors.INVALID_CONFIG, f"{c.name}: operation {c.config_operation} "
                        "(APPEND/SUBTRACT) is only for list configs; use SET or DELETE")
        return tuple(out)

    refused = refusals(list(request.resources), lambda c: c.config_operation == OP_DELETE)
    _alter(node, IncrementalAlterConfigsResponse[version], request, reply, pairs, refused)


def _alter(node: BrokerNode, cls: Any, request: Any, reply: Reply, pairs: Any,
           refused: dict[int, tuple[Errors, str]]) -> None:
    rcls = cls.AlterConfigsResourceResponse
    assert node.broker is not None
    broker = node.broker

    async def one(i: int, res: Any) -> tuple[Errors, str]:
        if i in refused:
            return refused[i]
        if res.resource_type != TOPIC_RESOURCE:
            return Errors.INVALID_REQUEST, "only topic configs can be altered here"
        if request.validate_only:
            return Errors.INVALID_REQUEST, "validate_only is not supported"
        built = pairs(res)
        if built and isinstance(built[0], Errors):
            return built[0], built[1]
        if not built:  # nothing to change (Kafka answers NONE): no empty proposal
            known = node.image.topic(res.resource_name) is not None
            return (Errors.NONE, "") if known else (
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {res.resource_name!r}")
        response = await broker.call_controller(AlterConfigsRequest(res.resource_name, built))
        if not isinstance(response, CoreAlter):
            return Errors.REQUEST_TIMED_OUT, "no answer from the controller"
        return response.error, response.message

    async def run() -> None:
        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(request.resources)))
        reply(cls(throttle_time_ms=0, responses=[
            rcls(error_code=e.code, error_message=m or None, resource_type=r.resource_type,
                 resource_name=r.resource_name)
            for r, (e, m) in zip(request.resources, results, strict=True)]))  # fmt: skip

    node.loop.create_task(run())

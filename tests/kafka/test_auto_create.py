"""The decisions of auto topic creation (harness/kafka/auto_create.py) on a broker's real
configuration: who may create, which names never are, and one creation in flight per topic.
The whole path against a real cluster, beside Apache Kafka, is the differential test's
"auto-create" scenario (tests/kafka/test_differential.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from harness.kafka import auto_create
from harness.runtime.config import ConfigError, from_properties
from quorum.controller.messages import CreateTopicRequest, CreateTopicResponse
from quorum.metadata.errors import Errors
from tests.node.test_broker_config_and_rpc import BASE

BROKER = {**BASE, "node.id": "101", "process.roles": "broker", "listeners": "127.0.0.1:9201"}


class _Broker:
    """The broker side auto_create uses: its in-flight map and its controller calls."""

    def __init__(self) -> None:
        self.topics_being_created: dict[str, Any] = {}
        self.calls: list[CreateTopicRequest] = []
        self.called = asyncio.Event()
        self.answer = asyncio.Event()

    async def call_controller(self, request: CreateTopicRequest) -> CreateTopicResponse:
        self.calls.append(request)
        self.called.set()
        await self.answer.wait()
        return CreateTopicResponse(Errors.NONE)


def node(loop: asyncio.AbstractEventLoop, **props: str) -> Any:
    config = from_properties({**BROKER, **props})
    return SimpleNamespace(config=config, broker=_Broker(), loop=loop)


def test_the_broker_setting_and_the_request_flag_both_decide() -> None:
    loop = asyncio.new_event_loop()
    on, off = node(loop), node(loop, **{"auto.create.topics.enable": "false"})
    allow, deny = SimpleNamespace(allow_auto_topic_creation=True), SimpleNamespace(
        allow_auto_topic_creation=False)
    assert auto_create.allowed(on, 12, allow) and not auto_create.allowed(on, 12, deny)
    assert auto_create.allowed(on, 3, SimpleNamespace())  # before v4 there is no flag: allowed
    assert not auto_create.allowed(off, 12, allow) and not auto_create.allowed(off, 3, allow)
    loop.close()


def test_kafkas_defaults_and_their_bounds() -> None:
    config = from_properties(BROKER)
    assert (config.auto_create_topics_enable, config.num_partitions,
            config.default_replication_factor) == (1, 1, 1)
    with pytest.raises(ConfigError):
        from_properties({**BROKER, "num.partitions": "0"})


def test_bad_and_internal_names_are_never_created_and_one_creation_is_in_flight() -> None:
    async def run() -> None:
        n = node(asyncio.get_running_loop(), **{"num.partitions": "3",
                                                "default.replication.factor": "2"})
        assert auto_create.create(n, "bad name!") is Errors.INVALID_TOPIC_EXCEPTION
        assert auto_create.create(n, "x" * 250) is Errors.INVALID_TOPIC_EXCEPTION
        assert auto_create.create(n, "__consumer_offsets") is Errors.UNKNOWN_TOPIC_OR_PARTITION
        for _ in range(3):  # a client polling Metadata
            assert auto_create.create(n, "orders") is Errors.UNKNOWN_TOPIC_OR_PARTITION
        await n.broker.called.wait()  # the one task reached the controller
        assert [(c.name, c.partitions, c.replication_factor) for c in n.broker.calls] == [
            ("orders", 3, 2)]
        n.broker.answer.set()
        await n.broker.topics_being_created["orders"]
        assert n.broker.topics_being_created == {}  # answered: the next Metadata may ask again

    asyncio.run(run())

"""The kv workload against Apache Kafka (`kraftlab jepsen run --system kafka --workload kv`).

kraftlab's kv workload (harness/jepsen/workload_kv.py) is a register per key in the metadata
quorum, read and written through the controllers' admin API. Apache Kafka has no key/value
space of its own in its metadata log; what a client can write there and read back is a
topic's configuration. So here each key is a topic (`kraftlab-kv-<key>`, created in setup)
and its value is that topic's `retention.ms` override:

- write(v): IncrementalAlterConfigs v1 (KIP-339), SET `retention.ms` = RETENTION_BASE + n for
  the value `w<n>`, sent to a random broker (a dead one refuses: a fail, as a dead controller
  is for kraftlab's kv), which forwards it to the active
  controller (KIP-590); the controller answers once the ConfigRecord is committed in the
  metadata log (QuorumController.incrementalAlterConfigs is a write event), so an ok write is
  committed;
- read: DescribeConfigs v4 of `retention.ms` from a random broker. A broker answers
  from its own metadata image (KafkaApis.handleDescribeConfigsRequest, the broker's
  ConfigRepository), which trails the log by the broker's fetch from the controller and
  stays as it was while the broker is cut off: it is what kraftlab calls a `local` read, and
  Kafka offers no linearizable config read, so the Kafka target runs this workload with
  `--consistency local` only. A topic without the override (config source other than
  DYNAMIC_TOPIC_CONFIG) reads as null, as an absent key does;
- no cas and no append: a config write has no precondition in Kafka (IncrementalAlterConfigs
  sets, deletes, appends to or subtracts from a list, unconditionally), so the operations are
  read and write only.

The outcome rules are the kv workload's, in Kafka's terms: a refused connection is a fail
(the request never left); an answer with error code 0 is ok; an error that Kafka returns
before the controller writes anything (INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC_OR_
PARTITION, POLICY_VIOLATION, TOPIC_AUTHORIZATION_FAILED) is a fail; any other error
(REQUEST_TIMED_OUT from the forwarding broker, NOT_CONTROLLER, ...), a broken connection or
the operation timeout is info (it may have been committed). A failed read is a fail: a read
changes nothing. The checker is the same linearizability check, so a stale read served by
a lagging broker is found and reported as the kv workload reports it (`stale-read`).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from harness.jepsen.kafka_client import (
    INVALID_REPLICATION_FACTOR,
    TOPIC_ALREADY_EXISTS,
    create_topic,
)
from harness.jepsen.recorder import RunContext
from harness.jepsen.workload_kv import Definite, KvOptions, KvWorkload, Outcome, answered_by
from harness.jepsen.workload_queue import SETUP_TIMEOUT_S, QueueSetupError
from harness.kafka.wire import NotSent, call_async
from harness.peers.kafka import cluster as pk

TOPIC_PREFIX = "kraftlab-kv-"
CONFIG = "retention.ms"
# w<n> is retention.ms = RETENTION_BASE + n: about 31.7 years, so no segment is ever old
# enough to be deleted by the register's writes.
RETENTION_BASE = 10**12
OP_WEIGHTS = (("read", 1), ("write", 1))
# org.apache.kafka.common.config.ConfigResource.Type.TOPIC; DescribeConfigsResponse's
# ConfigSource.DYNAMIC_TOPIC_CONFIG; IncrementalAlterConfigs' OpType.SET
TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1
SET = 0
# Errors Kafka answers before anything is written (org.apache.kafka.common.protocol.Errors)
DEFINITE_ERRORS = {
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    29: "TOPIC_AUTHORIZATION_FAILED",
    40: "INVALID_CONFIG",
    42: "INVALID_REQUEST",
    44: "POLICY_VIOLATION",
}
SETUP_POLL_S = 0.2


def topic_of(key: str) -> str:
    return TOPIC_PREFIX + key


def encode(value: str) -> str:
    """The config value of the register value `w<n>`."""
    if not value.startswith("w") or not value[1:].isdigit():
        raise ValueError(f"the Kafka kv register holds w<n> values only, not {value!r}")
    return str(RETENTION_BASE + int(value[1:]))


def decode(config_value: str | None) -> str | None:
    """The register value of a `retention.ms` override (None: no override, the key is absent).
    A value the workload did not write reads as itself, so the checker reports it."""
    if config_value is None:
        return None
    try:
        n = int(config_value) - RETENTION_BASE
    except ValueError:
        return config_value
    return f"w{n}" if n > 0 else config_value


class KafkaKvWorkload(KvWorkload):
    """KvWorkload on an Apache Kafka peer (module docstring)."""

    def __init__(self, options: KvOptions) -> None:
        if options.consistency != "local":
            raise ValueError(
                "--system kafka --workload kv reads with --consistency local: a Kafka broker "
                "answers DescribeConfigs from its own metadata image, and Kafka has no "
                "linearizable config read")
        super().__init__(options)
        self._peer: pk.PeerFile | None = None
        self._data_dir = Path()

    @property
    def topics(self) -> list[str]:
        return [topic_of(k) for k in self.keys]

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "ops": [f for f, _ in OP_WEIGHTS],
                "register": f"topic {TOPIC_PREFIX}<key>, config {CONFIG}"}

    def _brokers(self, running_only: bool = False) -> list[tuple[int, str, int]]:
        """(id, host, Kafka port) of the peer's brokers; `running_only`: those whose JVM runs,
        from peer.json as it is now (the nemesis restarts JVMs under new PIDs)."""
        assert self._peer is not None, "setup() first"
        peer = pk.PeerFile.load(self._data_dir) if running_only else self._peer
        return [(n.id, n.host, n.kafka_port) for n in peer.brokers
                if n.kafka_port is not None and (not running_only or pk.running(n))]

    async def _kafka(self, ctx: RunContext, request: Any) -> Any:
        """`request` to a random broker, as kraftlab's kv picks a random controller: a dead
        one refuses the connection, a definite fail (Definite)."""
        answered_by.set(None)
        node, host, port = ctx.rng.choice(self._brokers())
        try:
            answer = await call_async(host, port, request)
        except NotSent as exc:
            raise Definite(str(exc)) from exc
        answered_by.set(node)
        return answer

    # --------------------------------------------------------------------------- operations

    async def read(self, ctx: RunContext, key: str, consistency: str) -> Outcome:
        result = (await self._kafka(ctx, describe_request(key))).results[0]
        if result.error_code != 0:
            return Outcome("fail", error=error_name(result.error_code))
        return Outcome("ok", value=value_of(result))

    async def write(self, ctx: RunContext, key: str, value: str) -> Outcome:
        from kafka.protocol.admin import (  # type: ignore[import-untyped]
            IncrementalAlterConfigsRequest,
        )

        cls = IncrementalAlterConfigsRequest[1]
        res = cls.AlterConfigsResource
        request = cls(resources=[res(
            resource_type=TOPIC_RESOURCE, resource_name=topic_of(key),
            configs=[res.AlterableConfig(name=CONFIG, config_operation=SET,
                                         value=encode(value))])],
            validate_only=False)  # fmt: skip
        answer = (await self._kafka(ctx, request)).responses[0]
        if answer.error_code == 0:
            return Outcome("ok")
        name = error_name(answer.error_code)
        return Outcome("fail" if answer.error_code in DEFINITE_ERRORS else "info", error=name)

    async def cas(self, ctx: RunContext, key: str, expected: str | None, new: str) -> Outcome:
        raise ValueError("Kafka has no conditional config write (module docstring)")

    async def append(self, ctx: RunContext, key: str, suffix: str) -> Outcome:
        raise ValueError("Kafka has no conditional config write (module docstring)")

    def _next_op(self, rng: random.Random, worker: int) -> tuple[str, str, Any]:
        f = rng.choices([f for f, _ in OP_WEIGHTS], [w for _, w in OP_WEIGHTS])[0]
        key = rng.choice(self.keys)
        n = next(self._values)
        return (f, key, None) if f == "read" else (f, key, f"w{n}")

    # ----------------------------------------------------------------------------- workload

    async def setup(self, ctx: RunContext) -> None:
        """Create one topic per key (1 partition, RF up to 3) and wait until every running
        broker describes each with no override (CreateTopics retried while brokers are being
        unfenced): every key starts absent, as the model
        assumes (a soak's later run uses new keys)."""
        assert ctx.data_dir is not None
        self._data_dir = ctx.data_dir
        self._peer = pk.PeerFile.load(ctx.data_dir)
        brokers = self._brokers(running_only=True)
        if not brokers:
            raise QueueSetupError("no Kafka broker runs")
        rf = min(3, len(self._peer.brokers))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETUP_TIMEOUT_S
        for topic in self.topics:
            _, host, port = brokers[0]
            while True:
                code, message = await asyncio.to_thread(create_topic, port, topic, 1, rf, {},
                                                        host)
                if code in (0, TOPIC_ALREADY_EXISTS):
                    break
                # INVALID_REPLICATION_FACTOR while brokers are still being unfenced: retried
                if code != INVALID_REPLICATION_FACTOR or loop.time() > deadline:
                    raise QueueSetupError(f"CreateTopics {topic}: error {code} {message}")
                await asyncio.sleep(SETUP_POLL_S)  # the controller unfences in its own time
        for key in self.keys:
            for node, host, port in brokers:
                while True:
                    outcome = await self._read_at(host, port, key)
                    if outcome is not None:
                        if outcome.value is not None:
                            raise QueueSetupError(
                                f"topic {topic_of(key)} already has {CONFIG} set (use new "
                                "keys: --key-prefix)")
                        break
                    if loop.time() > deadline:
                        raise QueueSetupError(f"broker {node} does not describe "
                                              f"{topic_of(key)} within {SETUP_TIMEOUT_S} s")
                    await asyncio.sleep(SETUP_POLL_S)  # the broker's image is catching up

    async def _read_at(self, host: str, port: int, key: str) -> Outcome | None:
        """A read at one broker for setup: None if it failed (not yet in its image)."""
        try:
            async with asyncio.timeout(self.op_timeout_s):
                answer = await call_async(host, port, describe_request(key))
        except (OSError, TimeoutError, ValueError):
            return None
        result = answer.results[0]
        return Outcome("ok", value=value_of(result)) if result.error_code == 0 else None


def describe_request(key: str) -> Any:
    """DescribeConfigs v4 of the key's topic's `retention.ms`."""
    from kafka.protocol.admin import DescribeConfigsRequest

    cls = DescribeConfigsRequest[4]
    return cls(resources=[cls.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic_of(key),
        configuration_keys=[CONFIG])], include_synonyms=False,
        include_documentation=False)  # fmt: skip


def value_of(result: Any) -> str | None:
    """The register value in one DescribeConfigs result (None: no topic override)."""
    return decode(next((c.value for c in result.configs
                        if c.name == CONFIG and c.config_source == DYNAMIC_TOPIC_CONFIG), None))


def error_name(code: int) -> str:
    """Kafka's name of an error code (kafka-python's table), or ERROR_<code>."""
    from kafka.errors import for_code  # type: ignore[import-untyped]

    name = getattr(for_code(code), "message", None)
    return name if isinstance(name, str) and name != "UNKNOWN" else f"ERROR_{code}"

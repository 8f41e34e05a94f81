"""Admin HTTP routes for brokers and topics (docs/api.md): /cluster, /topics, /topics/{topic},
/topics/{topic}/configs, /elect-leaders, /partitions. Served by every node, controllers and
brokers alike.

Rules (on top of harness/admin/server.py's):
- Writes (create, delete, elect) run on the active controller: a follower controller or a broker
  forwards them once (harness/admin/forward.py). The answer is given after the records are
  committed and applied (ActiveController, harness/runtime/controller_rpc.py).
- Reads default to `consistency=linearizable`: served by the active controller after a read
  barrier, so a describe right after a create sees the topic on any node. `consistency=local`
  answers from this node's own image (may be stale; says which offset it has applied).
- Kafka errors map to HTTP as docs/api.md says: TOPIC_ALREADY_EXISTS 409; INVALID_* 400;
  UNKNOWN_TOPIC_OR_PARTITION 404; NOT_CONTROLLER 421 (leader hint); an unknown outcome is
  504 REQUEST_TIMED_OUT with `"indeterminate": true`. Bad input is 400, never 500.
- Topic configs (kafka-configs.sh --entity-type topics): GET describes every topic config with
  its source (DYNAMIC_TOPIC_CONFIG: the topic's override; DEFAULT_CONFIG: Kafka's default, which
  a broker's `log.*` synonym may replace on that broker, harness/runtime/log_configs.py); PATCH is
  IncrementalAlterConfigs (KIP-339): `set` k=v (SET), `delete` k (DELETE: back to the default),
  all or nothing. The controller validates (quorum/controller/topics.py: UNKNOWN_TOPIC_OR_PARTITION
  first, then INVALID_CONFIG naming the key); brokers apply the committed Config records to their
  open logs (harness/runtime/replica_manager.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from harness.admin.context import AdminNode
from harness.admin.forward import LeaderForwarding
from harness.admin.http import BadRequest, error_response, read_json_object
from harness.runtime.context import NotLeaderError, OutcomeUnknownError
from harness.runtime.status import partition_health
from quorum.controller import (
    AlterConfigsRequest,
    ControllerRequest,
    ControllerResponse,
    CreateTopicRequest,
    DeleteTopicRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from quorum.metadata.configs import TOPIC_CONFIG_DEFAULTS, validate_topic_config
from quorum.metadata.describe import describe_topic, describe_topics
from quorum.metadata.errors import Errors
from quorum.metadata.records import NO_LEADER

HTTP_STATUS: dict[Errors, int] = {
    Errors.TOPIC_ALREADY_EXISTS: 409,
    Errors.INVALID_REPLICATION_FACTOR: 400,
    Errors.INVALID_PARTITIONS: 400,
    Errors.INVALID_CONFIG: 400,
    Errors.INVALID_TOPIC_EXCEPTION: 400,
    Errors.INVALID_REQUEST: 400,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: 404,
    Errors.UNKNOWN_TOPIC_ID: 404,
    Errors.NOT_CONTROLLER: 421,
    Errors.LEADER_NOT_AVAILABLE: 503,
    Errors.REQUEST_TIMED_OUT: 504,
}


# Upper bounds checked at the HTTP edge: one CreateTopics writes one record per partition in a
# single proposal, so an absurd count must be refused before it reaches the controller.
MAX_PARTITIONS = 10_000
MAX_REPLICATION_FACTOR = 1_000
# Kafka's DescribeConfigs sources for a topic's configs.
SOURCE_TOPIC = "DYNAMIC_TOPIC_CONFIG"
SOURCE_DEFAULT = "DEFAULT_CONFIG"


def _text_format(request: web.Request) -> bool:
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "text"):
        raise BadRequest("format must be 'json' or 'text'")
    return fmt == "text"


def _leader(value: int) -> int | None:
    return None if value == NO_LEADER else value


class TopicRoutes:
    def __init__(self, node: AdminNode, leader: LeaderForwarding) -> None:
        self.node = node
        self.leader = leader

    # --- helpers ------------------------------------------------------------------------------

    async def _read_here(self, request: web.Request) -> web.StreamResponse | None:
        """None: serve the read from this node's image. Else the response to return."""
        consistency = request.query.get("consistency", "linearizable")
        if consistency not in ("linearizable", "local"):
            raise BadRequest("consistency must be 'linearizable' or 'local'")
        node = self.node
        if consistency == "local":
            return None
        if not node.is_leader:
            return await self.leader.forward(request)
        try:
            await node.read_barrier()
        except NotLeaderError as exc:
            return self.leader.leader_error(exc)
        except OutcomeUnknownError as exc:
            return self.leader.unknown_outcome(exc)
        return None

    async def _call(
        self, request: web.Request, body: bytes | None, call: ControllerRequest
    ) -> web.StreamResponse | ControllerResponse:
        """Run `call` on the active controller (here, or forwarded)."""
        node = self.node
        if not node.is_leader or node.active is None:
            return await self.leader.forward(request, body)
        future = node.active.call(call)
        try:
            response = await asyncio.wait_for(future, node.config.request_timeout_ms / 1000)
        except TimeoutError:
            return self.leader.unknown_outcome(
                OutcomeUnknownError(f"not answered within {node.config.request_timeout_ms} ms")
            )
        if response.error is Errors.NOT_CONTROLLER:
            return self.leader.leader_error(NotLeaderError(node.leader_id, node.epoch))
        return response

    @staticmethod
    def _error(error: Errors, message: str, **hints: Any) -> web.Response:
        return error_response(HTTP_STATUS.get(error, 400), error.name, message or error.name,
                              **hints)

    # --- /cluster -----------------------------------------------------------------------------

    async def cluster(self, request: web.Request) -> web.StreamResponse:
        early = await self._read_here(request)
        if early is not None:
            return early
        image = self.node.image
        brokers = []
        for b in image.brokers():
            rpc, admin = b.endpoint("rpc"), b.endpoint("admin")
            any_endpoint = rpc or admin
            brokers.append({
                "id": b.broker_id, "epoch": b.broker_epoch, "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
                "incarnation_id": b.incarnation_id,
                "host": any_endpoint.host if any_endpoint else None,
                "rpc_port": rpc.port if rpc else None,
                "admin_port": admin.port if admin else None,
                "rack": b.rack,
            })
        return web.json_response({
            "cluster_id": self.node.cluster_id,
            "controller_id": _leader(image.controller_id),
            "controller_epoch": image.controller_epoch,
            "applied_offset": image.applied_offset,
            # Finalized features (FeatureLevel records), e.g. eligible.leader.replicas.version.
            "features": image.features(),
            "brokers": brokers,
            # Offline / under-replicated / under-min-ISR partitions, Kafka's definitions.
            "partition_health": partition_health(image).to_json(),
        })

    # --- /topics ------------------------------------------------------------------------------

    async def list_topics(self, request: web.Request) -> web.StreamResponse:
        _text_format(request)  # validate before forwarding
        early = await self._read_here(request)
        if early is not None:
            return early
        image = self.node.image
        if _text_format(request):
            return web.Response(text="".join(f"{line}\n" for line in describe_topics(image)))
        return web.json_response([t.name for t in image.topics()])

    async def describe(self, request: web.Request) -> web.StreamResponse:
        _text_format(request)
        early = await self._read_here(request)
        if early is not None:
            return early
        name = request.match_info["topic"]
        image = self.node.image
        topic = image.topic(name)
        if topic is None:
            return self._error(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}",
                               topic=name)
        if _text_format(request):
            return web.Response(text="".join(f"{line}\n" for line in describe_topic(image, name)))
        return web.json_response({
            "name": topic.name,
            "topic_id": topic.topic_id,
            "configs": image.topic_configs(name),
            "partitions": [
                {"partition": p.partition, "leader": _leader(p.leader),
                 "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                 "replicas": list(p.replicas), "isr": list(p.isr), "elr": list(p.elr),
                 "last_known_elr": list(p.last_known_elr),
                 "leader_recovery_state": "RECOVERING" if p.leader_recovery_state else "RECOVERED"}
                for p in image.partitions(topic.topic_id)
            ],
        })

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        parsed = await read_json_object(request)
        name = parsed.get("name")
        partitions = parsed.get("partitions")
        rf = parsed.get("replication_factor")
        configs = parsed.get("configs", {})  # absent: none; an explicit null is a wrong type
        if not isinstance(name, str):
            raise BadRequest("'name' must be a string")
        for field, value in (("partitions", partitions), ("replication_factor", rf)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadRequest(f"'{field}' must be an integer")
        if not isinstance(configs, dict) or not all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in configs.values()
        ):
            raise BadRequest("'configs' must be an object of string values")
        assert isinstance(partitions, int) and isinstance(rf, int)
        if partitions > MAX_PARTITIONS:
            return self._error(Errors.INVALID_PARTITIONS,
                               f"at most {MAX_PARTITIONS} partitions per topic", topic=name)
        if rf > MAX_REPLICATION_FACTOR:
            return self._error(Errors.INVALID_REPLICATION_FACTOR,
                               f"replication factor {rf} exceeds {MAX_REPLICATION_FACTOR}",
                               topic=name)
        if partitions < -(2**31) or rf < -(2**15):
            raise BadRequest("'partitions' or 'replication_factor' out of range")
        call = CreateTopicRequest(
            name, partitions, rf, tuple(sorted((str(k), str(v)) for k, v in configs.items()))
        )
        out = await self._call(request, body, call)
        if isinstance(out, web.StreamResponse):
            return out
        if out.error is not Errors.NONE:
            return self._error(out.error, getattr(out, "message", ""), topic=name)
        return web.json_response(
            {"name": name, "topic_id": getattr(out, "topic_id", ""), "partitions": partitions,
             "replication_factor": rf}, status=201,
        )

    async def delete(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["topic"]
        out = await self._call(request, b"", DeleteTopicRequest(name))
        if isinstance(out, web.StreamResponse):
            return out
        if out.error is not Errors.NONE:
            return self._error(out.error, getattr(out, "message", ""), topic=name)
        return web.json_response({"name": name, "deleted": True})

    # --- /topics/{topic}/configs (kafka-configs.sh --entity-type topics) ----------------------

    async def describe_configs(self, request: web.Request) -> web.StreamResponse:
        early = await self._read_here(request)
        if early is not None:
            return early
        name = request.match_info["topic"]
        image = self.node.image
        if image.topic(name) is None:
            return self._error(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}",
                               topic=name)
        overrides = image.topic_config_overrides(name)
        return web.json_response({"topic": name, "configs": [
            {"name": key, "value": value,
             "source": SOURCE_TOPIC if key in overrides else SOURCE_DEFAULT,
             "is_default": key not in overrides}
            for key, value in sorted(image.topic_configs(name).items())
        ]})

    async def alter_configs(self, request: web.Request) -> web.StreamResponse:
        """IncrementalAlterConfigs for one topic: {"set": {k: v}, "delete": [k]}."""
        name = request.match_info["topic"]
        body = await request.read()
        parsed = await read_json_object(request)
        unknown = sorted(set(parsed) - {"set", "delete"})
        if unknown:
            raise BadRequest(f"unknown field(s) {unknown}; give 'set' and/or 'delete'")
        to_set = parsed.get("set", {})
        to_delete = parsed.get("delete", [])
        if not isinstance(to_set, dict) or not all(
            isinstance(v, str | int) and not isinstance(v, bool) for v in to_set.values()
        ):
            raise BadRequest("'set' must be an object of string values")
        if not isinstance(to_delete, list) or not all(isinstance(k, str) for k in to_delete):
            raise BadRequest("'delete' must be a list of config names")
        if not to_set and not to_delete:
            raise BadRequest("nothing to alter: give 'set' and/or 'delete'")
        pairs: list[tuple[str, str | None]] = [(str(k), str(v)) for k, v in to_set.items()]
        pairs += [(k, None) for k in to_delete]
        out = await self._call(request, body, AlterConfigsRequest(name, tuple(pairs)))
        if isinstance(out, web.StreamResponse):
            return out
        if out.error is not Errors.NONE:
            hints: dict[str, Any] = {"topic": name}
            bad = _first_bad_config(pairs)
            if out.error is Errors.INVALID_CONFIG and bad is not None:
                hints["config"] = bad
            return self._error(out.error, getattr(out, "message", ""), **hints)
        # Answered after the records are committed and applied here (ActiveController).
        return web.json_response({"topic": name,
                                  "configs": self.node.image.topic_config_overrides(name)})

    async def elect_leaders(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        parsed = await read_json_object(request)
        topic = parsed.get("topic")
        partition = parsed.get("partition")  # absent: every partition; null is a wrong type
        election_type = parsed.get("election_type", "preferred")
        if not isinstance(topic, str):
            raise BadRequest("'topic' must be a string")
        if "partition" in parsed and (
            not isinstance(partition, int) or isinstance(partition, bool)
            or not 0 <= partition < 2**31
        ):
            raise BadRequest("'partition' must be a non-negative 32-bit integer")
        if election_type not in ("preferred", "unclean"):
            raise BadRequest("'election_type' must be 'preferred' or 'unclean'")
        out = await self._call(request, body, ElectLeadersRequest(topic, partition, election_type))
        if isinstance(out, web.StreamResponse):
            return out
        assert isinstance(out, ElectLeadersResponse)
        if out.error is not Errors.NONE:
            return self._error(out.error, out.message, topic=topic)
        return web.json_response({
            "topic": topic, "election_type": election_type,
            "results": [
                {"topic": r.topic, "partition": r.partition, "error": r.error.name,
                 "message": r.message}
                for r in out.results
            ],
        })

    async def alter_isr(self, request: web.Request) -> web.StreamResponse:
        """kraftlab-only: the partition leader asks the controller for a new ISR (AlterPartition),
        as the replica cores do by themselves: a manual override for demos and tests,
        which may race with the leader's own AlterPartition (the controller rejects the stale one)."""
        broker = self.node.broker
        if broker is None:
            return error_response(400, "INVALID_REQUEST", "only a broker (the leader) alters an ISR")
        topic = request.match_info["topic"]
        try:
            partition = int(request.match_info["partition"])
        except ValueError:
            raise BadRequest("partition must be an integer") from None
        parsed = await read_json_object(request)
        isr = parsed.get("isr")
        if not isinstance(isr, list) or not isr or not all(
            isinstance(b, int) and not isinstance(b, bool) for b in isr
        ):
            raise BadRequest("'isr' must be a non-empty list of broker ids")
        out = await broker.alter_isr(topic, partition, isr)
        if out.error is not Errors.NONE:
            status = {Errors.NOT_LEADER_OR_FOLLOWER: 421, Errors.UNKNOWN_TOPIC_OR_PARTITION: 404,
                      Errors.REQUEST_TIMED_OUT: 504}.get(out.error, 400)
            return error_response(status, out.error.name, f"AlterPartition: {out.error.name}",
                                  leader=_leader(out.leader))
        return web.json_response({"topic": topic, "partition": partition,
                                  "leader": _leader(out.leader), "leader_epoch": out.leader_epoch,
                                  "isr": list(out.isr), "partition_epoch": out.partition_epoch})

    # --- /partitions (brokers) ----------------------------------------------------------------

    async def partitions(self, request: web.Request) -> web.Response:
        broker = self.node.broker
        return web.json_response([] if broker is None else broker.assignments())


def _first_bad_config(pairs: list[tuple[str, str | None]]) -> str | None:
    """The first config name the controller would refuse (a hint beside its message)."""
    seen: set[str] = set()
    for key, value in pairs:
        if key in seen:
            return key  # named twice (in 'set' and 'delete')
        seen.add(key)
        if value is None:
            if key not in TOPIC_CONFIG_DEFAULTS:
                return key
        elif validate_topic_config(key, value) is not None:
            return key
    return None


def add_routes(app: web.Application, node: AdminNode, leader: LeaderForwarding) -> None:
    routes = TopicRoutes(node, leader)
    r = app.router
    r.add_get("/cluster", routes.cluster)
    r.add_get("/topics", routes.list_topics)
    r.add_post("/topics", routes.create)
    r.add_get("/topics/{topic}", routes.describe)
    r.add_delete("/topics/{topic}", routes.delete)
    r.add_get("/topics/{topic}/configs", routes.describe_configs)
    r.add_patch("/topics/{topic}/configs", routes.alter_configs)
    r.add_post("/elect-leaders", routes.elect_leaders)
    r.add_get("/partitions", routes.partitions)
    r.add_post("/partitions/{topic}/{partition}/isr", routes.alter_isr)

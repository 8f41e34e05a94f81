"""The OpenAPI 3.1 document served at GET /openapi.json: the routes every node serves.

Kept beside the routes (harness/admin/server.py) and checked against the router in
tests/integration (every served route is documented, nothing documented is missing).
"""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/schemas/Error"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _voter_paths() -> dict[str, Any]:
    """KIP-853 voter changes (harness/admin/voters.py), answered once committed."""
    int_ = {"type": "integer"}
    endpoint = {"type": "string", "description": "the controller's RPC listener, host:port"}
    voters = _json({"type": "object", "properties": {
        "kind": {"type": "string"}, "node_id": int_,
        "current_voters": {"type": "array", "items": int_}}})
    errors = {
        "400": {"description": "INVALID_REQUEST (last voter, bad body), UNSUPPORTED_VERSION"},
        "404": {"description": "VOTER_NOT_FOUND"},
        "409": {"description": "DUPLICATE_VOTER"},
        "503": {"description": "REQUEST_TIMED_OUT (another change in flight or uncommitted, "
                               "the new voter not caught up, not committed in time), "
                               "NOT_LEADER_OR_FOLLOWER (indeterminate), LEADER_NOT_AVAILABLE"},
    }
    node_param = {"name": "node_id", "in": "path", "required": True, "schema": int_}
    return {
        "/quorum/voters": {"post": {
            "summary": "AddRaftVoter: add a caught-up observer controller to the voters",
            "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "required": ["node_id", "endpoint"],
                "properties": {"node_id": int_, "endpoint": endpoint}}}}},
            "responses": {"200": voters, **errors}}},
        "/quorum/voters/{node_id}": {
            "parameters": [node_param],
            "put": {
                "summary": "UpdateRaftVoter: a voter's new endpoint",
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "required": ["endpoint"],
                    "properties": {"endpoint": endpoint}}}}},
                "responses": {"200": voters, **errors}},
            "delete": {"summary": "RemoveRaftVoter: remove a voter (the leader resigns after)",
                       "responses": {"200": voters, **errors}},
        },
    }


def _errors(*codes: int) -> dict[str, Any]:
    names = {
        400: "INVALID_REQUEST, INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, INVALID_CONFIG, "
             "INVALID_TOPIC_EXCEPTION",
        404: "KEY_NOT_FOUND / UNKNOWN_TOPIC_OR_PARTITION",
        409: "CAS_FAILED / TOPIC_ALREADY_EXISTS / OUT_OF_ORDER_SEQUENCE_NUMBER / "
             "INVALID_PRODUCER_EPOCH",
        413: "MESSAGE_TOO_LARGE (the batch exceeds the topic's max.message.bytes)",
        416: "OFFSET_OUT_OF_RANGE (outside [log_start_offset, high_watermark])",
        421: "NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER (hint: leader)",
        503: "LEADER_NOT_AVAILABLE / NOT_ENOUGH_REPLICAS / NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        504: "REQUEST_TIMED_OUT (indeterminate: the write may or may not have happened)",
    }
    return {str(c): _json(ERROR, names[c]) for c in codes}


KEY_PARAM = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
WRITE_OK = {
    "type": "object",
    "properties": {"key": {"type": "string"}, "version": {"type": "integer"},
                   "offset": {"type": "integer"}},
}
# A value is `value` (UTF-8 text) or `value_b64` (bytes), exactly one (admin.py value_field).
ONE_VALUE = [{"required": ["value"]}, {"required": ["value_b64"]}]
VALUE_BODY = {
    "type": "object",
    "properties": {"value": {"type": "string"}, "value_b64": {"type": "string"}},
    "oneOf": ONE_VALUE,
}


TOPIC_PARAM = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
CONSISTENCY = {"name": "consistency", "in": "query", "schema": {
    "enum": ["linearizable", "local"], "default": "linearizable"}}
FORMAT = {"name": "format", "in": "query", "schema": {"enum": ["json", "text"]},
          "description": "text: the kafka-topics.sh --describe lines"}


def _topic_paths() -> dict[str, Any]:
    int_ = {"type": "integer"}
    ids = {"type": "array", "items": int_}
    partition = {"type": "object", "properties": {
        "partition": int_, "leader": {"type": ["integer", "null"]}, "leader_epoch": int_,
        "partition_epoch": int_, "replicas": ids, "isr": ids, "elr": ids,
        "last_known_elr": ids, "leader_recovery_state": {"enum": ["RECOVERED", "RECOVERING"]}}}
    return {
        "/cluster": {"get": {
            "summary": "registered brokers (fenced or not) and the active controller",
            "parameters": [CONSISTENCY],
            "responses": {"200": _json({"type": "object", "properties": {
                "cluster_id": {"type": "string"}, "controller_id": {"type": ["integer", "null"]},
                "features": {"type": "object", "additionalProperties": int_},
                "brokers": {"type": "array", "items": {"type": "object", "properties": {
                    "id": int_, "epoch": int_, "fenced": {"type": "boolean"},
                    "host": {"type": "string"}, "rpc_port": int_, "admin_port": int_,
                    "rack": {"type": ["string", "null"]}}}}}}), **_errors(400, 503, 504)}}},
        "/topics": {
            "get": {"summary": "topic names (format=text: describe every topic)",
                    "parameters": [CONSISTENCY, FORMAT],
                    "responses": {"200": _json({"type": "array", "items": {"type": "string"}}),
                                  **_errors(400, 503, 504)}},
            "post": {"summary": "create a topic (on the active controller)",
                     "requestBody": {"content": {"application/json": {"schema": {
                         "type": "object", "required": ["name", "partitions",
                                                        "replication_factor"],
                         "properties": {"name": {"type": "string"}, "partitions": int_,
                                        "replication_factor": int_,
                                        "configs": {"type": "object"}}}}}},
                     "responses": {"201": _json({"type": "object"}, "created"),
                                   **_errors(400, 409, 421, 503, 504)}},
        },
        "/topics/{topic}": {
            "parameters": [TOPIC_PARAM],
            "get": {"summary": "describe a topic (JSON, or format=text)",
                    "parameters": [CONSISTENCY, FORMAT],
                    "responses": {"200": _json({"type": "object", "properties": {
                        "name": {"type": "string"}, "topic_id": {"type": "string"},
                        "configs": {"type": "object"},
                        "partitions": {"type": "array", "items": partition}}}),
                        **_errors(400, 404, 503, 504)}},
            "delete": {"summary": "delete a topic",
                       "responses": {"200": _json({"type": "object"}),
                                     **_errors(404, 421, 503, 504)}},
        },
        "/topics/{topic}/configs": {
            "parameters": [TOPIC_PARAM],
            "get": {"summary": "every topic config with its source, like kafka-configs.sh "
                               "--describe --all (DYNAMIC_TOPIC_CONFIG: the topic's override)",
                    "parameters": [CONSISTENCY],
                    "responses": {"200": _json({"type": "object", "properties": {
                        "topic": {"type": "string"},
                        "configs": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"}, "value": {"type": "string"},
                            "source": {"enum": ["DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"]},
                            "is_default": {"type": "boolean"}}}}}}),
                        **_errors(400, 404, 503, 504)}},
            "patch": {"summary": "IncrementalAlterConfigs (KIP-339), like kafka-configs.sh "
                                 "--alter --add-config k=v --delete-config k: all or nothing; "
                                 "answers the topic's overrides after the change",
                      "requestBody": {"content": {"application/json": {"schema": {
                          "type": "object", "additionalProperties": False,
                          "anyOf": [{"required": ["set"]}, {"required": ["delete"]}],
                          "properties": {
                              "set": {"type": "object", "additionalProperties": {
                                  "type": ["string", "integer"]},
                                  "description": "config name -> new value (SET)"},
                              "delete": {"type": "array", "items": {"type": "string"},
                                         "description": "config names back to their default "
                                                        "(DELETE)"}}}}}},
                      "responses": {"200": _json({"type": "object", "properties": {
                          "topic": {"type": "string"}, "configs": {"type": "object"}}}),
                          **_errors(400, 404, 421, 503, 504)}},
        },
        "/elect-leaders": {"post": {
            "summary": "preferred or unclean leader election (KIP-460)",
            "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "required": ["topic"], "properties": {
                    "topic": {"type": "string"}, "partition": int_,
                    "election_type": {"enum": ["preferred", "unclean"]}}}}}},
            "responses": {"200": _json({"type": "object", "properties": {
                "results": {"type": "array", "items": {"type": "object", "properties": {
                    "topic": {"type": "string"}, "partition": int_,
                    "error": {"type": "string"}, "message": {"type": "string"}}}}}}),
                **_errors(400, 404, 421, 503, 504)}}},
        "/partitions/{topic}/{partition}/isr": {"post": {
            "summary": "kraftlab-only, on the partition leader: AlterPartition to set the ISR "
                       "(the replica cores do this themselves; a manual override); the controller validates it",
            "parameters": [TOPIC_PARAM, {"name": "partition", "in": "path", "required": True,
                                         "schema": int_}],
            "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "required": ["isr"], "properties": {"isr": ids}}}}},
            "responses": {"200": _json({"type": "object"}), **_errors(400, 404, 421, 504)}}},
        "/partitions": {"get": {
            "summary": "replicas hosted on this broker, as their replica cores see them "
                       "(replication.mode=raft: the Raft role, epoch and voters)",
            "responses": {"200": _json({"type": "array", "items": {"type": "object",
                "properties": {"topic": {"type": "string"}, "partition": int_,
                               "role": {"enum": ["leader", "follower", "offline", "unattached",
                                                 "voted", "prospective", "candidate",
                                                 "resigned"]},
                               "replication_mode": {"enum": ["raft"]},
                               "leader_epoch": int_, "log_start_offset": int_,
                               "log_end_offset": int_, "high_watermark": int_, "isr": ids,
                               "voters": {"type": "array", "items": {"type": "object",
                                   "properties": {"node_id": int_, "role": {"type": "string"},
                                                  "log_end_offset": int_,
                                                  "lag": {"type": ["integer", "null"]}}}},
                               "acks_all_needs": int_, "note": {"type": "string"}}}})}}},
        **_record_paths(),
    }


def _record_paths() -> dict[str, Any]:
    int_ = {"type": "integer"}
    query = [{"name": n, "in": "query", "schema": s} for n, s in (
        ("acks", {"enum": ["0", "1", "all"], "default": "all"}),
        ("timeout_ms", {"type": "integer", "default": 30000}))]
    fetch_query = [{"name": n, "in": "query", "schema": {"type": "integer"}}
                   for n in ("offset", "max_records", "max_wait_ms", "max_bytes")]
    record_in = {"type": "object", "oneOf": ONE_VALUE, "properties": {
        "key": {"type": ["string", "null"]}, "key_b64": {"type": "string"},
        "value": {"type": "string"}, "value_b64": {"type": "string"},
        "headers": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}}}
    record_out = {"type": "object", "properties": {
        "offset": int_, "key": {"type": ["string", "null"]}, "value": {"type": ["string", "null"]},
        "value_b64": {"type": "string"}, "leader_epoch": int_, "timestamp": int_}}
    return {"/topics/{topic}/partitions/{partition}/records": {
        "parameters": [TOPIC_PARAM, {"name": "partition", "in": "path", "required": True,
                                     "schema": int_}],
        "post": {"summary": "produce records (one batch) to the partition leader; idempotent "
                            "with producer_id, producer_epoch, base_sequence",
                 "parameters": query,
                 "requestBody": {"content": {"application/json": {"schema": {
                     "type": "object", "required": ["records"], "properties": {
                         "records": {"type": "array", "items": record_in},
                         "producer_id": int_, "producer_epoch": int_, "base_sequence": int_}}}}},
                 "responses": {"200": _json({"type": "object", "properties": {
                     "base_offset": int_, "last_offset": int_, "leader_epoch": int_}}),
                     **_errors(400, 404, 409, 413, 421, 503, 504)}},
        "get": {"summary": "consume records below the high watermark (long poll: max_wait_ms)",
                "parameters": fetch_query,
                "responses": {"200": _json({"type": "object", "properties": {
                    "records": {"type": "array", "items": record_out},
                    "high_watermark": int_, "log_start_offset": int_}}),
                    **_errors(400, 404, 416, 421, 504)}},
    }, "/topics/{topic}/partitions/{partition}/replica-log": {
        "parameters": [TOPIC_PARAM, {"name": "partition", "in": "path", "required": True,
                                     "schema": int_}],
        "get": {"summary": "this broker's own replica up to its log end (kafka-dump-log.sh; "
                           "compare replicas, KIP-101 divergence)",
                "parameters": [q for q in fetch_query if q["name"] in ("offset", "max_records")],
                "responses": {"200": _json({"type": "object", "properties": {
                    "broker": int_, "records": {"type": "array", "items": record_out},
                    "high_watermark": int_, "log_end_offset": int_,
                    "log_start_offset": int_}}),
                    **_errors(400, 404)}},
    }}


READ_METHODS = ("get", "head", "options")


def _secure(doc: dict[str, Any]) -> dict[str, Any]:
    """Every write: the bearer token requirement (harness/admin/auth.py) and its 401; every
    request body is required (a write without one is a 400)."""
    for item in doc["paths"].values():
        for method, op in item.items():
            if method == "parameters" or method in READ_METHODS:
                continue
            op["security"] = [{}, {"bearerAuth": []}]  # {}: none needed on 127.0.0.1
            op["responses"]["401"] = _json(ERROR, "SASL_AUTHENTICATION_FAILED: the admin API is "
                                           "not on 127.0.0.1 and no valid bearer token was sent")
            if "requestBody" in op:
                op["requestBody"]["required"] = True
    return doc


def openapi_document() -> dict[str, Any]:
    return _secure(_document())


def _group_paths() -> dict[str, Any]:
    """harness/admin/groups.py: the group coordinator of the answering broker."""
    int_ = {"type": "integer"}
    str_ = {"type": "string"}
    not_here = _json(ERROR, "INVALID_REQUEST: a controller (groups are served by brokers)")
    retry = _json(ERROR, "COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE")
    return {
        "/groups": {"get": {
            "summary": "the consumer groups of the __consumer_offsets partitions this broker "
                       "leads (kafka-consumer-groups --list asks every broker)",
            "responses": {"200": _json({"type": "object", "properties": {
                "coordinator": int_, "groups": {"type": "array", "items": {
                    "type": "object", "properties": {
                        "group": str_, "protocol_type": str_, "state": str_}}}}}),
                "400": not_here, "503": retry}}},
        "/groups/{group}": {
            "parameters": [{"name": "group", "in": "path", "required": True, "schema": str_}],
            "get": {
                "summary": "a group's state, members with their assignments, committed offsets "
                           "(on its coordinator; elsewhere 421 with the coordinator's id)",
                "responses": {"200": _json({"type": "object", "properties": {
                    "group": str_, "coordinator": int_, "state": str_, "protocol_type": str_,
                    "protocol": str_,
                    "members": {"type": "array", "items": {"type": "object", "properties": {
                        "member_id": str_, "group_instance_id": {"type": ["string", "null"]},
                        "client_id": str_, "host": str_,
                        "assignment": {"type": "array", "items": {"type": "object",
                                       "properties": {"topic": str_, "partition": int_}}}}}},
                    "offsets": {"type": "array", "items": {"type": "object", "properties": {
                        "topic": str_, "partition": int_, "offset": int_, "leader_epoch": int_,
                        "metadata": str_}}}}}),
                    "400": not_here,
                    "421": _json(ERROR, "NOT_COORDINATOR (hint: coordinator)"),
                    "503": retry}}},
    }


def _document() -> dict[str, Any]:
    int_ = {"type": "integer"}
    return {
        "openapi": "3.1.0",
        "info": {"title": "kraftlab node admin API", "version": "1"},
        "paths": {
            "/health": {"get": {"summary": "liveness and role", "responses": {"200": _json(
                {"type": "object", "properties": {"node_id": int_, "role": {"type": "string"},
                                                  "status": {"type": "string"}}})}}},
            "/metrics": {"get": {"summary": "Prometheus text format", "responses": {
                "200": {"description": "metrics", "content": {"text/plain": {}}}}}},
            "/openapi.json": {"get": {"summary": "this document",
                                      "responses": {"200": _json({"type": "object"})}}},
            "/quorum/status": {"get": {
                "summary": "like kafka-metadata-quorum describe --status (this node's view)",
                "responses": {"200": _json({"type": "object", "properties": {
                    "cluster_id": {"type": "string"}, "leader_id": {"type": ["integer", "null"]},
                    "leader_epoch": int_, "voted_id": {"type": ["integer", "null"]},
                    "high_watermark": int_, "max_follower_lag": int_,
                    "max_follower_lag_time_ms": int_,
                    "current_voters": {"type": "array", "items": int_},
                    "current_observers": {"type": "array", "items": int_},
                    "applied_offset": int_, "log_start_offset": int_,
                    "latest_snapshot": {"type": ["object", "null"], "properties": {
                        "end_offset": int_, "epoch": int_}},
                    "state_digest": {"type": "string"}}})}}},
            "/quorum/replication": {"get": {
                "summary": "like kafka-metadata-quorum describe --replication (from the leader)",
                "responses": {"200": _json({"type": "array", "items": {
                    "type": "object", "properties": {
                        "node_id": int_, "log_end_offset": int_, "lag": int_,
                        "last_fetch_timestamp": int_, "last_caught_up_timestamp": int_,
                        "status": {"type": "string"}}}}), **_errors(503)}}},
            "/kv/{key}": {
                "parameters": [KEY_PARAM],
                "get": {
                    "summary": "read a key (linearizable through the leader, or local)",
                    "parameters": [{"name": "consistency", "in": "query", "schema": {
                        "enum": ["linearizable", "local"], "default": "linearizable"}}],
                    "responses": {"200": _json({"type": "object", "properties": {
                        "key": {"type": "string"}, "value": {"type": "string"},
                        "version": int_}}), **_errors(400, 404, 503, 504)},
                },
                "put": {
                    "summary": "write a key (forwarded to the leader)",
                    "requestBody": {"content": {"application/json": {"schema": VALUE_BODY}}},
                    "responses": {"200": _json(WRITE_OK), **_errors(400, 503, 504)},
                },
                "delete": {
                    "summary": "delete a key",
                    "responses": {"200": _json(WRITE_OK), **_errors(404, 503, 504)},
                },
            },
            "/kv/{key}/cas": {
                "parameters": [KEY_PARAM],
                "post": {
                    "summary": "compare-and-set (expected null: key absent)",
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {
                            "type": "object", "allOf": [
                                {"oneOf": [{"required": ["expected"]},
                                           {"required": ["expected_b64"]}]},
                                {"oneOf": ONE_VALUE}],
                            "properties": {
                                "expected": {"type": ["string", "null"]},
                                "expected_b64": {"type": "string"},
                                "value": {"type": "string"}, "value_b64": {"type": "string"}}}}}},
                    "responses": {"200": _json(WRITE_OK), **_errors(400, 409, 503, 504)},
                },
            },
            "/nemesis/links": {
                "get": {"summary": "current link filter", "responses": {"200": _json(
                    {"$ref": "#/components/schemas/Links"})}},
                "post": {"summary": "drop traffic to and from these nodes; delay outgoing traffic",
                         "requestBody": {"content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/Links"}}}},
                         "responses": {"200": _json({"$ref": "#/components/schemas/Links"}),
                                       **_errors(400)}},
                "delete": {"summary": "heal", "responses": {"200": _json(
                    {"$ref": "#/components/schemas/Links"})}},
            },
            **_voter_paths(),
            "/nemesis/clock": {
                "get": {"summary": "this process's clock: skew from the machine's, rate",
                        "responses": {"200": _json({"$ref": "#/components/schemas/Clock"})}},
                "post": {"summary": "step this process's clock and/or set its rate",
                         "requestBody": {"content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/ClockChange"}}}},
                         "responses": {"200": _json({"$ref": "#/components/schemas/Clock"}),
                                       **_errors(400)}},
                "delete": {"summary": "back in step with the machine", "responses": {"200": _json(
                    {"$ref": "#/components/schemas/Clock"})}},
            },
            **_topic_paths(),
            **_group_paths(),
        },
        "components": {
            "securitySchemes": {"bearerAuth": {
                "type": "http", "scheme": "bearer",
                "description": "the cluster's token (DIR/admin-token, written by `kraftlab "
                               "cluster up`); required on writes unless bound to 127.0.0.1"}},
            "schemas": {
            "Error": {"type": "object", "required": ["error", "message"], "properties": {
                "error": {"type": "string", "description": "Kafka error name"},
                "message": {"type": "string"}}},
            "Clock": {"type": "object", "properties": {
                "skew_ms": {"type": "number", "description": "ahead (+) or behind the machine"},
                "rate": {"type": "number"}, "now_ms": {"type": "integer"},
                "wall_ms": {"type": "integer"}, "changes": {"type": "integer"}}},
            "ClockChange": {"type": "object", "additionalProperties": False, "minProperties": 1,
                            "properties": {
                "jump_ms": {"type": "integer", "minimum": -3600000, "maximum": 3600000,
                            "description": "step the clock (negative: back; the cores' clock "
                                           "then holds until it passes its old reading)"},
                "rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 100,
                         "description": "clock speed relative to the machine's"}}},
            "Links": {"type": "object", "additionalProperties": False, "properties": {
                "drop": {"type": "array", "items": {"type": "integer", "minimum": 0},
                         "description": "peers (node ids) whose traffic to and from this node "
                                        "is dropped: Raft, controller RPC, replica fetches and "
                                        "admin requests they forward; never client traffic"},
                "delay_ms": {"type": "integer", "minimum": 0, "maximum": 60000,
                             "description": "delay of outgoing peer traffic"},
                "delay_to": {"type": "array", "items": {"type": "integer", "minimum": 0},
                             "description": "only delay traffic to these peers"},
                "drop_clients": {"type": "boolean", "default": False,
                                 "description": "also silence client traffic: admin HTTP "
                                                "requests (except /nemesis/*) and native "
                                                "key/value and data client connections; a "
                                                "cut-off request is never executed and never "
                                                "answered (its connection is aborted at heal)"}}},
        }},
    }

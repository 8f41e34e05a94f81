"""Fuzz the admin API from its own OpenAPI document, on real processes.

One cluster per module (1 controller + 2 brokers, `kraftlab cluster up`). Hypothesis draws an
operation from GET /openapi.json, then path parameters, query parameters and a body built from the
operation's own schemas (valid shapes, wrong types, extra fields, out-of-range integers, non-JSON
bytes), and sends it to a random node. Properties:
- no 5xx of any kind is UNKNOWN_SERVER_ERROR (500), and no 5xx outside the documented
  unavailability answers (503 NOT_ENOUGH_REPLICAS when min.insync.replicas cannot be met is a
  contract, not a crash);
- a rejected (4xx) mutating request changes nothing: topics (described), registered brokers, the
  touched kv key and the touched partition's high watermark are equal before and after;
- every node process is alive and answers /health afterwards.
- every status a node answered is listed in the operation's documented responses;
- every body the API accepted (2xx) is valid under the operation's own request schema
  (jsonschema): a field the server requires, a type it checks or a oneOf it enforces must be in
  the document. (This found keys with braces unroutable: /kv/{key} now takes any [^/]+.)

Not fuzzed: POST/DELETE /nemesis/links and /nemesis/clock (a valid body partitions the cluster
or steps a node's clock on purpose, which is the nemesis tests' job, not a validation property),
and the voter changes under /quorum/voters (a valid request removes a voter or points it
elsewhere on purpose: tests/integration/test_membership.py).
"""

from __future__ import annotations

import http.client
import json
import string
import urllib.parse
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.launcher import cluster as cl
from tests.live import LiveCluster, started_cluster

pytestmark = pytest.mark.integration

REQUESTS = 2000
SKIPPED = {("/nemesis/links", "post"), ("/nemesis/links", "delete"),
           ("/quorum/voters", "post"), ("/quorum/voters/{node_id}", "put"),
           ("/quorum/voters/{node_id}", "delete"),
           ("/nemesis/clock", "post"), ("/nemesis/clock", "delete")}
KNOWN_TOPICS = ["fuzz-a", "fuzz-b"]
KNOWN_KEYS = ["k1", "k2"]
# Documented 5xx that are not crashes: a produce with acks=all below min.insync.replicas, and a
# partition with no leader (a fuzzed ISR override / unclean election may leave one briefly).
ALLOWED_5XX = {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "LEADER_NOT_AVAILABLE"}


def allowed_5xx(method: str, url: str, error: str | None) -> bool:
    """A produce whose acks=all wait outlives its `timeout_ms` (0 included) answers 504
    REQUEST_TIMED_OUT `indeterminate`, as Kafka's DelayedProduce expires: documented, not a
    crash. Elsewhere a timeout would be a hang, so it is not excused."""
    if error in ALLOWED_5XX:
        return True
    return (error == "REQUEST_TIMED_OUT" and method == "POST" and "/records" in url
            and "timeout_ms=" in url)


@pytest.fixture(scope="module")
def fcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("fuzz"), controllers=1, brokers=2) as live:
        yield live


class Http:
    """One keep-alive connection per node; reconnects after an error."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.conn: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=15)
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


# --- strategies from the document ------------------------------------------------------------

INTS = st.one_of(st.integers(-3, 5), st.integers(-(2**70), 2**70))
WEIRD_TEXT = st.text(alphabet=string.printable + "é\u0000\u2028/%?#", max_size=12)
ANY_JSON = st.recursive(
    st.none() | st.booleans() | INTS | st.floats(allow_nan=False) | WEIRD_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WEIRD_TEXT, inner, max_size=3),
    max_leaves=6,
)


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def from_schema(doc: dict[str, Any], schema: dict[str, Any], name: str = "",
                valid: bool = False) -> st.SearchStrategy[Any]:
    """Values of `schema`, biased to the valid ones, sometimes of the wrong type (never when
    `valid`: then small in-range values, so accepted writes are exercised too)."""
    schema = resolve(doc, schema)
    if "enum" in schema:
        good: st.SearchStrategy[Any] = st.sampled_from(schema["enum"])
    else:
        types = schema.get("type", "object")
        types = [t for t in (types if isinstance(types, list) else [types])
                 if not valid or t != "null"]
        options: list[st.SearchStrategy[Any]] = []
        for t in types:
            match t:
                case "integer":
                    small = name in ("partitions", "partition", "replication_factor")
                    options.append(st.integers(0, 3) if small or valid else INTS)
                case "string":
                    if name in ("name", "topic"):
                        # The known topics (so deletes, describes and produces hit something),
                        # or a fresh name, so a valid create does not depend on a delete of a
                        # known topic having been drawn (and completed) before it.
                        options.append(st.sampled_from(KNOWN_TOPICS) | st.text(
                            string.ascii_lowercase, min_size=4, max_size=8).map("fz-".__add__))
                    else:
                        options.append(st.text(string.ascii_letters, max_size=8) if valid
                                       else WEIRD_TEXT)
                case "boolean":
                    options.append(st.booleans())
                case "null":
                    options.append(st.none())
                case "array":
                    options.append(st.lists(from_schema(doc, schema.get("items", {}), name, valid),
                                            min_size=int(valid), max_size=4))
                case _:
                    options.append(object_of(doc, schema, valid))
        good = st.one_of(options)
    if valid:
        return good
    return st.one_of(good, good, good, good, good, good, good, ANY_JSON)


def object_of(doc: dict[str, Any], schema: dict[str, Any],
              valid: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties")
    if not props:
        if valid:
            return st.just({})
        return st.dictionaries(WEIRD_TEXT, st.one_of(WEIRD_TEXT, INTS, st.booleans()), max_size=3)
    required = set(schema.get("required", []))

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if valid:
                if name in required or name in ("value", "expected"):
                    out[name] = draw(from_schema(doc, sub, name, valid))
                continue
            wanted = name in required or name == "value" or draw(st.integers(0, 3)) > 0
            # ... and sometimes drop a required one
            if wanted and (name not in required or draw(st.integers(0, 9)) > 0):
                out[name] = draw(from_schema(doc, sub, name))
        if not valid and draw(st.integers(0, 5)) == 0:
            out[draw(WEIRD_TEXT)] = draw(ANY_JSON)  # an unknown field
        return out

    return build()


def param_value(param: dict[str, Any], method: str) -> st.SearchStrategy[str]:
    schema = param.get("schema", {})
    name = param["name"]
    if name == "topic":
        # fuzz-a stays (so produce and fetch reach a real partition); fuzz-b may come and go.
        topics = KNOWN_TOPICS[1:] if method == "delete" else KNOWN_TOPICS
        typed: st.SearchStrategy[Any] = st.sampled_from([*topics, "nope"])
    elif name == "key":
        typed = st.sampled_from(KNOWN_KEYS)
    elif "enum" in schema:
        typed = st.sampled_from(schema["enum"])
    elif schema.get("type") == "integer":
        typed = st.integers(0, 2) if name == "partition" else INTS
    else:
        typed = WEIRD_TEXT
    return st.one_of(typed.map(str), typed.map(str), typed.map(str), WEIRD_TEXT)


@st.composite
def request(draw: st.DrawFn, doc: dict[str, Any], node_ids: list[int]) -> dict[str, Any]:
    ops = sorted((path, method) for path, item in doc["paths"].items()
                 for method in item if method != "parameters" and (path, method) not in SKIPPED)
    path, method = draw(st.sampled_from(ops))
    item = doc["paths"][path]
    op = item[method]
    params = item.get("parameters", []) + op.get("parameters", [])
    values: dict[str, str] = {}
    url = path
    query: dict[str, str] = {}
    for p in params:
        if p["in"] == "path":
            value = draw(param_value(p, method))
            # "." and ".." are dot-segments: every URL parser removes them (RFC 3986 5.2.4), so
            # /kv/. is /kv/ by the time a router sees it; like "", they cannot name a resource.
            if value in ("", ".", ".."):
                value = "x"
            values[p["name"]] = value
            url = url.replace("{" + p["name"] + "}", urllib.parse.quote(value, safe=""))
        elif draw(st.integers(0, 2)) == 0:
            query[p["name"]] = draw(param_value(p, method))
    if draw(st.integers(0, 7)) == 0:
        query[draw(WEIRD_TEXT) or "x"] = draw(WEIRD_TEXT)
    if query:
        url += "?" + urllib.parse.urlencode(query)
    body: bytes | None = None
    if "requestBody" in op:
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        kind = draw(st.integers(0, 9))
        if kind >= 7:
            body = json.dumps(draw(object_of(doc, resolve(doc, schema), valid=True))).encode()
        elif kind == 0:
            body = draw(st.binary(max_size=20))
        elif kind == 1:
            body = json.dumps(draw(ANY_JSON)).encode()
        else:
            body = json.dumps(draw(object_of(doc, resolve(doc, schema)))).encode()
    return {"method": method.upper(), "url": url, "body": body, "node": draw(st.sampled_from(node_ids)),
            "values": values, "path": path}


# --- the property ----------------------------------------------------------------------------

def request_schema(doc: dict[str, Any], req: dict[str, Any]) -> dict[str, Any] | None:
    op = doc["paths"][req["path"]][req["method"].lower()]
    body = op.get("requestBody")
    return None if body is None else body["content"]["application/json"]["schema"]


def schema_violation(doc: dict[str, Any], schema: dict[str, Any], body: bytes) -> str | None:
    """None if `body` is JSON valid under `schema` (refs resolved against the document)."""
    try:
        value = json.loads(body)
    except ValueError:
        return "not JSON"
    validator = jsonschema.Draft202012Validator(
        {**schema, "components": doc["components"]})
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    return None if error is None else error.message

def snapshot(h: Http, req: dict[str, Any]) -> dict[str, Any]:
    def get(url: str) -> Any:
        status, body = h.send("GET", url, None)
        return status, body.decode(errors="replace")

    cluster_status, cluster_body = h.send("GET", "/cluster", None)
    cluster = json.loads(cluster_body) if cluster_status == 200 else cluster_status
    if isinstance(cluster, dict):
        cluster = sorted((b["id"], b["epoch"], b["fenced"], b["rack"]) for b in cluster["brokers"])
    snap = {"topics": get("/topics?format=text"), "cluster": cluster}
    values = req["values"]
    if "key" in values:
        snap["kv"] = get(f"/kv/{urllib.parse.quote(values['key'], safe='')}")
    if req["path"].endswith("/records") and values.get("partition", "").isdigit():
        status, body = h.send(
            "GET", f"/topics/{urllib.parse.quote(values['topic'], safe='')}/partitions/"
                   f"{values['partition']}/records?offset=0&max_records=1000", None)
        snap["records"] = (status, json.loads(body).get("high_watermark") if status == 200 else None)
    return snap


def test_admin_api_fuzz_from_its_openapi_document(fcluster: LiveCluster) -> None:
    cf = fcluster.file
    nodes = {n.id: Http(n.host, n.admin_port) for n in cf.nodes}
    controller = nodes[cf.controllers[0].id]
    status, body = controller.send("GET", "/openapi.json", None)
    assert status == 200
    doc = json.loads(body)
    for name in KNOWN_TOPICS[:1]:  # one existing topic, one the fuzzer may create
        created = controller.send("POST", "/topics", json.dumps(
            {"name": name, "partitions": 2, "replication_factor": 2}).encode())
        assert created[0] == 201, created
    assert controller.send("PUT", "/kv/k1", b'{"value": "v1"}')[0] == 200
    seen: dict[int, int] = {}
    by_op: dict[tuple[str, str, int], int] = {}
    failures: list[str] = []
    examples: dict[tuple[str, str, int], str] = {}

    @settings(max_examples=REQUESTS, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(req=request(doc, sorted(nodes)))
    def one(req: dict[str, Any]) -> None:
        h = nodes[req["node"]]
        mutating = req["method"] != "GET"
        before = snapshot(controller, req) if mutating else None
        status, body = h.send(req["method"], req["url"], req["body"])
        seen[status] = seen.get(status, 0) + 1
        by_op[(req['method'], req['path'], status)] = by_op.get((req['method'], req['path'], status), 0) + 1
        examples.setdefault((req['method'], req['path'], status), f"{req['url']} -> {body[:200]!r}")
        what = f"{req['method']} {req['url']} body={req['body']!r} -> {status} {body[:300]!r}"
        if status >= 500:
            error = json.loads(body).get("error") if body.startswith(b"{") else None
            if status == 500 or not allowed_5xx(req["method"], req["url"], error):
                failures.append(what)
        schema = request_schema(doc, req)
        if status < 300 and schema is not None and req["body"] is not None:
            # Accepted: then the body must satisfy the document's schema (a field the server
            # requires, a type it checks, a oneOf it enforces must all be in the document).
            problem = schema_violation(doc, schema, req["body"])
            if problem is not None:
                failures.append(f"accepted a body its schema rejects ({problem}): {what}")
        if before is not None and 400 <= status < 500:
            after = snapshot(controller, req)
            if after != before:
                failures.append(f"rejected request changed data: {what}\n{before}\n{after}")

    one()
    print("statuses", sorted(seen.items()))  # shown with -s: what the run exercised
    assert not failures, "\n".join(failures[:10])
    assert sum(seen.values()) >= REQUESTS
    assert seen.get(400, 0) > 100 and seen.get(200, 0) > 100, seen  # both sides were exercised
    undocumented = sorted((m, op, code) for (m, op, code) in by_op
                          if str(code) not in doc["paths"][op][m.lower()]["responses"])
    assert not undocumented, "answers the OpenAPI document does not list: " + "; ".join(
        f"{u}: {examples[u]}" for u in undocumented)
    accepted_writes = {op for (m, op, st_), n in by_op.items() if m != "GET" and st_ < 300}
    assert {"/topics", "/kv/{key}"} <= accepted_writes, by_op  # produce: leader-dependent
    for n in cf.nodes:
        assert cl.is_our_process(n.pid, n.config_file), f"node {n.id} died"
        assert nodes[n.id].send("GET", "/health", None)[0] == 200

"""`kraftlab config show` and the range checks behind `cluster up --config key=value`; and
`kraftlab config describe|alter --topic T` (kafka-configs.sh --entity-type topics: a live topic's
configs through the admin API, PATCH /topics/{topic}/configs = IncrementalAlterConfigs).

The defaults are NOT repeated here: node settings come from harness/runtime/config.py `TUNABLES`
(what the node process parses) and topic settings from quorum/metadata/configs.py
`TOPIC_CONFIG_DEFAULTS` (what the controller validates). This module only adds where each key is
read (controller / broker / topic) and the value ranges the node parser does not check (it checks
the syntax, ASCII `-?[0-9]+` within a 64-bit long, booleans, and log.retention.ms/hours only; a
negative timeout would start a cluster that never elects, found by hand).

Invariant: every key `config show` prints is accepted by exactly one of `cluster up --config`
(node keys) or `topic create --config` (topic keys); `check_overrides` names the other one when a
key is given to the wrong command.

Per-node overrides (`--config broker.101.rack=a`, `--config controller.1.KEY=VALUE`): ROLE.ID.KEY
where KEY is a node key (or `rack`, brokers only), checked exactly like a cluster-wide key, plus:
the node must exist in the layout being created and have that role, and a key read only by the
other role is refused (it would be silently ignored). `plan_overrides` turns the raw `--config`
items into (cluster-wide, per-node) before anything is written. `config show --node ID` prints a
node's effective config from the properties file it reads, saying where each value came from.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cli.common import add_data_dir, admin_request, data_dir_of, guarded
from harness.launcher import cluster as cl
from harness.runtime.config import (
    BOOLEAN_KEYS,
    TUNABLES,
    ConfigError,
    parse_properties,
    tunable_value,
    validate_overrides,
)
from quorum.metadata.configs import (
    FLUSH_MESSAGES,
    FLUSH_MS,
    LONG_MIN,
    MAX_MESSAGE_BYTES,
    RETENTION_BYTES,
    RETENTION_MS,
    SEGMENT_BYTES,
    SEGMENT_MS,
    TOPIC_CONFIG_DEFAULTS,
    validate_topic_config,
)

# Read only by the active controller (quorum/controller); the rest of `controller.*` and the
# kraftlab.raft/log/snapshot keys drive the Raft client, which brokers run too (as observers).
CONTROLLER_ONLY = frozenset({"leader.imbalance.check.interval.ms", "auto.leader.rebalance.enable",
                             "metadata.max.idle.interval.ms", "eligible.leader.replicas.enable",
                             "kraftlab.quorum.hw.linger.ms",
                             "kraftlab.quorum.liveness.interval.ms",
                             "kraftlab.quorum.liveness.timeout.ms"})
# Read only by brokers: the replica fetchers, controlled shutdown, and the data logs (`log.*`,
# message.max.bytes: the broker defaults of the topic log configs, harness/runtime/log_configs.py;
# controllers host no data logs; their metadata log is `kraftlab.log.*` / `kraftlab.snapshot.*`).
BROKER_ONLY_PREFIXES = ("replica.", "kraftlab.controlled.shutdown.", "log.", "offsets.", "group.")
BROKER_ONLY = frozenset({"message.max.bytes"})
# Broker setting -> the topic config it is the default of (Kafka's synonyms): its value must be
# one the topic config accepts, else the broker would refuse it at start (checked up front).
BROKER_SYNONYMS = {
    "log.segment.bytes": SEGMENT_BYTES,
    "log.roll.ms": SEGMENT_MS,
    "log.retention.ms": RETENTION_MS,
    "log.retention.bytes": RETENTION_BYTES,
    "log.flush.interval.messages": FLUSH_MESSAGES,
    "log.flush.interval.ms": FLUSH_MS,
    "message.max.bytes": MAX_MESSAGE_BYTES,
}
# Kafka: -1 is "unlimited" (no time limit on a partition's log). log.retention.bytes is not
# here: like the topic's retention.bytes it has no lower bound, any negative value is unlimited
# (Kafka's LogConfig; partition/log/log.py applies the size limit only when it is >= 0).
UNLIMITED_OK = frozenset({"log.retention.ms"})


def applies_to(key: str) -> str:
    if key in TOPIC_CONFIG_DEFAULTS:
        return "topic"
    if key in CONTROLLER_ONLY:
        return "controller"
    if key.startswith(BROKER_ONLY_PREFIXES) or key in BROKER_ONLY:
        return "broker"
    return "controller,broker"


def minimum(key: str) -> int:
    """Smallest accepted value of a node setting."""
    if key == "kraftlab.raft.seed":
        return -1  # -1: drawn from the OS
    if key in UNLIMITED_OK:
        return -1
    if key == "log.retention.bytes":
        return LONG_MIN  # any negative: unlimited (retention.bytes, as Kafka)
    if key == "log.flush.interval.messages":
        return 1  # Kafka: at least 1 (flush.messages); the default Long.MAX_VALUE means never
    if key.startswith("kraftlab.quorum.liveness."):
        return 0  # 0 turns the hung-leader probe off
    if key.endswith(".ms") and ("timeout" in key or "interval" in key):
        return 1  # a zero timeout or interval would spin or never elect
    if key == "kraftlab.snapshot.interval.records":
        return 1
    return 0


def check_launcher_key(key: str, value: str) -> None:
    if key == cl.BIND_HOST_KEY:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            raise ConfigError(f"{key} must be an IPv4 address, got {value!r}") from None
        if address.version != 4 or address.is_unspecified:
            raise ConfigError(f"{key} must be one IPv4 address (not 0.0.0.0), got {value!r}")


def check_overrides(overrides: dict[str, str]) -> None:
    """Raise ConfigError naming the key for an unknown key or a bad value (cluster up)."""
    overrides = dict(overrides)
    for key in [k for k in overrides if k in cl.LAUNCHER_KEYS]:
        check_launcher_key(key, overrides.pop(key))
    for key, value in overrides.items():
        if key in TOPIC_CONFIG_DEFAULTS:
            raise ConfigError(f"{key} is a topic config; set it per topic with "
                              f"`kraftlab topic create NAME ... --config {key}={value}` "
                              f"(a live topic: `kraftlab config alter --topic NAME "
                              f"--add-config {key}={value}`)")
    # Unknown keys, non-integers (ASCII-strict, 64-bit), booleans other than true/false/1/0 and
    # log.retention.ms/hours out of range: the node parser's own check and message.
    validate_overrides(overrides)
    for key, value in overrides.items():
        number = tunable_value(key, value)
        if number < minimum(key):
            hint = " (-1: unlimited)" if key in UNLIMITED_OK else ""
            if key == "log.flush.interval.messages":
                hint = (" (fsync after this many messages, Kafka's minimum is 1; the default "
                        f"{2**63 - 1} means never)")
            raise ConfigError(f"{key} must be >= {minimum(key)}{hint}, got {value!r}")
        synonym = BROKER_SYNONYMS.get(key)
        problem = None if synonym is None else validate_topic_config(synonym, str(number))
        if problem is not None:
            raise ConfigError(f"{key} is the broker default of topic config {synonym}: {problem}")


NODE_KEY = re.compile(r"^(controller|broker)\.([0-9]+)\.(.+)$")  # ASCII ids (\d: any digit)


@dataclass
class OverridePlan:
    """`cluster up --config` items sorted out: cluster-wide keys, and per node its properties."""

    cluster: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, dict[str, str]] = field(default_factory=dict)


def plan_overrides(overrides: dict[str, str], layout: list[tuple[int, str]]) -> OverridePlan:
    """Split and validate overrides against the layout (node id, role) being created."""
    plan = OverridePlan()
    roles = dict(layout)
    for key, value in overrides.items():
        match = NODE_KEY.match(key)
        if match is None:
            plan.cluster[key] = value
            continue
        role, node_id, name = match.group(1), int(match.group(2)), match.group(3)
        if node_id not in roles:
            same = [i for i, r in layout if r == role]
            raise ConfigError(f"{key}: no {role} {node_id} in this cluster; {role}s are "
                              f"{same or 'none'}")
        if roles[node_id] != role:
            raise ConfigError(f"{key}: node {node_id} is a {roles[node_id]}, not a {role} "
                              f"(use {roles[node_id]}.{node_id}.{name}=...)")
        prop = _node_property(key, role, name, value)
        plan.nodes.setdefault(node_id, {})[prop] = value
    check_overrides(plan.cluster)
    return plan


def _node_property(key: str, role: str, name: str, value: str) -> str:
    """The properties key a per-node override sets; ConfigError if not valid for `role`."""
    if name in ("rack", "broker.rack"):
        if role != "broker":
            raise ConfigError(f"{key}: only brokers have a rack (broker.rack)")
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", value):
            raise ConfigError(f"{key}: a rack is 1-64 characters of [A-Za-z0-9._-], "
                              f"got {value!r}")
        return "broker.rack"
    if name in cl.LAUNCHER_KEYS:
        raise ConfigError(f"{key}: {name} is cluster-wide; set it as --config {name}=...")
    if name not in TUNABLES:
        raise ConfigError(f"{key}: unknown config {name!r}; per-node keys are rack (brokers) "
                          f"and the node keys of `kraftlab config show`")
    where = applies_to(name)
    if role not in where.split(","):
        raise ConfigError(f"{key}: {name} is read by {where} nodes only; a {role} would "
                          f"ignore it")
    try:
        check_overrides({name: value})
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return name


def rows() -> list[tuple[str, str, str]]:
    out = [(key, str(default), applies_to(key)) for key, (_, default) in TUNABLES.items()]
    out += [(key, default, "launcher") for key, default in cl.LAUNCHER_KEYS.items()]
    for key, default in TOPIC_CONFIG_DEFAULTS.items():
        assert validate_topic_config(key, default) is None, key
        out.append((key, default, "topic"))
    return sorted(out, key=lambda r: (r[2] == "topic", r[0]))


def _shown(key: str, value: str) -> str:
    if key in BOOLEAN_KEYS and value in ("0", "1"):
        return "true" if value == "1" else "false"
    return value


def show_node(cluster: cl.ClusterFile, node_id: int) -> int:
    """A node's effective config: its properties file (what the node reads at start), with
    where each value came from: default, cluster (cluster-wide --config), node (its own
    --config ROLE.ID.KEY) or layout (ids, listeners, paths written by `cluster up`)."""
    node = cluster.node(node_id)
    props = parse_properties(Path(node.config_file).read_text())
    defaults = {key: str(default) for key, (_, default) in TUNABLES.items()}
    print(f"effective config of {node.role} {node.id} ({node.config_file})")
    width = max(len(k) for k in props)
    print(f"{'Key':<{width}}  {'Value':<24}  Source")
    for key, value in props.items():
        if key in node.overrides:
            source = "node"
        elif key in cluster.overrides:
            source = "cluster"
        elif key in defaults:
            source = "default" if defaults[key] == value else "file"  # edited by hand
        else:
            source = "layout"
        print(f"{key:<{width}}  {_shown(key, value):<24}  {source}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    explicit = args.data_dir or os.environ.get("KRAFTLAB_DATA_DIR")
    if args.node is not None or explicit:
        cluster = cl.ClusterFile.load(data_dir_of(args))
        if args.node is not None:
            return show_node(cluster, args.node)
    else:
        cluster = None
    table = rows()
    width = max(len(k) for k, _, _ in table)
    header = f"{'Key':<{width}}  {'Default':<12}  {'AppliesTo':<17}"
    print((header + ("  ClusterOverride" if cluster is not None else "")).rstrip())
    for key, default, where in table:
        line = f"{key:<{width}}  {_shown(key, default):<12}  {where:<17}"
        if cluster is not None and key in cluster.overrides:
            line += f"  {_shown(key, cluster.overrides[key])}"
        print(line.rstrip())
    if cluster is not None:
        print(f"\ncluster {cluster.cluster_id}: per-node overrides")
        for node in cluster.nodes:
            if node.overrides:
                items = ", ".join(f"{k}={v}" for k, v in sorted(node.overrides.items()))
                print(f"  {node.role} {node.id}: {items}")
        print("(a node's effective config: kraftlab config show --node ID)")
    print("\nnode keys: kraftlab cluster up --config KEY=VALUE (one node: "
          "--config broker.ID.KEY=VALUE / controller.ID.KEY=VALUE, broker.ID.rack=RACK); "
          "topic keys: kraftlab topic create NAME ... --config KEY=VALUE, on a live topic: "
          "kraftlab config alter --topic NAME --add-config KEY=VALUE")
    return 0


# --- topic configs: kafka-configs.sh --entity-type topics --describe | --alter ----------------


def split_config_list(text: str) -> list[str]:
    """kafka-configs.sh's list syntax: comma-separated items; `[a,b]` keeps a comma in a value."""
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def parse_add_config(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (i for v in values or [] for i in split_config_list(v)):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--add-config expects k=v[,k=v], got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        if key.strip() in out:
            raise ConfigError(f"--add-config names {key.strip()} twice")
        out[key.strip()] = value
    return out


def _topic_configs_path(topic: str) -> str:
    from urllib.parse import quote

    return f"/topics/{quote(topic, safe='')}/configs"


def _error_text(status: int, data: Any) -> str:
    if isinstance(data, dict) and "error" in data:
        config = f" (config {data['config']})" if "config" in data else ""
        return f"{data['error']}{config}: {data.get('message', '')}"
    return f"HTTP {status}: {data}"


def cmd_alter(args: argparse.Namespace) -> int:
    """kafka-configs.sh --alter --entity-type topics --entity-name T --add-config k=v
    --delete-config k: one IncrementalAlterConfigs, applied all or nothing."""
    to_set = parse_add_config(args.add_config)
    to_delete = [k for v in args.delete_config or [] for k in split_config_list(v)]
    if not to_set and not to_delete:
        raise ConfigError("give --add-config k=v[,k=v] and/or --delete-config k[,k]")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise ConfigError(f"{', '.join(both)} given to both --add-config and --delete-config")
    body: dict[str, Any] = {}
    if to_set:
        body["set"] = to_set
    if to_delete:
        body["delete"] = to_delete
    status, data = admin_request(args, "PATCH", _topic_configs_path(args.topic), body)
    if status != 200:
        print(f"error: {_error_text(status, data)}", file=sys.stderr)
        return 1
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """kafka-configs.sh --describe --entity-type topics --entity-name T [--all]."""
    status, data = admin_request(args, "GET", _topic_configs_path(args.topic))
    if status != 200:
        print(f"error: {_error_text(status, data)}", file=sys.stderr)
        return 1
    entries = [e for e in data["configs"] if args.all or not e["is_default"]]
    print(f"{'All' if args.all else 'Dynamic'} configs for topic {args.topic} are:")
    for e in entries:
        kv = f"{e['name']}={e['value']}"
        print(f"  {kv} sensitive=false synonyms={{{e['source']}:{kv}}}")
    return 0


def _register_topic_configs(verbs: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--topic", "--entity-name", dest="topic", required=True,
                        help="the topic (kafka-configs.sh --entity-type topics --entity-name)")
    common.add_argument("--entity-type", choices=["topics"], default="topics",
                        help="kafka-configs.sh's entity type; only topics are served here "
                             "(broker settings: `cluster up --config`, `config show`)")
    add_data_dir(common)
    common.add_argument("--node", type=int, help="node to ask (default: any, retried over all)")
    common.add_argument("--timeout", type=float, default=15.0,
                        help="seconds to keep retrying while no controller answers (default 15)")
    alter = verbs.add_parser(
        "alter", parents=[common],
        help="change a live topic's configs, like kafka-configs.sh --alter (all or nothing)")
    alter.add_argument("--add-config", action="append", metavar="K=V[,K=V]",
                       help="set these topic configs (a value with commas: k=[a,b])")
    alter.add_argument("--delete-config", action="append", metavar="K[,K]",
                       help="remove these overrides (back to the broker/Kafka default)")
    alter.set_defaults(handler=guarded(cmd_alter))
    describe = verbs.add_parser(
        "describe", parents=[common],
        help="a topic's overrides (--all: every config), like kafka-configs.sh --describe")
    describe.add_argument("--all", action="store_true", help="also the defaults")
    describe.set_defaults(handler=guarded(cmd_describe))


def register(sub: Any) -> None:
    parser = sub.add_parser("config", help="known configuration keys and their defaults; "
                                           "describe and alter a topic's configs")
    verbs = parser.add_subparsers(dest="config_command", metavar="VERB")
    verbs.required = True
    show = verbs.add_parser("show", help="every known key, its Kafka-named default and where "
                                         "it applies (controller/broker/topic)")
    show.add_argument("--data-dir", help="also show this cluster's overrides (also shown "
                      "when $KRAFTLAB_DATA_DIR is set; --node: default ./kraftlab-data)")
    show.add_argument("--node", type=int, default=None,
                      help="print this node's effective config and where each value came from")
    show.set_defaults(handler=guarded(cmd_show))
    _register_topic_configs(verbs)


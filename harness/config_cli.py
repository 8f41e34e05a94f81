"""`kraftlab config show` and the range checks behind `cluster up --config key=value`.

The defaults are NOT repeated here: node settings come from harness/node/config.py `TUNABLES`
(what the node process parses) and topic settings from quorum/metadata/configs.py
`TOPIC_CONFIG_DEFAULTS` (what the controller validates). This module only adds where each key is
read (controller / broker / topic) and the value ranges the node parser does not check (it accepts
any integer; a negative timeout would start a cluster that never elects, found by hand).

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

from harness import cluster as cl
from harness.node.config import (
    TUNABLES,
    ConfigError,
    parse_properties,
    tunable_value,
    validate_overrides,
)
from quorum.metadata.configs import TOPIC_CONFIG_DEFAULTS, validate_topic_config

# Settings that are flags (Kafka booleans; the node parser stores them as 0/1).
BOOLEAN_KEYS = frozenset({"auto.leader.rebalance.enable", "kraftlab.log.fsync",
                          "kraftlab.admin.require.token"})
# Read only by the active controller (quorum/controller); the rest of `controller.*` and the
# kraftlab.raft/log/snapshot keys drive the Raft client, which brokers run too (as observers).
CONTROLLER_ONLY = frozenset({"leader.imbalance.check.interval.ms", "auto.leader.rebalance.enable",
                             "metadata.max.idle.interval.ms"})
BROKER_ONLY_PREFIXES = ("replica.", "kraftlab.controlled.shutdown.")


def applies_to(key: str) -> str:
    if key in TOPIC_CONFIG_DEFAULTS:
        return "topic"
    if key in CONTROLLER_ONLY:
        return "controller"
    if key.startswith(BROKER_ONLY_PREFIXES):
        return "broker"
    return "controller,broker"


def minimum(key: str) -> int:
    """Smallest accepted value of a node setting."""
    if key == "kraftlab.raft.seed":
        return -1  # -1: drawn from the OS
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
                              f"`kraftlab topic create NAME ... --config {key}={value}`")
    validate_overrides(overrides)  # unknown keys and non-integers: the node parser's own check
    for key, value in overrides.items():
        if key not in BOOLEAN_KEYS and value.strip().lower() in ("true", "false"):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        number = tunable_value(key, value)
        if key in BOOLEAN_KEYS and number not in (0, 1):
            raise ConfigError(f"{key} must be true or false (or 1/0), got {value!r}")
        if number < minimum(key):
            raise ConfigError(f"{key} must be >= {minimum(key)}, got {value!r}")


NODE_KEY = re.compile(r"^(controller|broker)\.(\d+)\.(.+)$")


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
        data_dir = Path(args.data_dir) if args.data_dir else cl.default_data_dir()
        cluster = cl.ClusterFile.load(data_dir)
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
          "topic keys: kraftlab topic create NAME ... --config KEY=VALUE")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("config", help="known configuration keys and their defaults")
    verbs = parser.add_subparsers(dest="config_command", metavar="VERB")
    verbs.required = True
    show = verbs.add_parser("show", help="every known key, its Kafka-named default and where "
                                         "it applies (controller/broker/topic)")
    show.add_argument("--data-dir", help="also show this cluster's overrides (also shown "
                      "when $KRAFTLAB_DATA_DIR is set; --node: default ./kraftlab-data)")
    show.add_argument("--node", type=int, default=None,
                      help="print this node's effective config and where each value came from")
    show.set_defaults(handler=guarded(cmd_show))


def guarded(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (cl.ClusterError, ConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run

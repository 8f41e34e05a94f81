"""`kraftlab config show` and the range checks behind `cluster up --config key=value`.

The defaults are NOT repeated here: node settings come from harness/node/config.py `TUNABLES`
(what the node process parses) and topic settings from quorum/metadata/configs.py
`TOPIC_CONFIG_DEFAULTS` (what the controller validates). This module only adds where each key is
read (controller / broker / topic) and the value ranges the node parser does not check (it accepts
any integer; a negative timeout would start a cluster that never elects, found by hand).

Invariant: every key `config show` prints is accepted by exactly one of `cluster up --config`
(node keys) or `topic create --config` (topic keys); `check_overrides` names the other one when a
key is given to the wrong command.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness.node.config import TUNABLES, ConfigError, tunable_value, validate_overrides
from quorum.metadata.configs import TOPIC_CONFIG_DEFAULTS, validate_topic_config

# Settings that are flags (Kafka booleans; the node parser stores them as 0/1).
BOOLEAN_KEYS = frozenset({"auto.leader.rebalance.enable", "kraftlab.log.fsync"})
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


def check_overrides(overrides: dict[str, str]) -> None:
    """Raise ConfigError naming the key for an unknown key or a bad value (cluster up)."""
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


def rows() -> list[tuple[str, str, str]]:
    out = [(key, str(default), applies_to(key)) for key, (_, default) in TUNABLES.items()]
    for key, default in TOPIC_CONFIG_DEFAULTS.items():
        assert validate_topic_config(key, default) is None, key
        out.append((key, default, "topic"))
    return sorted(out, key=lambda r: (r[2] == "topic", r[0]))


def cmd_show(args: argparse.Namespace) -> int:
    table = rows()
    width = max(len(k) for k, _, _ in table)
    print(f"{'Key':<{width}}  {'Default':<12}  AppliesTo")
    for key, default, where in table:
        if key in BOOLEAN_KEYS:
            default = "true" if default == "1" else "false"
        print(f"{key:<{width}}  {default:<12}  {where}")
    print("\nnode keys: kraftlab cluster up --config KEY=VALUE; "
          "topic keys: kraftlab topic create NAME ... --config KEY=VALUE")
    return 0


def register(sub: Any) -> None:
    parser = sub.add_parser("config", help="known configuration keys and their defaults")
    verbs = parser.add_subparsers(dest="config_command", metavar="VERB")
    verbs.required = True
    show = verbs.add_parser("show", help="every known key, its Kafka-named default and where "
                                         "it applies (controller/broker/topic)")
    show.set_defaults(handler=cmd_show)

"""The one command that replays a scenario run, and the run it names.

`replay_command(config)` is the `kraftlab sim matrix` invocation that runs exactly this
configuration and seed (every option the run key depends on), writing its history and replica
timeline (`--histories --timeline`); it goes into the run's summary row. `config_from_replay`
reads such a command back into the ScenarioConfig, without the CLI (the Spark report replays a
loss on its driver to draw its timeline; harness/cli/sim_matrix.py parses the same options).

Invariant: config_from_replay(replay_command(c)) == c for every config the matrix builds.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from harness.sim.runs.cluster import DataTiming
from harness.sim.runs.scenario_run import ScenarioConfig

PREFIX = "kraftlab sim matrix"
_BOOLS = {"true": True, "false": False}


class ReplayError(ValueError):
    """A command that is not a replay command (says which option)."""


def replay_command(config: ScenarioConfig) -> str:
    c = config
    parts = [
        f"{PREFIX} --out replay", f"--modes {c.replication_mode}", f"--acks {c.acks}",
        f"--min-isr {c.min_insync_replicas}",
        f"--unclean {str(c.unclean_leader_election).lower()}",
        f"--elr {str(c.eligible_leader_replicas).lower()}", f"--rf {c.replication_factor}",
        f"--leader-epoch {str(c.leader_epoch_enable).lower()}", f"--nemeses {c.nemesis}",
        f"--durations {c.fault_duration_ms / 1000:g}", f"--first-seed {c.seed} --seeds 1",
        f"--jitter-ms {c.start_jitter_ms}", f"--metadata {c.metadata}",
    ]
    if c.flush_policy:
        parts.append(f"--flush-policy {c.flush_policy}")
    if c.producer != "simple":
        parts.append(f"--producer {c.producer}")
    if c.probe_interval_ms:
        parts.append(f"--probe-ms {c.probe_interval_ms}")
    if c.raft_election_timeout_ms:
        parts.append(f"--election-ms {c.raft_election_timeout_ms}")
    parts += [f"--lag-ms {c.timing.replica_lag_time_max_ms}",
              f"--session-ms {c.timing.session_timeout_ms}", "--histories --timeline"]
    return " ".join(parts)


_FIELDS: dict[str, tuple[str, Any]] = {
    "--modes": ("replication_mode", str), "--acks": ("acks", str),
    "--min-isr": ("min_insync_replicas", int), "--unclean": ("unclean_leader_election", _BOOLS),
    "--elr": ("eligible_leader_replicas", _BOOLS), "--rf": ("replication_factor", int),
    "--leader-epoch": ("leader_epoch_enable", _BOOLS), "--nemeses": ("nemesis", str),
    "--durations": ("fault_duration_ms", lambda v: int(float(v) * 1000)),
    "--first-seed": ("seed", int), "--jitter-ms": ("start_jitter_ms", int),
    "--metadata": ("metadata", str), "--flush-policy": ("flush_policy", str),
    "--producer": ("producer", str), "--probe-ms": ("probe_interval_ms", int),
    "--election-ms": ("raft_election_timeout_ms", int),
}
_TIMING = {"--lag-ms": "replica_lag_time_max_ms", "--session-ms": "session_timeout_ms"}
_IGNORED = {"--out": 1, "--seeds": 1, "--histories": 0, "--timeline": 0}


def config_from_replay(command: str) -> ScenarioConfig:
    """The run `command` (a replay_command) names; ReplayError if it is not one."""
    if not command.startswith(PREFIX):
        raise ReplayError(f"not a `{PREFIX}` command: {command!r}")
    words = shlex.split(command[len(PREFIX):])
    values: dict[str, Any] = {}
    timing: dict[str, int] = {}
    i = 0
    while i < len(words):
        option = words[i]
        if option in _IGNORED:
            i += 1 + _IGNORED[option]
            continue
        if i + 1 >= len(words):
            raise ReplayError(f"{option} without a value")
        raw = words[i + 1]
        i += 2
        if option in _TIMING:
            timing[_TIMING[option]] = int(raw)
        elif option in _FIELDS:
            name, convert = _FIELDS[option]
            try:
                values[name] = convert[raw] if isinstance(convert, dict) else convert(raw)
            except (KeyError, ValueError):
                raise ReplayError(f"{option} {raw!r}") from None
        else:
            raise ReplayError(f"unknown option {option}")
    config = replace(ScenarioConfig(), **values)
    if values.get("nemesis") == "none":
        config = replace(config, fault_duration_ms=0)
    return replace(config, timing=replace(DataTiming(), **timing))

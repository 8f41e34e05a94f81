"""The study's matrix (docs/compare.md): what `kraftlab compare` runs by default, and the larger
preset for a Spark cluster.

Two parts, concatenated and deduplicated by run key:
- the arms (STUDY_SETTINGS: replication mode, acks, min.insync.replicas, unclean election, ELR,
  leader epochs, flush policy) under every nemesis of the one table (harness.sim.faults.shapes
  SCENARIO_NEMESES), 5 s faults, `seeds` seeds, the Kafka-like producer and the 10 ms open-loop
  probe (harness.sim.actors.kafka_producer): the equal-safety verdicts, the trade-offs and the
  reference scenarios;
- the trade-off curves (CURVES): the equal-safety arms under a few faults while one setting
  moves: replica.lag.time.max.ms, broker.session.timeout.ms, the fault's duration (0.5 to 30 s),
  the replication factor with min.insync.replicas (RF 3 vs 5, min ISR 2 vs 3), with
  `curve_seeds` seeds.

Arms of a replication mode the simulator does not run (matrix.MODES) are left out, so adding a
mode there adds its arms here. Every run of one seed shares its fault schedule and client
timings with the other arms' runs of that seed (the pairing of harness/spark/paired.py).

Sizes (default 8 and 5 seeds, isr and quorum): 11 settings x 22 nemesis cells x 8 = 1,936 runs,
plus the curves' new runs: docs/compare.md has the counts and the measured time on 2 cores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.sim.faults.shapes import SCENARIO_NEMESES
from harness.sim.runs.matrix import MODES, MatrixSpec, run_configs
from harness.sim.runs.scenario_run import ScenarioConfig

PROBE_MS = 10
STUDY_SEEDS = 8
CURVE_SEEDS = 5
# (mode, acks, min.insync.replicas, unclean, ELR, leader.epoch.enable, flush policy), each for a
# verdict (harness/spark/arms.py names the arms; conclude.py the reference claims).
STUDY_SETTINGS: tuple[tuple[Any, ...], ...] = (
    ("isr", "all", 2, False, False, True, "page-cache"),  # equal safety: Kafka's default
    ("isr", "all", 2, False, True, True, "page-cache"),  # equal safety: with ELR (KIP-966)
    ("isr", "all", 2, False, False, True, "flush-every-message"),  # the cost of an fsync
    ("quorum", "all", 2, False, False, True, "fsync-before-ack"),  # equal safety
    ("quorum", "all", 2, False, False, True, "no-fsync"),  # the unsafe variant
    ("raft", "all", 2, False, False, True, "fsync-before-ack"),  # equal safety (when run)
    ("isr", "all", 1, False, False, True, "page-cache"),  # trade-off: one in-sync copy
    ("isr", "all", 1, True, False, True, "page-cache"),  # trade-off: unclean election
    ("isr", "all", 1, True, False, False, "page-cache"),  # pre-KIP-101 truncation
    ("isr", "all", 2, True, False, True, "page-cache"),  # unclean against ELR (2.7)
    ("isr", "1", 1, False, False, True, "page-cache"),  # zombie leader with acks=1 (2.4)
    ("isr", "1", 2, False, False, True, "page-cache"),  # strict min ISR with acks=1 (2.12)
)
EQUAL_SAFETY_SETTINGS = tuple(s for s in STUDY_SETTINGS[:6] if s[6] != "no-fsync"
                              and s[6] != "flush-every-message")


@dataclass(frozen=True, slots=True)
class Curve:
    """One trade-off curve: the spec's changes from the curve base, and its nemeses."""

    name: str
    nemeses: tuple[str, ...]
    changes: dict[str, Any]


CURVES: tuple[Curve, ...] = (
    Curve("replica.lag.time.max.ms", ("follower-gc-pauses", "isolate-partition-leader"),
          {"lag_ms": (1000, 2000, 4000, 8000)}),
    Curve("broker.session.timeout.ms", ("kill-leader", "follower-gc-pauses"),
          {"session_ms": (500, 1000, 2000, 4000)}),
    Curve("fault duration", ("isolate-partition-leader", "kill-leader"),
          {"durations_ms": (500, 1000, 2000, 5000, 10_000, 30_000)}),
    Curve("replication factor and min.insync.replicas",
          ("kill-leader", "kill-2-of-3", "isolate-partition-leader"),
          {"rf": (3, 5), "settings": (
              ("isr", "all", 2, False, False, True, "page-cache"),
              ("isr", "all", 3, False, False, True, "page-cache"),
              *(s for s in EQUAL_SAFETY_SETTINGS if s[0] != "isr"))}),
)


def _runnable(settings: Iterable[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(s for s in settings if s[0] in MODES)


def arms_spec(seeds: int = STUDY_SEEDS, metadata: str = "raft",
              nemeses: Sequence[str] = SCENARIO_NEMESES) -> MatrixSpec:
    return MatrixSpec(rf=(3,), nemeses=tuple(nemeses), durations_ms=(5000,), seeds=seeds,
                      settings=_runnable(STUDY_SETTINGS), metadata=metadata, producer="kafka",
                      probe_interval_ms=PROBE_MS)


def curve_specs(seeds: int = CURVE_SEEDS, metadata: str = "raft") -> list[MatrixSpec]:
    base = replace(arms_spec(seeds, metadata), settings=_runnable(EQUAL_SAFETY_SETTINGS))
    specs = []
    for curve in CURVES:
        changes = dict(curve.changes)
        if "settings" in changes:
            changes["settings"] = _runnable(changes["settings"])
        specs.append(replace(base, nemeses=curve.nemeses, **changes))
    return specs


def unique(configs: Iterable[ScenarioConfig]) -> list[ScenarioConfig]:
    """Configs in order, each run key once (the curves meet the arms at their defaults)."""
    seen: set[str] = set()
    out = []
    for c in configs:
        if c.key() not in seen:
            seen.add(c.key())
            out.append(c)
    return out


def study_configs(seeds: int = STUDY_SEEDS, curve_seeds: int = CURVE_SEEDS,
                  metadata: str = "raft") -> list[ScenarioConfig]:
    """Every run of the default study: the arms, then the curves."""
    configs = arms_spec(seeds, metadata).configs()
    for spec in curve_specs(curve_seeds, metadata):
        configs += spec.configs()
    return unique(configs)


def large_study_configs(seeds: int = 20, metadata: str = "raft") -> list[ScenarioConfig]:
    """The larger preset (a Spark cluster): every arm under every nemesis at faults of 1, 5 and
    30 s with RF 3 and 5, and the curves, all with `seeds` seeds."""
    arms = replace(arms_spec(seeds, metadata), durations_ms=(1000, 5000, 30_000), rf=(3, 5))
    configs = arms.configs()
    for spec in curve_specs(seeds, metadata):
        configs += spec.configs()
    return unique(configs)


def run_study(out: Any, seeds: int | None = None, jobs: int | None = None,
              metadata: str = "raft") -> tuple[Any, float]:
    """The default study (what `kraftlab compare` runs) written to `out`: (parquet path, wall
    seconds)."""
    seeds = seeds or STUDY_SEEDS
    return run_configs(study_configs(seeds, min(seeds, CURVE_SEEDS), metadata), out, jobs)

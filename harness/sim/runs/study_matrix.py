"""The study's matrix (docs/compare.md): what `kraftlab compare` runs by default, and the larger
preset for a Spark cluster.

Two parts, concatenated and deduplicated by run key:
- the arms (ARM_FAULTS: replication mode, acks, min.insync.replicas, unclean election, ELR,
  leader epochs, flush policy): the equal-safety arms under every nemesis of the one table
  (harness.sim.faults.shapes SCENARIO_NEMESES), the variants and trade-offs under the faults
  that show what they trade; 5 s faults, `seeds` seeds, the Kafka-like producer and the 10 ms
  open-loop probe (harness.sim.actors.kafka_producer);
- the trade-off curves (CURVES): the equal-safety arms under a few faults while one setting
  moves: replica.lag.time.max.ms, broker.session.timeout.ms, the fault's duration (0.5 to 30 s),
  the replication factor with min.insync.replicas (RF 3 vs 5, min ISR 2 vs 3), and the raft
  partitions' election timeout (raft only: the other arms elect through the controller), with
  `curve_seeds` seeds.

Arms of a replication mode the simulator does not run (matrix.MODES) are left out, so adding a
mode there adds its arms here. Every run of one seed shares its fault schedule and client
timings with the other arms' runs of that seed (the pairing of harness/spark/paired.py).

Sizes: docs/compare.md has the run counts and the measured time on 2 cores.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from harness.sim.faults.shapes import SCENARIO_NEMESES
from harness.sim.runs.matrix import MODES, MatrixSpec
from harness.sim.runs.scenario_run import ScenarioConfig

PROBE_MS = 10
STUDY_SEEDS = 8
CURVE_SEEDS = 4
RAFT_ELECTION_MS = (50, 100, 250, 500, 1000)  # the drawn default is one of 100, 150, 250
ALL = SCENARIO_NEMESES
# (mode, acks, min.insync.replicas, unclean, ELR, leader.epoch.enable, flush policy).
ISR_MIN2 = ("isr", "all", 2, False, False, True, "page-cache")
ISR_MIN2_ELR = ("isr", "all", 2, False, True, True, "page-cache")
QUORUM = ("quorum", "all", 2, False, False, True, "fsync-before-ack")
RAFT = ("raft", "all", 2, False, False, True, "fsync-before-ack")
EQUAL_SAFETY_SETTINGS = (ISR_MIN2, ISR_MIN2_ELR, QUORUM, RAFT)
# Each arm with the faults its verdicts need (harness/spark/arms.py names the arms,
# conclude.py and reference.py the claims): the equal-safety arms under every fault; the
# variants and trade-offs under the faults that show what they trade. The larger preset runs
# every arm under every fault.
ARM_FAULTS: tuple[tuple[tuple[Any, ...], tuple[str, ...]], ...] = (
    *((s, ALL) for s in EQUAL_SAFETY_SETTINGS),
    # The cost of durability: latency without a fault, loss under power loss.
    (("isr", "all", 2, False, False, True, "flush-every-message"),
     ("none", "kill-leader", "power-loss-all-brokers", "unclean-crash-losing-unflushed-tail",
      "staggered-isr-drop-then-leader-crash")),
    (("quorum", "all", 2, False, False, True, "no-fsync"),
     ("none", "kill-leader", "power-loss-all-brokers", "unclean-crash-losing-unflushed-tail")),
    # One in-sync copy (reference 2.6), unclean election (2.5), pre-KIP-101 truncation (2.1,
    # 2.2), unclean against ELR (2.7), acks=1 (2.4, 2.12).
    (("isr", "all", 1, False, False, True, "page-cache"),
     ("isolate-partition-leader", "cut-followers-then-kill-leader", "kill-2-of-3",
      "unclean-crash-losing-unflushed-tail", "leader-cut-from-followers-only", "random-halves",
      "bridge")),
    (("isr", "all", 1, True, False, True, "page-cache"),
     ("isolate-partition-leader", "cut-followers-then-kill-leader", "kill-2-of-3",
      "unclean-crash-losing-unflushed-tail", "random-halves", "bridge")),
    (("isr", "all", 1, True, False, False, "page-cache"),
     ("isolate-partition-leader", "cut-followers-then-kill-leader", "random-halves", "bridge")),
    (("isr", "all", 2, True, False, True, "page-cache"),
     ("cut-followers-then-kill-leader", "isolate-partition-leader",
      "unclean-crash-losing-unflushed-tail", "staggered-isr-drop-then-leader-crash")),
    (("isr", "1", 1, False, False, True, "page-cache"),
     ("zombie-leader", "kill-leader", "leader-cut-from-followers-only")),
    (("isr", "1", 2, False, False, True, "page-cache"),
     ("zombie-leader", "leader-cut-from-followers-only")),
)
STUDY_SETTINGS = tuple(setting for setting, _ in ARM_FAULTS)


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
    # Raft partitions elect among their replicas: a short timeout replaces a dead leader
    # sooner and re-elects on every short cut (flapping); a long one rides short cuts out.
    Curve("raft election timeout", ("kill-leader", "flapping", "pause-leader"),
          {"election_ms": RAFT_ELECTION_MS, "settings": (RAFT,)}),
)


def _runnable(settings: Iterable[tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    return tuple(s for s in settings if s[0] in MODES)


def arms_specs(seeds: int = STUDY_SEEDS, metadata: str = "raft",
               every_fault: bool = False) -> list[MatrixSpec]:
    """One spec per arm (of a mode the simulator runs) with its faults (all with
    `every_fault`)."""
    return [MatrixSpec(rf=(3,), nemeses=ALL if every_fault else faults, durations_ms=(5000,),
                       seeds=seeds, settings=(setting,), metadata=metadata, producer="kafka",
                       probe_interval_ms=PROBE_MS)
            for setting, faults in ARM_FAULTS if setting[0] in MODES]


def curve_specs(seeds: int = CURVE_SEEDS, metadata: str = "raft") -> list[MatrixSpec]:
    base = MatrixSpec(rf=(3,), durations_ms=(5000,), seeds=seeds, metadata=metadata,
                      settings=_runnable(EQUAL_SAFETY_SETTINGS[:1] + EQUAL_SAFETY_SETTINGS[2:]),
                      producer="kafka", probe_interval_ms=PROBE_MS)
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
    configs = [c for spec in arms_specs(seeds, metadata) for c in spec.configs()]
    for spec in curve_specs(curve_seeds, metadata):
        configs += spec.configs()
    return unique(configs)


def large_study_configs(seeds: int = 20, metadata: str = "raft") -> list[ScenarioConfig]:
    """The larger preset (a Spark cluster): every arm under every nemesis at faults of 1, 5 and
    30 s with RF 3 and 5, and the curves, all with `seeds` seeds."""
    configs = [c for spec in arms_specs(seeds, metadata, every_fault=True)
               for c in replace(spec, durations_ms=(1000, 5000, 30_000), rf=(3, 5)).configs()]
    for spec in curve_specs(seeds, metadata):
        configs += spec.configs()
    return unique(configs)


@dataclass(frozen=True, slots=True)
class StudySpec:
    """A preset of `kraftlab compare` (harness/study/presets.py) over the study: `configs()` as
    a MatrixSpec's. `nemeses` (None: each arm's own faults) replaces every arm's faults and
    drops the curves' other faults; `large` is the larger preset."""

    seeds: int = STUDY_SEEDS
    curve_seeds: int = CURVE_SEEDS
    metadata: str = "raft"
    nemeses: tuple[str, ...] | None = None
    curves: bool = True
    large: bool = False

    def configs(self) -> list[ScenarioConfig]:
        if self.large:
            configs = large_study_configs(self.seeds, self.metadata)
        else:
            configs = [c for spec in arms_specs(self.seeds, self.metadata)
                       for c in (replace(spec, nemeses=self.nemeses) if self.nemeses
                                 else spec).configs()]
            if self.curves:
                for spec in curve_specs(min(self.seeds, self.curve_seeds), self.metadata):
                    configs += spec.configs()
        if self.nemeses:
            configs = [c for c in configs if c.nemesis in self.nemeses]
        return unique(configs)

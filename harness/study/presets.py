"""Named scenario matrices for `kraftlab compare --preset NAME` (docs/compare.md).

- `default`: the study (harness/sim/runs/study_matrix.py StudySpec): the equal-safety arms (ISR
  with min.insync.replicas=2, with and without ELR; quorum; Raft) under every nemesis, the
  durability variants and trade-offs under the faults their verdicts need, 5 s faults, 8 seeds,
  Kafka-like producers and the 10 ms probe, and the trade-off curves (4 seeds).
- `tiny`: the study's arms under two faults held 5 s (the live queue runs' fault, `kill-leader`,
  and `isolate-partition-leader`), 3 seeds, no curves: an end-to-end check in a few minutes.
- `large`: the study's larger preset, for a cluster: every arm under every nemesis at faults of
  1, 5 and 30 s, RF 3 and 5, and the curves, 20 seeds.
- `matrix`: the matrix before the study (harness/sim/runs/matrix.py `default_spec`: the main
  settings of every mode, every nemesis, faults of 1 and 5 s, 20 seeds, the simple producer).
- `cross`: the full cross product of the earlier matrix's dimensions, 10 seeds.

`--seeds N` and `--faults a,b` change a preset's seeds per cell and nemeses; nothing else
changes its rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs.matrix import DURATIONS_MS, MatrixSpec, default_spec
from harness.sim.runs.study_matrix import StudySpec

TINY_FAULTS = ("kill-leader", "isolate-partition-leader")


def tiny_spec() -> StudySpec:
    return StudySpec(seeds=3, nemeses=TINY_FAULTS, curves=False)


def large_spec() -> MatrixSpec:
    # min_isr up to 5: MatrixSpec.configs skips min.insync.replicas above the RF, so RF 3 gets
    # 1-3 and RF 5 gets 1-5.
    return MatrixSpec(modes=("isr", "quorum"), acks=("1", "all"), min_isr=(1, 2, 3, 4, 5),
                      unclean=(False, True), elr=(False, True), leader_epoch=(True, False),
                      rf=(3, 5), nemeses=NEMESES, durations_ms=DURATIONS_MS, seeds=10,
                      metadata="raft")


PRESETS: dict[str, Callable[[], Any]] = {
    "default": StudySpec,
    "tiny": tiny_spec,
    "large": lambda: StudySpec(seeds=20, large=True),
    "matrix": default_spec,
    "cross": large_spec,
}


def preset_spec(name: str, seeds: int | None = None, faults: tuple[str, ...] | None = None,
                metadata: str = "raft") -> Any:
    """The preset `name`, with `seeds` per cell and `faults` (nemesis names) when given.
    Raises ValueError naming the bad value."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    spec = replace(PRESETS[name](), metadata=metadata)
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        spec = replace(spec, seeds=seeds)
    if faults is not None:
        unknown = [f for f in faults if f not in NEMESES]
        if unknown or not faults:
            raise ValueError(f"unknown nemesis {', '.join(unknown) or '(none given)'}; "
                             f"known: {', '.join(NEMESES)}")
        spec = replace(spec, nemeses=tuple(dict.fromkeys(faults)))
    return spec

"""Named scenario matrices for `kraftlab compare --preset NAME` (docs/compare.md).

- `default`: the matrix of the README's main command (harness/sim/runs/matrix.py
  `default_spec`: 10 settings, RF 3, every nemesis, faults of 1 and 5 s, 20 seeds, 5,800 runs).
- `tiny`: the same 10 settings (every arm of the comparison), RF 3, two faults held 5 s (the
  live queue runs' fault, `kill-leader`, and `isolate-partition-leader`), 3 seeds: 60 runs,
  for an end-to-end check in a minute.
- `large`: the full cross product, for a cluster: both modes, acks 1 and all, every
  min.insync.replicas from 1 to RF, unclean election and ELR on and off, leader epochs on and
  off (pre-KIP-101), RF 3 and 5, every nemesis, every fault duration (1, 5 and 30 s), 10 seeds:
  2 x 2 x 2 x 2 x 2 x (3 + 5) = 256 settings x (1 + 14 x 3) = 43 nemesis-duration cells
  x 10 seeds = 110,080 runs (`--seeds 5`: 55,040).

`--seeds N` and `--faults a,b` change a preset's seeds per cell and nemeses; nothing else
changes its rows (the default preset's rows are exactly `default_spec()`'s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
from harness.sim.runs.matrix import DEFAULT_SETTINGS, DURATIONS_MS, MatrixSpec, default_spec

TINY_FAULTS = ("kill-leader", "isolate-partition-leader")


def tiny_spec() -> MatrixSpec:
    return MatrixSpec(rf=(3,), nemeses=TINY_FAULTS, durations_ms=(5000,), seeds=3,
                      settings=DEFAULT_SETTINGS, metadata="raft")


def large_spec() -> MatrixSpec:
    # min_isr up to 5: MatrixSpec.configs skips min.insync.replicas above the RF, so RF 3 gets
    # 1-3 and RF 5 gets 1-5.
    return MatrixSpec(modes=("isr", "quorum"), acks=("1", "all"), min_isr=(1, 2, 3, 4, 5),
                      unclean=(False, True), elr=(False, True), leader_epoch=(True, False),
                      rf=(3, 5), nemeses=NEMESES, durations_ms=DURATIONS_MS, seeds=10,
                      metadata="raft")


PRESETS: dict[str, Callable[[], MatrixSpec]] = {
    "default": default_spec,
    "tiny": tiny_spec,
    "large": large_spec,
}


def preset_spec(name: str, seeds: int | None = None, faults: tuple[str, ...] | None = None,
                metadata: str = "raft") -> MatrixSpec:
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

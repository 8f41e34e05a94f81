"""`kraftlab sim cluster` over many seeds: per seed, the metadata run (harness.sim.runs.
metadata_run) and/or the data run (harness.sim.runs.cluster_run), reduced to a small picklable
`SeedOutcome`, in this process or fanned out over worker processes. The command line
(harness/cli/sim_cluster.py) parses, calls `run_seeds` and prints.

Invariant: each seed is independent and deterministic, so the outcomes come back in seed order
(`Pool.imap`) and are the same for any number of workers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial

from harness.sim.runs.cluster_run import ClusterRunConfig, run_cluster
from harness.sim.runs.metadata_run import cluster_config, run_cluster_seed
from harness.sim.runs.runner import map_in_order

PLANES = ("both", "data", "metadata")


@dataclass(frozen=True, slots=True)
class SeedPlan:
    """What runs for every seed: `plane`, the metadata run's brokers and safety-phase length,
    and the data run's config (its seed is replaced by each seed's)."""

    plane: str
    brokers: int
    duration_ms: int
    data: ClusterRunConfig


@dataclass(frozen=True, slots=True)
class MetadataOutcome:
    digest: str
    events: int
    sim_ms: int
    admin_ops: int
    partition_epochs: int
    violation: str | None
    trace_tail: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DataOutcome:
    summary: str
    digest: str
    ok: bool
    examples: tuple[str, ...]
    faults: tuple[tuple[int, int, str, str], ...]
    replay_args: str
    sim_ms: int
    totals: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class SeedOutcome:
    seed: int
    metadata: MetadataOutcome | None
    data: DataOutcome | None

    @property
    def failed(self) -> bool:
        return (self.metadata is not None and self.metadata.violation is not None) or (
            self.data is not None and not self.data.ok
        )

    @property
    def sim_ms(self) -> int:
        return (self.metadata.sim_ms if self.metadata else 0) + (
            self.data.sim_ms if self.data else 0
        )


def run_one_seed(plan: SeedPlan, seed: int) -> SeedOutcome:
    metadata: MetadataOutcome | None = None
    data: DataOutcome | None = None
    if plan.plane in ("both", "metadata"):
        result = run_cluster_seed(cluster_config(seed, plan.brokers, plan.duration_ms))
        metadata = MetadataOutcome(
            digest=result.digest,
            events=result.events,
            sim_ms=result.sim_ms,
            admin_ops=int(result.stats.get("admin_ops", 0)),
            partition_epochs=int(result.stats.get("partition_epochs_seen", 0)),
            violation=None if result.ok else str(result.violation),
            trace_tail=tuple(result.trace_tail),
        )
    if plan.plane in ("both", "data"):
        run = run_cluster(replace(plan.data, seed=seed))
        totals = {
            "acked": run.acked,
            "lost": run.lost,
            "divergent": run.divergent_offsets,
            "elections": run.leader_elections,
            "faults": len(run.faults),
        }
        data = DataOutcome(
            summary=run.summary(),
            digest=run.digest,
            ok=run.ok,
            examples=tuple(run.examples),
            faults=tuple(run.faults),
            replay_args=run.config.replay_args(),
            sim_ms=run.sim_ms,
            totals=tuple(sorted(totals.items())),
        )
    return SeedOutcome(seed, metadata, data)


def run_seeds(plan: SeedPlan, seeds: range, jobs: int) -> Iterator[SeedOutcome]:
    """Outcomes in seed order, whatever `jobs` is."""
    return map_in_order(partial(run_one_seed, plan), seeds, jobs)

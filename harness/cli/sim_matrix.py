"""`kraftlab sim matrix`: run the scenario matrix and write one summary row per run.

    kraftlab sim matrix --out DIR [--seeds N] [--first-seed S] [--runs N]
                        [--engine local|spark] [--master URL] [--jobs J] [--full]
                        [--modes isr,quorum,raft] [--acks 1,all] [--min-isr 1,2]
                        [--unclean false,true] [--elr false,true] [--rf 3,5]
                        [--leader-epoch true,false]
                        [--nemeses a,b,...] [--durations 1,5,30] [--histories]
                        [--metadata raft|abstract] [--jitter-ms MS]
                        [--flush-policy P,...] [--producer simple|kafka] [--probe-ms MS]
                        [--lag-ms MS,...] [--session-ms MS,...] [--election-ms MS,...]
                        [--timeline]

--study default|large runs the study's matrix instead (harness/sim/runs/study_matrix.py: the
arms, every nemesis, the trade-off curves; what `kraftlab compare` runs, or its larger preset).
Without --full and without any of the dimension options it runs the default matrix (the three
modes, the main settings, every nemesis, RF 3, faults of 1 and 5 s, 20 seeds;
harness/sim/runs/matrix.py DEFAULT_SETTINGS); --full (or any dimension option) starts from the
product of every dimension (MatrixSpec's defaults; raft cells only with unclean and ELR off and
leader epochs on, which is all raft mode has). --runs N keeps the first N runs. Rows:
DIR/part-*.parquet in the run-summary schema (harness/results/schema.py, docs/compare.md); --histories also writes DIR/histories/<run_id>.jsonl (local engine).
--metadata: the controller side of every run: `raft` (default; 3 simulated Raft voters, on which
the controller nemeses act) or `abstract` (one controller committing after a fixed delay);
recorded in each row's metadata_quorum column.
The study's dimensions (docs/compare.md): --flush-policy (the brokers' disk, each mode with the
policies it may run with: isr page-cache|flush-every-message, quorum/raft
fsync-before-ack|no-fsync), --producer kafka (open-loop, idempotent, retries) and --probe-ms
(an open-loop probe: availability in time), --lag-ms / --session-ms (replica.lag.time.max.ms,
broker.session.timeout.ms sweeps), --election-ms (raft partitions' election timeout sweep). --timeline writes DIR/timelines/<run_id>.md and .json: the
replicas' leader, epoch, ISR, LEO and HW around a loss (each row's replay_command ends with it).

The `sim` group (harness/cli/sim.py) adds this module's `matrix` kind, as it adds `cluster`.
--engine spark runs the matrix as Spark tasks on --master (harness/spark/matrix.py), kraftlab's
code shipped to the executors; a run that raises there is reported with its seed, config and
the command replaying it here (docs/compare.md, "Running on Spark").
Exit code: 0; 1 if a simulator invariant (HW above the ISR's LEO, a leader epoch going back)
broke in any run, or a run failed in an executor (anomalies the checkers find are results, not
failures); 2 on bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

_BOOLS = {"false": False, "true": True}
MAX_TIMELINES = 50  # --timeline runs every run a second time: meant for replays


def add_kind(kinds: Any) -> None:
    """Add `matrix` to the `sim` group's kinds (harness/cli/sim.py)."""
    m = kinds.add_parser("matrix", help="run the quorum-vs-ISR scenario matrix (summary rows "
                         "as Parquet)", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--out", required=True, help="output directory for the Parquet rows")
    m.add_argument("--seeds", type=int, default=None, help="seeds per cell (default 20)")
    m.add_argument("--first-seed", type=int, default=1)
    m.add_argument("--runs", type=int, default=None, help="run only the first N runs")
    m.add_argument("--engine", choices=("local", "spark"), default="local")
    m.add_argument("--master", default="local[*]", help="Spark master (engine spark)")
    m.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores)")
    m.add_argument("--full", action="store_true", help="the product of every dimension")
    m.add_argument("--study", choices=("default", "large"), default=None,
                   help="the study's matrix (harness/sim/runs/study_matrix.py): what kraftlab "
                        "compare runs, or the larger preset for a Spark cluster")
    for name, help_ in (("modes", "isr,quorum,raft"), ("acks", "1,all"), ("min-isr", "1,2"),
                        ("unclean", "false,true"), ("elr", "false,true"), ("rf", "3,5"),
                        ("leader-epoch", "leader.epoch.enable values, e.g. true,false"),
                        ("nemeses", "comma-separated nemesis names"),
                        ("durations", "fault durations in s, e.g. 1,5,30")):
        m.add_argument(f"--{name}", default=None, help=help_)
    m.add_argument("--histories", action="store_true", help="also write every run's history")
    m.add_argument("--metadata", choices=("raft", "abstract"), default="raft",
                   help="metadata side: 3 Raft voters (default) or the abstract controller")
    m.add_argument("--jitter-ms", type=int, default=None,
                   help="seeded start-time jitter of brokers and producers (default 500)")
    m.add_argument("--flush-policy", default=None,
                   help="page-cache,flush-every-message,fsync-before-ack,no-fsync")
    m.add_argument("--producer", choices=("simple", "kafka"), default=None)
    m.add_argument("--probe-ms", type=int, default=None, help="open-loop probe interval")
    m.add_argument("--lag-ms", default=None, help="replica.lag.time.max.ms values")
    m.add_argument("--session-ms", default=None, help="broker.session.timeout.ms values")
    m.add_argument("--election-ms", default=None,
                   help="raft partitions' election timeout values (raft mode; default: drawn)")
    m.add_argument("--timeline", action="store_true",
                   help=f"also write each run's replica timeline (at most {MAX_TIMELINES} runs)")
    m.set_defaults(handler=run_matrix)


class OptionError(ValueError):
    pass


def _split(value: str, convert: Any, allowed: tuple[Any, ...] | None, name: str) -> tuple[Any, ...]:
    out = []
    for part in value.split(","):
        try:
            item = convert(part.strip())
        except (ValueError, KeyError):
            raise OptionError(f"--{name}: bad value {part!r}") from None
        if allowed is not None and item not in allowed:
            raise OptionError(f"--{name}: {part!r} is not one of {allowed}")
        out.append(item)
    return tuple(out)


def build_spec(args: argparse.Namespace) -> Any:
    from harness.sim.actors.disk import FLUSH_POLICIES
    from harness.sim.faults.shapes import SCENARIO_NEMESES as NEMESES
    from harness.sim.runs.matrix import DEFAULT_SEEDS, MatrixSpec, default_spec

    dims = {"modes": (str, ("isr", "quorum", "raft")), "acks": (str, ("1", "all")),
            "min_isr": (int, (1, 2, 3, 4, 5)), "unclean": (_BOOLS.__getitem__, None),
            "elr": (_BOOLS.__getitem__, None), "rf": (int, (1, 3, 5)),
            "leader_epoch": (_BOOLS.__getitem__, None),
            "nemeses": (str, NEMESES), "durations": (lambda v: int(float(v) * 1000), None)}
    given = {k: getattr(args, k) for k in dims if getattr(args, k) is not None}
    if args.full or given:
        spec = MatrixSpec(seeds=args.seeds or DEFAULT_SEEDS)
    else:
        spec = default_spec(args.seeds or DEFAULT_SEEDS)
    changes: dict[str, Any] = {"first_seed": args.first_seed,
                               "metadata": getattr(args, "metadata", "raft")}
    for key, raw in given.items():
        convert, allowed = dims[key]
        values = _split(raw, convert, allowed, key.replace("_", "-"))
        changes["durations_ms" if key == "durations" else key] = values
        if key in ("modes", "acks", "min_isr", "unclean", "elr", "leader_epoch"):
            changes["settings"] = None
    if args.seeds is not None:
        changes["seeds"] = args.seeds
    if getattr(args, "jitter_ms", None) is not None:
        changes["start_jitter_ms"] = args.jitter_ms
    if getattr(args, "flush_policy", None) is not None:
        changes["flush_policies"] = _split(args.flush_policy, str, FLUSH_POLICIES,
                                           "flush-policy")
    if getattr(args, "producer", None) is not None:
        changes["producer"] = args.producer
    if getattr(args, "probe_ms", None) is not None:
        if args.probe_ms < 0:
            raise OptionError("--probe-ms must be >= 0")
        changes["probe_interval_ms"] = args.probe_ms
    for option, field in (("lag_ms", "lag_ms"), ("session_ms", "session_ms"),
                          ("election_ms", "election_ms")):
        if getattr(args, option, None) is not None:
            values = _split(getattr(args, option), int, None, option.replace("_", "-"))
            if min(values) <= 0:
                raise OptionError(f"--{option.replace('_', '-')} values must be positive")
            changes[field] = values
    return replace(spec, **changes)


def run_matrix(args: argparse.Namespace) -> int:
    import logging

    from harness.results.schema import write_dataset
    from harness.sim.runs.matrix import Progress, run_local
    from harness.sim.runs.runner import quiet_logging

    quiet_logging(logging.ERROR)  # thousands of runs: the cores' info lines only cost time

    try:
        if args.seeds is not None and args.seeds < 1:
            raise OptionError("--seeds must be >= 1")
        if args.runs is not None and args.runs < 1:
            raise OptionError("--runs must be >= 1")
        spec = build_spec(args)
    except OptionError as exc:
        print(f"kraftlab sim matrix: INVALID_REQUEST: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "study", None):
        from harness.sim.runs.study_matrix import (
            CURVE_SEEDS,
            STUDY_SEEDS,
            large_study_configs,
            study_configs,
        )

        seeds = args.seeds or (STUDY_SEEDS if args.study == "default" else 20)
        configs = (study_configs(seeds, min(seeds, CURVE_SEEDS), spec.metadata)
                   if args.study == "default" else large_study_configs(seeds, spec.metadata))
    else:
        configs = spec.configs()
    if args.runs is not None:
        configs = configs[:args.runs]
    if getattr(args, "timeline", False) and len(configs) > MAX_TIMELINES:
        print(f"kraftlab sim matrix: INVALID_REQUEST: --timeline with {len(configs)} runs "
              f"(at most {MAX_TIMELINES}: it is for replaying a few)", file=sys.stderr)
        return 2
    out = Path(args.out)
    print(f"sim matrix: {len(configs)} runs, engine {args.engine}, metadata {spec.metadata}",
          file=sys.stderr, flush=True)
    if args.engine == "spark":
        return _run_on_spark(configs, out, args.master)
    progress = Progress(len(configs))
    broken: list[str] = []
    hist_dir = out / "histories"

    def on_output(o: Any) -> None:
        broken.extend(f"{o.row.run_id}: {v}" for v in o.invariant_violations)
        if args.histories:
            hist_dir.mkdir(parents=True, exist_ok=True)
            with (hist_dir / f"{o.row.run_id}.jsonl").open("w") as handle:
                for event in o.history:
                    handle.write(json.dumps(event, separators=(",", ":")) + "\n")

    outputs = run_local(configs, args.jobs, args.histories, progress, on_output)
    path = write_dataset([o.row for o in outputs], out, part="local")
    rows = [o.row for o in outputs]
    lost = sum(1 for r in rows if r.lost_writes)
    print(f"runs {len(rows)}, wall {progress.wall_s:.1f} s, "
          f"{len(rows) / progress.wall_s:.2f} runs/s, "
          f"{progress.sim_ms / 1000 / progress.wall_s:.0f} simulated s per wall s; "
          f"runs with lost acknowledged writes: {lost}; rows: {path}")
    for line in broken[:10]:
        print(f"INVARIANT {line}")
    if getattr(args, "timeline", False):
        write_timelines(configs, out / "timelines")
    return 1 if broken else 0


def write_timelines(configs: Any, where: Path) -> None:
    """Each run again with the replica timeline recorder (harness.sim.runs.timeline)."""
    from harness.sim.runs.timeline import record_timeline

    where.mkdir(parents=True, exist_ok=True)
    for config in configs:
        result, timeline = record_timeline(config)
        (where / f"{timeline.run_id}.md").write_text(timeline.markdown() + "\n")
        (where / f"{timeline.run_id}.json").write_text(json.dumps(timeline.to_json()))
        print(f"timeline: {where / timeline.run_id}.md (lost {result.lost_writes})")


def _run_on_spark(configs: list[Any], out: Path, master: str | None) -> int:
    """The matrix as Spark tasks (harness/spark/matrix.py), kraftlab's code shipped to the
    executors; exit 1 if a run failed in an executor or broke a simulator invariant."""
    from harness.sim.runs.matrix import Progress
    from harness.spark.matrix import report_failures, run_spark
    from harness.spark.session import build_session
    from harness.spark.ship import ship

    spark = build_session(master, app_name="kraftlab-sim-matrix")
    try:
        ship(spark)
        result = run_spark(spark, configs, out, Progress(len(configs)))
    finally:
        spark.stop()
    for executor in result.executors[:5]:
        print(f"executors ran: {executor}", file=sys.stderr)
    report_failures(result, lambda line: print(line, file=sys.stderr))
    print(f"runs {result.runs} in {result.tasks} Spark tasks, wall {result.wall_s:.1f} s, "
          f"{result.runs / max(result.wall_s, 1e-9):.2f} runs/s, "
          f"{result.cpu_ms / 1000 / max(result.runs, 1):.3f} CPU s per run in the executors; "
          f"failed {len(result.failures)}; rows: {out}")
    return 1 if result.failures or result.violations else 0

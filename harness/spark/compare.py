"""The comparison job: run-summary Parquet in, compare.md + tables + plots out.

Runs as `kraftlab analyze --input DIR --out DIR [--master URL]` (harness/cli/analyze.py) or as
`spark-submit harness/spark/compare.py --input DIR --out DIR` (the `__main__` block below).
The heavy work stays in Spark (DataFrame API, aggregate.py); only the aggregates, a few rows
per configuration, come back to the driver to be written. Progress goes to stderr, one line
per stage with the elapsed time.

Exit codes: 0 report written; 3 bad input (missing directory, no Parquet, wrong schema), with
a JSON line `{"error": "INVALID_REQUEST", "message": ...}` on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_BAD_INPUT = 0, 3
STAGES = ("start Spark", "read runs", "aggregate", "pair quorum with ISR", "pair arms by seed",
          "collect aggregates", "write tables", "plot", "write compare.md", "write report.html")


@dataclass(slots=True)
class Progress:
    """Prints `[analyze 3/8 +12.4s] aggregate` lines; `quiet` keeps only the record."""

    quiet: bool = False
    started: float = field(default_factory=time.perf_counter)
    seen: list[str] = field(default_factory=list)

    def stage(self, name: str) -> None:
        self.seen.append(name)
        if not self.quiet:
            elapsed = time.perf_counter() - self.started
            print(f"[analyze {STAGES.index(name) + 1}/{len(STAGES)} +{elapsed:.1f}s] {name}",
                  file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Result:
    report: Path
    files: tuple[Path, ...]
    tables: dict[str, Any]
    sentences: dict[str, list[str]]
    verdicts: list[Any] = field(default_factory=list)
    findings: list[Any] = field(default_factory=list)
    html: Path | None = None


def is_uri(location: str) -> bool:
    """hdfs://..., s3a://..., file:/...: left to Spark's file systems."""
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", location) is not None


def check_input(location: str | Path) -> None:
    """Fail before Spark starts if a local input has nothing to read (URIs are Spark's)."""
    from harness.results.schema import SchemaError

    if is_uri(str(location)):
        return
    path = Path(location)
    if not path.exists():
        raise SchemaError(f"input {path} does not exist")
    if path.is_dir() and not any(path.rglob("*.parquet")):
        raise SchemaError(f"no .parquet files under {path} (write them with "
                          f"harness.results.schema.write_dataset)")


def input_list(inputs: str | Path | Sequence[str | Path]) -> list[str]:
    """One input or several, as strings (a Path would turn hdfs:///x into hdfs:/x)."""
    items = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    if not items:
        from harness.results.schema import SchemaError

        raise SchemaError("no input given")
    return [str(i) for i in items]


def analyze(spark: Any, inputs: str | Path | Sequence[str | Path], out: Path,
            progress: Progress | None = None, evidence: Any = None,
            replays: int = 8, sim_vs_real: Any = None) -> Result:
    """The job on an existing SparkSession (the tests share one). `inputs`: one location or
    several (directories are read recursively, so one directory may hold simulated matrix rows
    and `kraftlab jepsen run --out` directories side by side); rows keep their `source`.
    `evidence`: a conclude.Evidence (the least data a verdict needs); None = its defaults.
    `replays`: how many losses report.html replays for their replica timeline (0: none).
    `sim_vs_real`: the simulation-against-reality table (harness/study/sim_vs_real.py rows),
    shown in report.html when given."""
    import pandas as pd

    from harness.spark import aggregate as ag
    from harness.spark import conclude, paired, reference, report, report_html, repro
    from harness.spark import study_plots as sp
    from harness.spark import verdicts as vd

    progress = progress or Progress(quiet=True)
    locations = input_list(inputs)
    for location in locations:
        check_input(location)
    progress.stage("read runs")
    # mergeSchema: files written before an optional column (matrix_schema.OPTIONAL_COLUMNS)
    # existed read back with it null.
    raw = (spark.read.option("recursiveFileLookup", "true").option("mergeSchema", "true")
           .option("pathGlobFilter", "*.parquet").parquet(*locations))
    ag.check_columns(raw)
    ag.check_values(raw)
    runs = ag.run_level(raw).cache()
    progress.stage("aggregate")
    frames = {
        # Cached: the quorum/ISR pairs below are a join of this table with itself.
        "groups": ag.summarize(runs, ag.GROUP_KEYS).cache(),
        "configs": ag.summarize(runs, ag.CONFIG_KEYS),
        "nemeses": ag.summarize(runs, ("source", "replication_mode", "nemesis")),
        "durability": ag.summarize(runs, ("source", "replication_mode", "acks",
                                          "min_insync_replicas")),
    }
    progress.stage("pair quorum with ISR")
    frames["pairs"] = ag.quorum_vs_isr(frames["groups"])
    progress.stage("pair arms by seed")
    # One row per comparison, cell and seed (a few numbers each), never the raw runs.
    pairing = paired.paired_runs(runs)
    progress.stage("collect aggregates")
    # Aggregates only (one row per group) and the pairs, never the raw runs: six small Spark
    # jobs submitted at once from threads, so their fixed costs (planning, scheduling, a cold
    # JVM's first compilations) overlap instead of adding up; each result is what it would be
    # alone (every table is ordered by its keys, the pairs are sorted where they are used).
    wanted = {**frames, "by_seed": pairing}
    with ThreadPoolExecutor(len(wanted)) as pool:
        collected = dict(zip(wanted, pool.map(lambda frame: frame.toPandas(), wanted.values()),
                             strict=True))
    by_seed = collected.pop("by_seed")
    tables: dict[str, Any] = collected
    tables["comparisons"] = paired.comparison_table(by_seed, evidence_seeds(evidence))
    tables["safety"] = paired.safety_table(by_seed)
    tables["facts"] = paired.cell_facts(by_seed)
    total_runs = int(tables["configs"]["runs"].sum())
    runs.unpersist()
    frames["groups"].unpersist()
    out.mkdir(parents=True, exist_ok=True)
    progress.stage("write tables")
    files = report.write_tables(out, tables)
    ev = evidence or conclude.DEFAULT_EVIDENCE
    verdicts = vd.comparison_verdicts(tables["comparisons"], tables["safety"],
                                      facts=tables["facts"])
    findings = reference.findings(tables["groups"], ev)
    progress.stage("plot")
    files += report.write_plots(out, tables)
    files += sp.write_study_plots(out, tables["groups"], tables["configs"])
    forests = {}
    for v in verdicts:
        name = f"forest_{v.comparison.key}.png"
        files.append(sp.forest(out / name, v.evidence, v.metric, v.comparison.a,
                               v.comparison.b))
        forests[v.comparison.key] = name
    progress.stage("write compare.md")
    sentences = conclude.conclusions(tables["groups"], tables["pairs"], ev)
    sources = ", ".join(f"{s}: {int(n)}" for s, n in
                        tables["configs"].groupby("source")["runs"].sum().items())
    meta = {"input": ", ".join(f"`{x}`" for x in locations), "runs": total_runs,
            "sources": sources or "none", "master": spark.sparkContext.master}
    path = report.write_markdown(out, tables, sentences, meta,
                                 verdicts=vd.verdict_lines(verdicts),
                                 findings=[f"{f.ref} {f.title}: **{f.status}**. {f.sentence}"
                                           for f in findings],
                                 finding_tables=[(f"{f.ref} ({f.title})", f.evidence)
                                                 for f in findings if f.evidence is not None
                                                 and not f.evidence.empty])
    progress.stage("write report.html")
    reproductions = [r for v in verdicts for r in v.reproductions]
    timelines = repro.replay_timelines(reproductions, replays) if replays else {}
    page = report_html.write_html(out, report_html.HtmlInput(
        meta=meta, verdicts=verdicts, findings=findings, sentences=sentences,
        configs=tables["configs"], forest_plots=forests, timelines=timelines,
        sim_vs_real=None if not sim_vs_real else pd.DataFrame(sim_vs_real)))
    return Result(report=path, files=(path, page, *files), tables=tables, sentences=sentences,
                  verdicts=verdicts, findings=findings, html=page)


def evidence_seeds(evidence: Any) -> int:
    """The least paired seeds per cell for a verdict: the evidence's min_runs, at least 2."""
    from harness.spark.stats import MIN_SEEDS

    return MIN_SEEDS if evidence is None else max(2, min(MIN_SEEDS, evidence.min_runs))


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    from harness.spark.session import DEFAULT_MASTER

    parser = parser or argparse.ArgumentParser(
        prog="compare.py", description="quorum-vs-ISR comparison over run-summary Parquet")
    # A string, not a Path: Path would turn hdfs:///runs into hdfs:/runs.
    parser.add_argument("--input", required=True, nargs="+", action="extend",
                        help="one or more directories (or files, or hdfs://, s3a:// URIs) of "
                             "run-summary Parquet, read recursively: simulated matrix rows "
                             "and `kraftlab jepsen run --out` directories alike; repeat the "
                             "option or list several (docs/compare.md)")
    parser.add_argument("--out", required=True, type=Path, help="report directory")
    parser.add_argument("--master", default=None,
                        help=f"Spark master URL (default {DEFAULT_MASTER}; under spark-submit, "
                             "the one spark-submit was given)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def run(args: argparse.Namespace) -> int:
    from pyspark.errors import AnalysisException

    from harness.results.schema import SchemaError
    from harness.spark.session import build_session, default_master

    progress = Progress(quiet=args.quiet)
    try:
        for location in input_list(args.input):
            check_input(location)
    except SchemaError as exc:
        print(json.dumps({"error": "INVALID_REQUEST", "message": str(exc)}), file=sys.stderr)
        return EXIT_BAD_INPUT
    # Under spark-submit the master is spark-submit's own unless --master overrides it.
    master = default_master(args.master)
    progress.stage("start Spark")
    spark = build_session(master)
    try:
        result = analyze(spark, args.input, args.out, progress)
    except (SchemaError, AnalysisException) as exc:
        print(json.dumps({"error": "INVALID_REQUEST", "message": str(exc)}), file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        spark.stop()
    for source, said in result.sentences.items():
        print(f"{source}:")
        for sentence in said:
            print(f"  - {sentence}")
    print(f"report: {result.report}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    # spark-submit runs this file as a script: make the repository importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())

"""`kraftlab analyze --input DIR --out DIR [--master URL]`: the Spark comparison job.

Only argument parsing lives here; pyspark is imported when the command runs, so `kraftlab
--help` stays fast. The job itself is harness/spark/compare.py (also a spark-submit script).
"""

from __future__ import annotations

from typing import Any

from harness.spark.compare import build_parser, run


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "analyze", help="quorum-vs-ISR report (Spark) from run-summary Parquet",
        description="Aggregate run-summary rows (kraftlab sim matrix / jepsen run) on Spark and "
                    "write compare.md, CSV/Parquet aggregates and PNG plots (docs/compare.md).")
    build_parser(parser)
    parser.set_defaults(handler=run)

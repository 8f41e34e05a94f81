"""The quorum-versus-ISR comparison on Spark (`kraftlab analyze`, docs/compare.md).

session.py builds the SparkSession (embedded `local[*]` or any `--master`), aggregate.py turns
run-summary rows (harness.results.schema) into aggregates with the DataFrame API only (built-in
functions and SQL higher-order functions, no Python UDFs, so executors need no kraftlab code),
conclude.py turns the small aggregates into sentences by rules, report.py writes compare.md,
CSV, Parquet and plots, compare.py is the entry point (also `spark-submit`).
"""

"""kraftlab on Spark: the scenario matrix as Spark tasks and the quorum-versus-ISR comparison
(`kraftlab compare`, `kraftlab sim matrix --engine spark`, `kraftlab analyze`; docs/compare.md).

session.py builds the SparkSession (embedded `local[*]` or any `--master`); ship.py zips
kraftlab's packages for the executors, which need only the simulator's few requirements;
matrix.py runs the matrix's runs in executors and has Spark write the rows. For the analysis,
aggregate.py turns run-summary rows (harness.results.schema) into aggregates with the DataFrame
API only (built-in functions and SQL higher-order functions, no Python UDFs, so the analysis
alone needs no kraftlab code on executors), conclude.py turns the small aggregates into
sentences by rules, report.py writes compare.md, CSV, Parquet and plots, compare.py is the
analysis' entry point (also `spark-submit`).
"""

"""Building the SparkSession for `kraftlab compare`, `kraftlab analyze` and the Spark matrix.

Local masters (`local`, `local[N]`, `local[*]`) and masters on loopback (`spark://127.0.0.1:
7077`, `spark://localhost:7077`) are pinned to loopback: SPARK_LOCAL_IP and the driver's bind
address and host are 127.0.0.1, so the job runs on a machine without a network (127.0.0.1
only) and a loopback cluster's executors reach the driver there. Any other master
(`spark://host:7077`, `yarn`, `k8s://...`) is used as given; the cluster's own settings decide
addresses.

Executors of a local master run this interpreter (PYSPARK_PYTHON, unless already set); a
cluster's executors run the Python that PYSPARK_PYTHON names in the driver's environment, or
`python3` on their own PATH (PySpark's rule), which needs only kraftlab's executor requirements
(harness/spark/ship.py), not kraftlab.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def is_loopback(master: str) -> bool:
    """A standalone master on this machine's loopback address."""
    return re.match(r"^spark://(127\.0\.0\.1|localhost)(:\d+)?$", master) is not None


def under_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands Python its gateway port in the environment."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def default_master(given: str | None) -> str | None:
    """`--master` if given; else spark-submit's own (None: left to the launcher) under
    spark-submit; else DEFAULT_MASTER."""
    if given:
        return given
    return None if under_spark_submit() else DEFAULT_MASTER


def build_session(master: str | None = DEFAULT_MASTER, app_name: str = "kraftlab-analyze",
                  shuffle_partitions: int | None = None) -> Any:
    """A SparkSession on `master` (getOrCreate: an existing session is reused as is).

    `master=None` leaves the master to the launcher (spark-submit's `--master`).
    """
    local = master is not None and is_local(master)
    loopback = local or (master is not None and is_loopback(master))
    if loopback:
        # Must be set before the JVM starts; the JVM reads it at launch.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    if local:
        # Executors on this machine: this interpreter. On a cluster this path means nothing.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               # Our own stage lines are the progress; Spark's bar would garble them.
               .config("spark.ui.showConsoleProgress", "false"))
    if loopback:
        builder = (builder.config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.ui.enabled", "false"))
    if local:
        # Aggregates are small: a few shuffle partitions instead of 200 saves seconds locally.
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions or 4))
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session

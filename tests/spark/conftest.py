"""Fixtures for the Spark tests: a Python environment with only what executors need.

`executor_python` is a plain virtualenv (`python -m venv`, no system site-packages) holding
harness/spark/ship.py's EXECUTOR_REQUIREMENTS at this interpreter's versions, installed with
pip (from the local wheel cache or the package index): no kraftlab, no pyspark, no pyarrow.
Executors whose Python is this one can run simulations only from the shipped zip. The tests
that need it are skipped when pip cannot install the requirements (no index, no cache).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.spark.ship import EXECUTOR_REQUIREMENTS


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would put kraftlab or a Python on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def executor_python(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("executor-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=clean_env(),
                   timeout=120)
    python = venv / "bin" / "python"
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in EXECUTOR_REQUIREMENTS]
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *pins],
                          env=clean_env(), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        # PyPI is reachable from these machines (.ci/install uses it): a failure is a broken
        # setup to see, not a test to leave out
        pytest.fail(f"pip could not install {pins}: {done.stderr.strip()[-300:]}",
                    pytrace=False)
    return python

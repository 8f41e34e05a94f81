"""The compatibility table of docs/kafka-protocol.md, measured: tests/kafka/compat_client.py
runs produce, idempotence, assign-consume, group-consume and admin with each client library.

kafka-python 3 and confluent-kafka run in the project's environment; aiokafka where it is
installed (a dev dependency). Clients that cannot share the project's environment (kafka-python
2.x) run from another interpreter named by KRAFTLAB_COMPAT_PYTHON, which gets every library it
has; without it those cases are skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.kafka.compat_client import MODULES
from tests.kafka.conftest import KafkaCluster

pytestmark = pytest.mark.integration

CHECKS = ["version", "produce", "idempotence", "assign-consume", "group-consume", "admin"]
SCRIPT = os.path.join(os.path.dirname(__file__), "compat_client.py")


def _has(python: str, module: str) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec(module) is not None
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return done.returncode == 0


def _cases() -> list[tuple[str, str]]:
    pythons = [sys.executable] + [p for p in [os.environ.get("KRAFTLAB_COMPAT_PYTHON")] if p]
    return [(python, library) for python in pythons for library in MODULES]


@pytest.mark.parametrize(("python", "library"), _cases())
def test_client_library_row(kcluster: KafkaCluster, python: str, library: str) -> None:
    if not _has(python, MODULES[library]):
        if python == sys.executable:  # .ci/install installs every library for the suite's own
            pytest.fail(f"{library} is not installed: run `bash .ci/install`", pytrace=False)
        pytest.skip(f"{library} is not installed for KRAFTLAB_COMPAT_PYTHON={python}")
    prefix = f"compat-{abs(hash((python, library))) % 10_000}"
    done = subprocess.run([python, SCRIPT, library, kcluster.bootstrap, prefix],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    print(library, rows[0]["detail"] if rows else None, rows)  # pytest -s: the table's cells
    assert [r["check"] for r in rows] == CHECKS, done.stderr[-2000:]
    failed = {r["check"]: r["detail"] for r in rows if not r["ok"]}
    assert failed == {} and done.returncode == 0

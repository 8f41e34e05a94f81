"""Shipping kraftlab's code to executors (harness/spark/ship.py): what the zip holds, that the
executor requirements are exactly what a simulated run imports, that a plain virtualenv with
only those runs a simulation from the zip, and that a failed run's replay command replays
exactly that run. No Spark here; tests/spark/test_standalone_cluster.py runs real executors."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

from harness.cli.main import build_parser
from harness.cli.sim_matrix import build_spec
from harness.sim.runs.matrix import config_to_dict, default_spec
from harness.spark.matrix import replay_command
from harness.spark.ship import EXECUTOR_REQUIREMENTS, build_zip, package_names
from harness.study.presets import large_spec
from tests.spark.conftest import clean_env

ROOT = Path(__file__).resolve().parents[2]


def test_the_zip_holds_every_package_and_no_bytecode(tmp_path: Path) -> None:
    assert {"harness", "partition", "quorum"} <= set(package_names(ROOT))
    path = build_zip(tmp_path / "kraftlab.zip", ROOT)
    names = zipfile.ZipFile(path).namelist()
    assert names == sorted(names)
    assert {n.split("/")[0] for n in names} == set(package_names(ROOT))
    for module in ("harness/__init__.py", "harness/sim/runs/matrix.py",
                   "quorum/__init__.py", "partition/__init__.py", "harness/spark/ship.py"):
        assert module in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("tests/")]


def test_the_same_code_gives_the_same_zip(tmp_path: Path) -> None:
    first = build_zip(tmp_path / "a", ROOT)
    second = build_zip(tmp_path / "b", ROOT)
    assert first.name == second.name and first.name.startswith("kraftlab-")
    assert first.read_bytes() == second.read_bytes()


_IMPORTS = """
import importlib.metadata, json, sys
from harness.spark.matrix import _run_task  # the module a task's function is pickled from
from harness.results.row import validate_row
from harness.sim.runs.matrix import default_spec, run_one
from harness.sim.runs.runner import quiet_logging
quiet_logging()  # as _run_task does
out = run_one(default_spec(1).configs()[40])
validate_row(out.row)
out.row.to_record()
ours = {"harness", "quorum", "partition"}
names = {m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names) - ours
dists = importlib.metadata.packages_distributions()
print(json.dumps(sorted({d for n in names if not n.startswith("_") for d in dists.get(n, ())})))
"""


def test_executor_requirements_are_what_a_run_imports() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORTS], cwd=ROOT, capture_output=True,
                          text=True, env=clean_env(PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == sorted(EXECUTOR_REQUIREMENTS)


def test_a_plain_virtualenv_runs_a_simulation_from_the_zip(executor_python, tmp_path) -> None:
    # Without the zip, the environment has no kraftlab at all.
    bare = subprocess.run([str(executor_python), "-c", "import harness"], cwd=tmp_path,
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert "No module named 'harness'" in bare.stderr
    zip_path = build_zip(tmp_path / "kraftlab.zip", ROOT)
    code = (f"import sys; sys.path.insert(0, {str(zip_path)!r})\n"
            "from harness.sim.runs.matrix import default_spec, run_one\n"
            "from harness.results.row import validate_row\n"
            "from harness.sim.runs.runner import quiet_logging\n"
            "import harness\n"
            "quiet_logging()\n"
            "out = run_one(default_spec(1).configs()[40]); validate_row(out.row)\n"
            "print(out.row.run_id, out.row.acked_writes, harness.__file__)")
    done = subprocess.run([str(executor_python), "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, env=clean_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    run_id, acked, origin = done.stdout.splitlines()[-1].split()
    config = default_spec(1).configs()[40]
    assert run_id == config.key() and int(acked) > 0
    assert origin.startswith(str(zip_path))


def test_the_replay_command_replays_exactly_that_run() -> None:
    configs = large_spec().configs()
    for config in (configs[0], configs[len(configs) // 3], configs[-1]):
        argv = shlex.split(replay_command(config_to_dict(config)))
        assert argv[:3] == ["kraftlab", "sim", "matrix"]
        args = build_parser().parse_args(argv[1:])
        assert args.engine == "local" and args.jobs == 1
        assert build_spec(args).configs() == [config]

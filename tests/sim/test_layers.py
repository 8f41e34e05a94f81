"""The simulator's structure (docs/simulation.md, "How the simulator is built"): its layers import
only the layers before them (kernel, checks, actors, faults, runs), and nothing of the asyncio
driver: what both drivers share comes from harness.drive. Counted like the repository's import
cycle check: every import statement, including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import harness.sim

SIM = Path(harness.sim.__file__).parent
LAYERS = ("kernel", "checks", "actors", "faults", "runs")
FORBIDDEN = ("asyncio", "harness.runtime", "harness.net", "harness.launcher", "harness.cli",
             "harness.spark")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_layers_import_only_the_layers_before_them_and_no_asyncio_driver() -> None:
    seen = 0
    for i, layer in enumerate(LAYERS):
        allowed = {f"harness.sim.{x}" for x in LAYERS[: i + 1]}
        for path in sorted((SIM / layer).glob("*.py")):
            seen += 1
            for name in _imports(path):
                assert not name.startswith(FORBIDDEN), f"{path.name} imports {name}"
                if name.startswith("harness.sim."):
                    layer_of = ".".join(name.split(".")[:3])
                    assert layer_of in allowed, f"{layer}/{path.name} imports {name}"
    assert seen > 20  # the layout is there

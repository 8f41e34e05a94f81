"""The architecture's rules (docs/architecture.md), checked on the source tree: no import cycle
among files or folders, counting every import statement (under TYPE_CHECKING and inside
functions too), and the dependency directions the layers promise."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("quorum", "partition", "coordinator", "harness")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours that `name` imports, resolved to the longest known module name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            # A module's own ancestor packages are imported by Python before it in any case:
            # not an edge.
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


EDGES = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    scc = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        scc.append(top)
                        if top == node:
                            break
                    if len(scc) > 1:
                        out.append(sorted(scc))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def _folder(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def test_no_file_cycles() -> None:
    assert _cycles(EDGES) == []


def test_no_folder_cycles() -> None:
    folders: dict[str, set[str]] = defaultdict(set)
    for name, targets in EDGES.items():
        for target in targets:
            a, b = _folder(name), _folder(target)
            # A package's own __init__ importing its children is not a dependency between folders.
            if a != b and not b.startswith(a + ".") and not a.startswith(b + "."):
                folders[a].add(b)
    assert _cycles(folders) == []


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _violations(importer: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{name} -> {target}"
        for name, targets in EDGES.items()
        if _within(name, importer)
        for target in targets
        if any(_within(target, f) for f in forbidden)
    )


def test_cores_import_nothing_from_the_harness() -> None:
    for core in ("quorum", "partition", "coordinator"):
        assert _violations(core, ("harness",)) == []


# What a sans-IO core may not touch: the clock, the disk, the network, threads, processes.
# Randomness comes in as a seeded random.Random (a pure generator: a seed gives one run);
# the module's own functions, which draw from a hidden global generator, are refused.
IO_MODULES = ("os", "time", "socket", "asyncio", "threading", "subprocess", "select",
              "selectors", "signal", "ctypes", "shutil", "tempfile", "uvloop", "aiohttp")


def _io_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        found += [f"imports {n}" for n in names if n.split(".")[0] in IO_MODULES]
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "random" and node.attr != "Random"):
            found.append(f"calls random.{node.attr} (the global generator)")
    return found


def test_cores_touch_no_clock_disk_network_or_global_randomness() -> None:
    bad = [f"{path.relative_to(ROOT)}: {use}" for name, path in sorted(MODULES.items())
           if name.split(".")[0] in ("quorum", "partition", "coordinator")
           for use in _io_uses(path)]
    assert not bad, "\n".join(bad)


def test_io_uses_sees_an_import_and_a_global_random_call(tmp_path: Path) -> None:
    planted = tmp_path / "core.py"
    planted.write_text("import os.path\nfrom time import monotonic\nimport random\n"
                       "rng = random.Random(1)\nx = random.random()\n")
    assert _io_uses(planted) == ["imports os.path", "imports time",
                                 "calls random.random (the global generator)"]


def test_quorum_imports_nothing_from_the_other_cores() -> None:
    assert _violations("quorum", ("partition", "coordinator")) == []


def test_the_runtime_never_imports_the_listeners_or_the_simulator() -> None:
    forbidden = ("harness.kafka", "harness.admin", "harness.sim", "harness.cli")
    assert _violations("harness.runtime", forbidden) == []


def test_the_simulator_never_imports_asyncio_code() -> None:
    forbidden = ("harness.runtime", "harness.net", "harness.launcher", "harness.cli",
                 "harness.spark", "harness.node", "harness.admin", "harness.kafka",
                 "harness.client", "harness.loop")
    assert _violations("harness.sim", forbidden) == []


# The event loop's scheduling calls. The asyncio runtime defers work only through harness/loop
# (Soon, Serial, Timer, run_soon, run_later: each with an on_error, the node's crash), never with
# a bare call and a flag of its own; the node's clock (harness/runtime/clock.py) is the one
# timer source below them, the clock Timers are armed on.
LOOP_SCHEDULING = frozenset({"call_soon", "call_later", "call_at"})
SCHEDULING_ALLOWED = {"harness.runtime.clock"}


def _scheduling_calls(path: Path) -> list[int]:
    """The lines of `path` that call an event loop's (or a clock's) call_soon/call_later/call_at."""
    return sorted(node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in LOOP_SCHEDULING)  # fmt: skip


def test_the_runtime_defers_work_only_through_harness_loop() -> None:
    bare = [f"{MODULES[name].relative_to(ROOT)}:{line}"
            for name in sorted(MODULES)
            if (_within(name, "harness.runtime") or _within(name, "harness.net"))
            and name not in SCHEDULING_ALLOWED
            for line in _scheduling_calls(MODULES[name])]  # fmt: skip
    assert bare == [], "schedule deferred work through harness/loop: " + ", ".join(bare)


def test_the_scheduling_check_sees_a_bare_call(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f(loop, clock):\n    loop.call_soon(f)\n"
                       "    clock.call_at(5, f)\n    loop.call_soon_threadsafe(f)\n")  # fmt: skip
    assert _scheduling_calls(planted) == [2, 3]


def _external_imports(path: Path) -> set[str]:
    """The top-level names of the modules `path` imports (every import statement)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def test_the_shared_drive_code_does_no_io_and_imports_neither_driver() -> None:
    # harness/drive is run by both drivers (the one raft-partition host among it, raft_host.py):
    # time, disks, threads and the network come through its ports, never from an import.
    io = {"asyncio", "os", "time", "random", "socket", "threading", "concurrent", "selectors"}
    found = sorted(f"{name} -> {m}" for name, path in MODULES.items()
                   if _within(name, "harness.drive") for m in _external_imports(path) & io)
    assert found == []
    forbidden = ("harness.runtime", "harness.sim", "harness.net", "harness.node",
                 "harness.kafka", "harness.admin", "harness.cli", "harness.loop")
    assert _violations("harness.drive", forbidden) == []


def test_nothing_below_the_cli_imports_it() -> None:
    importers = sorted(
        f"{name} -> {target}"
        for name, targets in EDGES.items()
        if not _within(name, "harness.cli") and name != "harness.__main__"
        for target in targets
        if _within(target, "harness.cli")
    )
    assert importers == []


# A path of the tree named in a docstring, a comment or a doc: "harness/drive/effects.py".
NAMED_PATH = re.compile(r"\b((?:harness|quorum|partition|coordinator|tests|docs)/[\w./-]+"
                        r"\.(?:py|md|json|toml|properties|xml))")


def named_paths(text: str) -> set[str]:
    return {m.group(1) for m in NAMED_PATH.finditer(text)}


def test_every_file_the_code_and_docs_name_exists() -> None:
    """A cross-reference to a file that was moved or removed misleads the next reader: every
    repository path named in the code, the tests and the docs must exist."""
    sources = [p for top in (*PACKAGES, "tests", "docs") for p in (ROOT / top).rglob("*")
               if p.suffix in (".py", ".md")]
    sources.append(ROOT / "README.md")
    stale = sorted(f"{p.relative_to(ROOT)} names {ref}" for p in sources
                   for ref in named_paths(p.read_text()) if not (ROOT / ref).exists())
    assert not stale, "\n".join(stale)


def test_named_paths_finds_a_reference_in_prose() -> None:
    gone = "harness/no/" + "such.py"  # split, so this file names no missing path itself
    text = f"as harness/drive/effects.py does (docs/architecture.md), not {gone}."
    assert named_paths(text) == {"harness/drive/effects.py", "docs/architecture.md", gone}
    assert not (ROOT / gone).exists()


def test_the_checks_find_a_planted_cycle() -> None:
    # The detector itself: a two-module cycle and a three-folder cycle are found.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == [["x", "y", "z"]]
    assert _cycles({"x": {"y"}, "y": set()}) == []


MAX_LINES = 800  # a file past this is two files (docs/architecture.md "The rules")


def test_no_source_file_is_over_800_lines() -> None:
    long = sorted(
        f"{path.relative_to(ROOT)}: {n}"
        for path in ROOT.glob("**/*.py")
        if not {".venv", ".peers", "node_modules", ".git"} & set(path.relative_to(ROOT).parts)
        and (n := len(path.read_text(errors="replace").splitlines())) > MAX_LINES
    )
    assert long == []

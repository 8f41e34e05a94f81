"""Shipping kraftlab's code to Spark executors that do not have it installed.

The matrix runs the simulator inside executors (harness/spark/matrix.py), so every executor
imports `harness`, `quorum` and `partition`. The driver zips the packages it runs from and adds
the zip to the session (`SparkContext.addPyFile`): Spark copies it to every executor and puts it
first on the Python workers' path, so executors run the driver's code, whatever is (or is not)
installed on their machines. Under `spark-submit` the same zip goes in `--py-files`
(`python -m harness.spark.ship kraftlab.zip` builds it; docs/compare.md).

What executors still need from their own Python (EXECUTOR_REQUIREMENTS): the simulator's
third-party imports, nothing else. The rows are plain Python (harness/results/row.py) and Spark
writes the Parquet in the JVM, so pyarrow, pandas and numpy stay on the driver. A test
(tests/spark/test_ship.py) checks the list against what a simulated run actually imports, and
tests/spark/test_standalone_cluster.py runs executors in a virtualenv holding only these.
The executors' Python must be the driver's minor version (PySpark refuses a mismatch).

Invariant: the zip holds every top-level package of the kraftlab distribution (the
`[tool.setuptools.packages.find]` list of pyproject.toml, or the installed distribution's
top-level names), sources and data files, never `__pycache__`; entries are sorted and dated
1980-01-01, so the same code gives the same bytes and the same name (`kraftlab-<sha>.zip`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import re
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

# Distribution names an executor's Python needs (pip install them; `python -m venv` + pip is
# enough: no kraftlab, no pyarrow). The same list as the simulator's imports outside the
# standard library and kraftlab (tests/spark/test_ship.py).
EXECUTOR_REQUIREMENTS = ("crc32c", "msgpack", "structlog")
# Used when neither pyproject.toml nor the installed distribution says which packages exist.
CORE_PACKAGES = ("harness", "partition", "quorum")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def source_root() -> Path:
    """The directory holding the `harness` package (a checkout, site-packages, or a zip)."""
    return Path(__file__).resolve().parents[2]


def loaded_from_zip() -> Path | None:
    """The zip the running code was imported from (spark-submit --py-files), else None."""
    root = source_root()
    return root if root.is_file() and zipfile.is_zipfile(root) else None


def package_names(root: Path | None = None) -> tuple[str, ...]:
    """Top-level packages of kraftlab present under `root`, sorted."""
    root = root or source_root()
    names: set[str] = set()
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        config = tomllib.loads(pyproject.read_text())
        found = config.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {})
        for pattern in found.get("include", ()):
            names.add(re.split(r"[.*]", pattern, maxsplit=1)[0])
    else:
        mapping = importlib.metadata.packages_distributions()
        names.update(name for name, dists in mapping.items() if "kraftlab" in dists)
    names = names or set(CORE_PACKAGES)
    return tuple(sorted(n for n in names if (root / n / "__init__.py").is_file()))


def _files(root: Path, packages: tuple[str, ...]) -> list[Path]:
    out = []
    for name in packages:
        for path in (root / name).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                out.append(path)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def zip_bytes(root: Path | None = None) -> bytes:
    """The packages of `root` as a deterministic zip."""
    root = root or source_root()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _files(root, package_names(root)):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), _ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def build_zip(dest: Path, root: Path | None = None) -> Path:
    """Write the zip to `dest` (a file name ending in .zip, or a directory: then
    `dest/kraftlab-<sha>.zip`); returns its path."""
    data = zip_bytes(root)
    if dest.suffix != ".zip":
        dest.mkdir(parents=True, exist_ok=True)
        dest = dest / f"kraftlab-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest


def ship(spark: Any, workdir: Path | None = None) -> Path:
    """Add kraftlab's code to `spark` (a SparkSession) for every executor; returns the zip.

    Code that was itself imported from a zip (spark-submit --py-files) is shipped as that zip
    (Spark ignores a second add of the same file). Otherwise the zip is built in `workdir`
    (default: a temporary directory that lives as long as this process)."""
    path = loaded_from_zip()
    if path is None:
        path = build_zip(workdir or Path(tempfile.mkdtemp(prefix="kraftlab-ship-")))
    spark.sparkContext.addPyFile(str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.spark.ship OUT.zip`: the zip for spark-submit's --py-files."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].endswith(".zip"):
        print("usage: python -m harness.spark.ship OUT.zip", file=sys.stderr)
        return 2
    path = build_zip(Path(args[0]))
    print(f"{path} ({', '.join(package_names())}); executors also need: "
          f"{' '.join(EXECUTOR_REQUIREMENTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Install the Apache Kafka peer from Maven Central, pinned and checksummed.

`install()` asks Maven to resolve `pom.xml` (the pinned Kafka server, `kafka_2.13`, with
kafka-tools and their runtime dependencies) into a local repository inside the project's
`.peers/` folder (never the user's ~/.m2), copies the runtime jars into
`.peers/kafka/<version>/lib`, and checks every jar against `kafka.sha256` (the SHA-256 of each
jar, one `sha256sum` line per jar). Maven's own check (`-C`, strict: a jar whose SHA-1 differs
from Central's is an error) runs first; ours catches a changed dependency tree, a substituted
jar or a truncated file, and a jar too many or too few. Only a fully checked folder is moved
into place, so a half-done install never looks installed. An installed, checked folder is
reused (`installed()`): the second `install()` costs a listing and a stamp comparison.

Failures say what to do: no Java 17+ (`JAVA_HOME` or `java` on PATH), no Maven (`mvn`), Maven
unable to reach the registry (its own last lines are quoted), a checksum mismatch (the file
named). The whole resolution is bounded by MAVEN_TIMEOUT_S.

`.peers/` is the default root; `KRAFTLAB_PEERS_DIR` moves it (a shared cache, say).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.4.0"
HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LOCK = HERE / "kafka.sha256"
PROJECT_ROOT = HERE.parents[2]
# The dependency plugin pinned too, so the resolution itself does not float.
COPY_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
MAVEN_TIMEOUT_S = 900.0
JAVA_MIN = 17  # Kafka 4.x brokers and tools need Java 17 (KIP-1013)
STAMP = ".verified"


class InstallError(RuntimeError):
    """The peer cannot be installed or used here; the message says what to run."""


@dataclass(frozen=True)
class Install:
    version: str
    lib: Path  # every jar of the classpath
    java: str  # the java executable the peer runs on

    @property
    def classpath(self) -> str:
        return str(self.lib / "*")


def peers_root() -> Path:
    return Path(os.environ.get("KRAFTLAB_PEERS_DIR", PROJECT_ROOT / ".peers"))


def install_dir(version: str = KAFKA_VERSION) -> Path:
    return peers_root() / "kafka" / version


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` or `java` on PATH, at least Java JAVA_MIN; InstallError if not."""
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise InstallError(f"Java {JAVA_MIN} or newer is needed for the Apache Kafka peer and "
                           "none was found (no JAVA_HOME, no java on PATH): install it, e.g. "
                           "`apt-get install openjdk-17-jre-headless` (bash .ci/install does)")
    try:
        out = subprocess.run([candidate, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstallError(f"{candidate} -version failed: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):  # "1.8.0_..." is Java 8
        major = int(match.group(2))
    if major < JAVA_MIN:
        raise InstallError(f"{candidate} is Java {major or '?'}; the Apache Kafka peer needs "
                           f"Java {JAVA_MIN}+ (set JAVA_HOME to one)")
    return candidate


def read_lock(path: Path = LOCK) -> dict[str, str]:
    """{jar file name: sha256} from a `sha256sum`-format file."""
    lock: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise InstallError(f"{path}:{n}: not a `sha256  file` line: {line!r}")
        lock[name.strip()] = digest
    return lock


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_jars(lib: Path, lock: dict[str, str]) -> list[str]:
    """What differs between the jars in `lib` and the lock (empty: they match exactly)."""
    present = {p.name for p in lib.glob("*.jar")}
    problems = [f"missing {name}" for name in sorted(set(lock) - present)]
    problems += [f"not in the lock: {name}" for name in sorted(present - set(lock))]
    for name in sorted(present & set(lock)):
        got = sha256(lib / name)
        if got != lock[name]:
            problems.append(f"checksum mismatch: {name} is {got}, the lock says {lock[name]}")
    return problems


def _stamp(lock: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{d}  {n}\n" for n, d in sorted(lock.items())).encode()
                          ).hexdigest()


def installed(version: str = KAFKA_VERSION) -> Install | None:
    """The checked install of `version`, or None. Cheap: the stamp written after the full
    check names the lock it matched, and the jar names must be the lock's exactly."""
    lib = install_dir(version) / "lib"
    stamp = lib / STAMP
    if not stamp.exists():
        return None
    lock = read_lock()
    if stamp.read_text().strip() != _stamp(lock):
        return None
    if {p.name for p in lib.glob("*.jar")} != set(lock):
        return None
    return Install(version, lib, java_executable())


def require(version: str = KAFKA_VERSION) -> Install:
    """The install, or InstallError saying how to get it."""
    found = installed(version)
    if found is None:
        raise InstallError(f"Apache Kafka {version} is not installed under "
                           f"{install_dir(version)}: run `bash .ci/install` or "
                           "`kraftlab peer kafka install` (Maven Central, about 70 MB)")
    return found


def _maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise InstallError("Maven (`mvn`) is needed to install the Apache Kafka peer from "
                           "Maven Central: install it, e.g. `apt-get install maven` "
                           "(bash .ci/install does)")
    return mvn


def _resolve(out: Path, progress: Callable[[str], None]) -> None:
    """Maven copies the runtime jars of pom.xml into `out`; InstallError with its words."""
    repo = peers_root() / "m2"
    repo.mkdir(parents=True, exist_ok=True)
    cmd = [_maven(), "-B", "-q", "-C", "-Dstyle.color=never", f"-Dmaven.repo.local={repo}", "-f", str(POM), COPY_GOAL,
           f"-DoutputDirectory={out}", "-DincludeScope=runtime"]
    progress(f"resolving Apache Kafka {KAFKA_VERSION} with Maven into {repo}")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"Maven did not finish within {MAVEN_TIMEOUT_S:.0f} s resolving "
                           f"{POM.name} (is Maven Central reachable?)") from exc
    if done.returncode != 0:
        words = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
        raise InstallError(f"Maven could not resolve Apache Kafka {KAFKA_VERSION} "
                           f"(exit {done.returncode}); is Maven Central reachable? Its "
                           f"words:\n{words}")


def install(progress: Callable[[str], None] = lambda _m: None, *,
            write_lock: bool = False) -> Install:
    """Resolve, check and place the jars (or reuse a checked install). `write_lock`: write
    kafka.sha256 from what Maven resolved instead of checking against it (for a version
    change, whose new lock is then reviewed like code)."""
    java = java_executable()
    if not write_lock:
        found = installed()
        if found is not None:
            progress(f"Apache Kafka {KAFKA_VERSION} already installed in {found.lib}")
            return found
    target = install_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lib-", dir=target) as tmp:
        staged = Path(tmp) / "lib"
        _resolve(staged, progress)
        if write_lock:
            lines = [f"{sha256(p)}  {p.name}" for p in sorted(staged.glob("*.jar"))]
            LOCK.write_text("\n".join(lines) + "\n")
            progress(f"wrote {LOCK} ({len(lines)} jars)")
        lock = read_lock()
        problems = check_jars(staged, lock)
        if problems:
            raise InstallError("the jars Maven resolved do not match "
                               f"{LOCK.name}:\n  " + "\n  ".join(problems))
        (staged / STAMP).write_text(_stamp(lock) + "\n")
        lib = target / "lib"
        if lib.exists():
            shutil.rmtree(lib)
        staged.rename(lib)
    progress(f"Apache Kafka {KAFKA_VERSION}: {len(lock)} jars checked against {LOCK.name}, "
             f"in {lib}")
    return Install(KAFKA_VERSION, lib, java)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraftlab peer kafka install",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-lock", action="store_true",
                        help="write kafka.sha256 from what Maven resolves (a version change)")
    args = parser.parse_args(argv)
    try:
        install(lambda m: print(f"kafka peer: {m}", file=sys.stderr, flush=True),
                write_lock=args.write_lock)
    except InstallError as exc:
        print(f"kafka peer: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

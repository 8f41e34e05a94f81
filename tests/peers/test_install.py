"""The Apache Kafka peer's install (harness/peers/kafka/install.py): the jars must be exactly the
lock's, and every way a setup can be wrong (no install, no Java, a changed or missing jar, an
artifact Maven cannot resolve) ends in a message that says what to run, never a hang."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness.peers.kafka import install as inst

pytestmark = pytest.mark.kafka_peer


def test_the_lock_pins_the_release_the_pom_asks_for() -> None:
    lock = inst.read_lock()
    pom = inst.POM.read_text()
    assert f"<kafka.version>{inst.KAFKA_VERSION}</kafka.version>" in pom
    assert f"kafka_2.13-{inst.KAFKA_VERSION}.jar" in lock
    assert f"kafka-tools-{inst.KAFKA_VERSION}.jar" in lock
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in lock.values())


def test_the_installed_jars_are_exactly_the_lock() -> None:
    found = inst.installed()
    assert found is not None, "run `bash .ci/install`"
    assert inst.check_jars(found.lib, inst.read_lock()) == []


def _lib(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("a-1.0.jar", "b-2.0.jar"):
        (lib / name).write_bytes(name.encode())
    return lib, {p.name: inst.sha256(p) for p in lib.glob("*.jar")}


def test_check_jars_names_a_missing_a_changed_and_an_unlocked_jar(tmp_path: Path) -> None:
    lib, lock = _lib(tmp_path)
    assert inst.check_jars(lib, lock) == []
    (lib / "a-1.0.jar").write_bytes(b"tampered")
    (lib / "b-2.0.jar").unlink()
    (lib / "c-3.0.jar").write_bytes(b"extra")
    problems = inst.check_jars(lib, lock)
    assert problems[0] == "missing b-2.0.jar"
    assert problems[1] == "not in the lock: c-3.0.jar"
    assert problems[2].startswith("checksum mismatch: a-1.0.jar is ")
    assert len(problems) == 3


def test_a_lock_line_that_is_not_sha256sum_format_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "lock"
    bad.write_text(f"{'0' * 64}  ok.jar\nnot-a-digest  x.jar\n")
    with pytest.raises(inst.InstallError, match=r"lock:2: not a `sha256  file` line"):
        inst.read_lock(bad)


def test_no_install_says_to_run_ci_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.setenv("KRAFTLAB_PEERS_DIR", str(tmp_path))
    assert inst.installed() is None
    with pytest.raises(inst.InstallError, match=r"run `bash \.ci/install`"):
        inst.require()


def test_a_stamp_from_another_lock_is_not_an_install(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFTLAB_PEERS_DIR", str(tmp_path))
    lib = inst.install_dir() / "lib"
    lib.mkdir(parents=True)
    for name in inst.read_lock():
        (lib / name).write_bytes(b"")
    (lib / inst.STAMP).write_text("0" * 64 + "\n")
    assert inst.installed() is None


def test_no_java_says_which_java_and_how_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(inst.InstallError, match=r"Java 17 or newer .* none was found"):
        inst.java_executable()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    with pytest.raises(inst.InstallError, match="openjdk-17"):
        inst.java_executable()


def test_an_artifact_maven_cannot_resolve_fails_with_mavens_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real Maven run on a pom naming an artifact Maven Central does not have: the install
    fails within its bound and quotes Maven, and nothing is placed."""
    if shutil.which("mvn") is None:
        pytest.fail("Maven is not installed: run `bash .ci/install`", pytrace=False)
    pom = tmp_path / "pom.xml"
    pom.write_text(inst.POM.read_text().replace(
        f"<kafka.version>{inst.KAFKA_VERSION}</kafka.version>",
        "<kafka.version>0.0.0-no-such-release</kafka.version>"))
    monkeypatch.setattr(inst, "POM", pom)
    out = tmp_path / "lib"
    with pytest.raises(inst.InstallError, match=r"Maven could not resolve .*Maven Central") as e:
        inst._resolve(out, lambda _m: None)
    assert "0.0.0-no-such-release" in str(e.value)
    assert not out.exists() or not any(out.glob("*.jar"))

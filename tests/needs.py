"""What a test needs from the machine that `.ci/install` provides: missing, the test fails and
says to run the install, never skips (a skip would hide a missing install step)."""

from __future__ import annotations

import shutil

import pytest


def require_java() -> None:
    """Spark's driver and executors (and the Kafka peer) run on Java 17."""
    if shutil.which("java") is None:
        pytest.fail("Spark needs Java 17 and `java` is not on PATH: run `bash .ci/install`",
                    pytrace=False)


def require_lazyfs() -> None:
    """The lazy file system (harness/peers/lazyfs) mounts with FUSE: /dev/fuse, fusermount3
    and libfuse3 (Debian's fuse3)."""
    from harness.peers.lazyfs.mount import missing

    reason = missing()
    if reason is not None:
        pytest.fail(f"the lazy file system cannot mount here ({reason}): run "
                    "`bash .ci/install`", pytrace=False)

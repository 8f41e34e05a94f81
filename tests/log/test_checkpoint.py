"""Checkpoint files are never half-written: a crash at any step of the atomic replace leaves the
old or the new content (SimStorage, every step, with and without torn writes), and a real
process killed with SIGKILL in the middle of a write loop leaves a whole file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from harness.runtime.file_storage import FileStorage
from partition.log import checkpoint as cp
from partition.log.errors import CheckpointError
from partition.log.storage import SimStorage
from tests.log.crashpoints import CrashAt, Crashed

OLD = {("orders", 0): 10, ("orders", 1): 20}
NEW = {("orders", 0): 11, ("orders", 1): 25, ("pay", 3): 7}


def test_format_is_kafkas() -> None:
    sim = SimStorage()
    cp.write_offsets(sim, "recovery-point-offset-checkpoint", NEW)
    assert cp.read_whole(sim, "recovery-point-offset-checkpoint") == b"0\n3\norders 0 11\norders 1 25\npay 3 7\n"
    cp.write_epochs(sim, "leader-epoch-checkpoint", [(0, 0), (3, 120)])
    assert cp.read_whole(sim, "leader-epoch-checkpoint") == b"0\n2\n0 0\n3 120\n"
    assert cp.read_epochs(sim, "leader-epoch-checkpoint") == [(0, 0), (3, 120)]
    assert cp.read_offsets(sim, "absent") == {}


@pytest.mark.parametrize("text", [b"1\n0\n", b"0\n2\na 0 1\n", b"0\n1\na 0\n", b"0\n1\na x 1\n", b"\xff"])
def test_bad_checkpoint_is_a_clear_error(text: bytes) -> None:
    sim = SimStorage()
    sim.open("f").append(text)
    with pytest.raises(CheckpointError):
        cp.read_offsets(sim, "f")


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_crash_at_every_step_leaves_old_or_new(seed: int | None) -> None:
    step = 0
    while True:
        sim = SimStorage()
        sim.make_dirs("logs")
        cp.write_offsets(sim, "logs/replication-offset-checkpoint", OLD)
        wrapped = CrashAt(sim, step)
        try:
            cp.write_offsets(wrapped, "logs/replication-offset-checkpoint", NEW)  # type: ignore[arg-type]
            finished = True
        except Crashed:
            finished = False
        sim.crash(random.Random(seed) if seed is not None else None)
        got = cp.read_offsets(sim, "logs/replication-offset-checkpoint")
        assert got in (OLD, NEW), (step, got)
        if finished:
            assert got == NEW  # the last step (fsync dir) done: the new content is durable
            assert wrapped.steps == ["create", "truncate", "append", "fsync", "rename", "fsync_dir"]
            break
        step += 1


def test_stale_tmp_file_is_overwritten() -> None:
    sim = SimStorage()
    sim.open("f.tmp").append(b"garbage from a crash")
    cp.write_offsets(sim, "f", OLD)
    assert cp.read_offsets(sim, "f") == OLD


CHILD = textwrap.dedent(
    """
    import sys
    from partition.log import checkpoint as cp
    from harness.runtime.file_storage import FileStorage
    storage = FileStorage(sys.argv[1])
    i = 0
    while True:
        i += 1
        # 3000 lines all holding i: a half-written file would mix values or lose lines.
        cp.write_offsets(storage, "replication-offset-checkpoint", {("t", p): i for p in range(3000)})
        print(i, flush=True)
    """
)


def test_sigkill_mid_write_loop_leaves_a_whole_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                                text=True, cwd=os.getcwd())
        try:
            assert proc.stdout is not None
            last = 0
            for _ in range(5):  # block on the child's progress lines: no sleeps
                last = int(proc.stdout.readline())
            proc.send_signal(signal.SIGKILL)  # the child is somewhere in write number last+1
        finally:
            proc.kill()
            proc.wait(timeout=30)
        got = cp.read_offsets(FileStorage(str(tmp_path)), "replication-offset-checkpoint")
        values = set(got.values())
        assert len(got) == 3000 and len(values) == 1
        assert values.pop() in (last, last + 1, last + 2)

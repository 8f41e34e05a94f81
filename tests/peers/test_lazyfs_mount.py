"""The lazy file system mounted for real (harness/peers/lazyfs): a directory mounted over
itself, whose files lose at a power loss (kill -9 of the daemon) exactly what was not fsynced,
and keep everything at a clean unmount. The same calls a JVM makes: write, fsync, O_TRUNC,
O_APPEND, ftruncate, a shared memory map and msync, rename of files and directories."""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.peers.lazyfs import mount as lazy
from tests.needs import require_lazyfs

pytestmark = pytest.mark.integration


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[tuple[Path, list[int]]]:
    require_lazyfs()
    directory = tmp_path / "data"
    directory.mkdir()
    pids = [lazy.mount(directory)]
    try:
        yield directory, pids
    finally:
        lazy.power_loss(directory, pids[-1])  # by PID, whatever the test left
        assert not lazy.is_mounted(directory)


def write(path: Path, data: bytes, *, sync: bool, flags: int = os.O_CREAT | os.O_WRONLY) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_a_power_loss_keeps_exactly_what_was_fsynced(mounted: tuple[Path, list[int]]) -> None:
    d, pids = mounted
    assert lazy.is_mounted(d) and lazy.is_daemon(pids[0], d)
    write(d / "seg.log", b"synced|", sync=True)
    write(d / "seg.log", b"lost", sync=False, flags=os.O_WRONLY | os.O_APPEND)
    write(d / "never.log", b"never synced", sync=False)
    (d / "sub").mkdir()
    write(d / "sub" / "tmp", b"checkpoint", sync=True)
    os.rename(d / "sub" / "tmp", d / "sub" / "final")  # the checkpoint pattern: synced, renamed
    write(d / "moved.tmp", b"unsynced, then renamed", sync=False)
    os.rename(d / "moved.tmp", d / "moved")
    assert (d / "seg.log").read_bytes() == b"synced|lost"  # the writer sees its writes
    assert (d / "seg.log").stat().st_size == 11
    assert lazy.power_loss(d, pids[0])
    assert not lazy.is_mounted(d) and not lazy.is_daemon(pids[0], d)
    assert (d / "seg.log").read_bytes() == b"synced|"
    assert (d / "never.log").read_bytes() == b""  # the name is eager, the data lazy
    assert (d / "sub" / "final").read_bytes() == b"checkpoint"
    assert (d / "moved").read_bytes() == b""
    pids.append(lazy.mount(d))  # mounted again over what survived
    assert (d / "seg.log").read_bytes() == b"synced|"


def test_truncates_and_memory_maps_are_lazy_too(mounted: tuple[Path, list[int]]) -> None:
    d, pids = mounted
    write(d / "a.log", b"0123456789", sync=True)
    write(d / "a.log", b"new", sync=False, flags=os.O_WRONLY | os.O_TRUNC)
    assert (d / "a.log").read_bytes() == b"new"
    fd = os.open(d / "a.index", os.O_CREAT | os.O_RDWR, 0o644)
    os.ftruncate(fd, 2 * mmap.PAGESIZE)  # as Kafka sizes an index before mapping it
    m = mmap.mmap(fd, 2 * mmap.PAGESIZE)
    m[0:4] = b"SYNC"
    m.flush()  # msync, then fsync: the first page is on the disk
    os.fsync(fd)
    m[mmap.PAGESIZE:mmap.PAGESIZE + 4] = b"LOST"
    m.close()
    os.close(fd)
    lazy.power_loss(d, pids[0])
    assert (d / "a.log").read_bytes() == b"0123456789"  # the O_TRUNC was never synced
    index = (d / "a.index").read_bytes()
    assert len(index) == 2 * mmap.PAGESIZE and index[:4] == b"SYNC"
    assert index[mmap.PAGESIZE:mmap.PAGESIZE + 4] == bytes(4)


def test_a_clean_unmount_syncs_everything(mounted: tuple[Path, list[int]]) -> None:
    d, pids = mounted
    (d / "t-0").mkdir()
    write(d / "t-0" / "seg.log", b"pending at unmount", sync=False)
    os.rename(d / "t-0", d / "t-0.deleted")  # pending data follows a renamed directory
    lazy.unmount(d, pids[0])
    assert not lazy.is_mounted(d) and not lazy.is_daemon(pids[0], d)
    assert (d / "t-0.deleted" / "seg.log").read_bytes() == b"pending at unmount"
    pids.append(lazy.mount(d))


def test_a_clean_unmount_waits_out_a_file_still_open(mounted: tuple[Path, list[int]]) -> None:
    """A process just killed can hold its files a moment after /proc stops naming it: the
    unmount is retried while the mount is busy, and what was pending is still synced."""
    import threading

    d, pids = mounted
    fd = os.open(d / "held.log", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"written by the holder")
    closer = threading.Timer(0.5, os.close, (fd,))  # the holder lets go during the retries
    closer.start()
    try:
        lazy.unmount(d, pids[0])
    finally:
        closer.join()
    assert not lazy.is_mounted(d) and not lazy.is_daemon(pids[0], d)
    assert (d / "held.log").read_bytes() == b"written by the holder"
    pids.append(lazy.mount(d))


def test_a_power_loss_frees_files_deleted_while_open(mounted: tuple[Path, list[int]]) -> None:
    """libfuse keeps a file deleted while open as .fuse_hidden* until it is closed; a power
    loss closes nothing, so they are removed, as a file system's recovery frees them."""
    d, pids = mounted
    (d / "t-0").mkdir()
    fd = os.open(d / "t-0" / "old.log", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x")
    os.unlink(d / "t-0" / "old.log")  # still open: libfuse renames it aside
    lazy.power_loss(d, pids[0])
    with contextlib.suppress(OSError):
        os.close(fd)  # a descriptor of the dead mount: its close cannot flush (ENOTCONN)
    assert list((d / "t-0").iterdir()) == []
    os.rmdir(d / "t-0")  # the partition directory can go
    pids.append(lazy.mount(d))


def test_mounting_over_a_live_daemon_stops_it_cleanly_first(
    mounted: tuple[Path, list[int]]
) -> None:
    """A daemon whose PID nobody recorded (a start that failed before saving it) is found by
    its command line and unmounted cleanly, so its pending writes land before the new one
    serves the directory, never after."""
    d, pids = mounted
    write(d / "a.log", b"pending in the first daemon", sync=False)
    pids.append(lazy.mount(d))  # as if pids[0] had never been recorded
    assert not lazy.is_daemon(pids[0], d) and lazy.daemons_on(d) == [pids[1]]
    lazy.power_loss(d, pids[1])
    assert (d / "a.log").read_bytes() == b"pending in the first daemon"  # synced by the stop
    pids.append(lazy.mount(d))

"""SimStorage crash semantics (what harness/sim relies on) and FileStorage basics."""

from __future__ import annotations

import random

import pytest

from harness.runtime.file_storage import FileStorage
from partition.log.storage import SimStorage, StorageCrashed, StorageError, read_whole


def test_unsynced_bytes_are_lost_synced_survive() -> None:
    sim = SimStorage()
    sim.make_dirs("d")
    f = sim.open("d/a")
    f.append(b"hello ")
    f.fsync()
    sim.fsync_dir("d")
    f.append(b"world")
    assert sim.unsynced_bytes() == 5
    sim.crash()
    assert read_whole(sim, "d/a") == b"hello "
    with pytest.raises(StorageCrashed):
        f.append(b"x")


def test_directory_entries_need_fsync_dir() -> None:
    sim = SimStorage()
    sim.make_dirs("d")
    f = sim.open("d/new")
    f.append(b"data")
    f.fsync()  # content durable, but the name is not
    sim.crash()
    assert not sim.exists("d/new")

    f = sim.open("d/a")
    f.append(b"old")
    f.fsync()
    sim.fsync_dir("d")
    g = sim.open("d/a.tmp")
    g.append(b"new")
    g.fsync()
    sim.rename("d/a.tmp", "d/a")
    sim.crash()  # rename not made durable: old name and content
    assert read_whole(sim, "d/a") == b"old" and not sim.exists("d/a.tmp")

    sim.remove("d/a")
    sim.crash()  # remove not made durable: it comes back
    assert read_whole(sim, "d/a") == b"old"
    sim.remove("d/a")
    sim.fsync_dir("d")
    sim.crash()
    assert not sim.exists("d/a")


def test_torn_crash_keeps_an_ordered_prefix_and_is_deterministic() -> None:
    def run(seed: int) -> bytes:
        sim = SimStorage()
        f = sim.open("f")
        f.fsync()
        sim.fsync_dir(".")
        for i in range(5):
            f.append(bytes([65 + i]) * 10)
        sim.crash(random.Random(seed))
        return read_whole(sim, "f")

    full = b"".join(bytes([65 + i]) * 10 for i in range(5))
    outcomes = {run(seed) for seed in range(200)}
    assert all(full.startswith(o) for o in outcomes)  # never a hole, never garbage
    assert any(len(o) % 10 for o in outcomes)  # some torn writes
    assert len(outcomes) > 10
    assert run(7) == run(7)


def test_truncate_is_an_unsynced_operation_too() -> None:
    sim = SimStorage()
    f = sim.open("f")
    f.append(b"abcdef")
    f.fsync()
    sim.fsync_dir(".")
    f.truncate(2)
    assert f.read(0, 10) == b"ab"
    sim.crash()
    assert read_whole(sim, "f") == b"abcdef"


@pytest.mark.parametrize("make", [SimStorage, None])
def test_both_storages_same_interface(make, tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = make() if make else FileStorage(str(tmp_path))
    storage.make_dirs("x/y")
    f = storage.open("x/y/f")
    assert f.append(b"abc", memoryview(b"defg")[1:]) == 0
    assert f.append(bytearray(b"Z")) == 6
    assert f.read(2, 3) == b"cef" and f.size() == 7
    f.truncate(3)
    assert f.read(0, 100) == b"abc"
    f.fsync()
    f.close()
    storage.rename("x/y/f", "x/y/g")
    assert storage.list_dir("x/y") == ["g"] and storage.exists("x/y/g")
    storage.fsync_dir("x/y")
    storage.remove("x/y/g")
    assert not storage.exists("x/y/g")
    with pytest.raises(StorageError):
        storage.open("x/y/missing", create=False)
    with pytest.raises(StorageError):
        storage.remove("x/y/missing")


def test_preallocated_file_keeps_its_exact_size_and_gives_the_space_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`preallocate=True` reserves blocks past the end (FALLOC_FL_KEEP_SIZE): size and content
    stay exactly what was appended; truncate(size) and close give the reserved blocks back."""
    import os

    storage = FileStorage(str(tmp_path))
    f = storage.open("seg.log", preallocate=True)
    chunks = [bytes([i]) * (1000 + i) for i in range(100)]
    for chunk in chunks:
        f.append(chunk)
    expected = b"".join(chunks)
    path = f"{tmp_path}/seg.log"
    assert f.size() == os.stat(path).st_size == len(expected)
    assert f.read(0, len(expected) + 100) == expected
    if os.stat(path).st_blocks * 512 <= len(expected) + 4096:
        pytest.skip("no fallocate here: appends go on without a reservation")
    f.truncate(f.size())  # same size: only the reservation goes
    assert os.stat(path).st_size == len(expected) and f.read(0, 1 << 20) == expected
    assert os.stat(path).st_blocks * 512 < len(expected) + 4096
    f.append(b"tail")  # reserves again, from the end
    assert os.stat(path).st_blocks * 512 > len(expected) + 4096
    f.truncate(500)  # a real cut: content and reservation both go
    assert f.read(0, 1 << 20) == expected[:500] and os.stat(path).st_size == 500
    f.append(b"more")
    f.close()
    assert os.stat(path).st_size == 504 and os.stat(path).st_blocks * 512 <= 4096 * 2
    assert read_whole(storage, "seg.log") == expected[:500] + b"more"
    plain = storage.open("plain")  # not asked to preallocate: nothing reserved
    plain.append(expected)
    assert os.stat(f"{tmp_path}/plain").st_blocks * 512 < len(expected) + 4096
    plain.close()

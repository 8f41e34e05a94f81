"""A Storage wrapper that raises `Crashed` at the N-th mutating call, so a test can crash a
SimStorage at every step of an operation (the step itself does not happen)."""

from __future__ import annotations

from typing import Any

from partition.log.storage import SimStorage, StorageFile


class Crashed(Exception):
    pass


class _File:
    def __init__(self, owner: CrashAt, inner: StorageFile) -> None:
        self._owner = owner
        self._inner = inner

    @property
    def path(self) -> str:
        return self._inner.path

    def append(self, *buffers: Any) -> int:
        self._owner.step("append")
        return self._inner.append(*buffers)

    def read(self, position: int, size: int) -> bytes:
        return self._inner.read(position, size)

    def size(self) -> int:
        return self._inner.size()

    def fsync(self) -> None:
        self._owner.step("fsync")
        self._inner.fsync()

    def truncate(self, size: int) -> None:
        self._owner.step("truncate")
        self._inner.truncate(size)

    def close(self) -> None:
        self._inner.close()


class CrashAt:
    """Counts mutating calls; the call numbered `crash_at` (0-based) raises Crashed instead."""

    def __init__(self, sim: SimStorage, crash_at: int | None) -> None:
        self.sim = sim
        self.crash_at = crash_at
        self.steps: list[str] = []

    def step(self, name: str) -> None:
        if self.crash_at is not None and len(self.steps) == self.crash_at:
            raise Crashed(name)
        self.steps.append(name)

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        if create and not self.sim.exists(path):
            self.step("create")
        return _File(self, self.sim.open(path, create=create, preallocate=preallocate, zero_fill=zero_fill))

    def exists(self, path: str) -> bool:
        return self.sim.exists(path)

    def list_dir(self, path: str) -> list[str]:
        return self.sim.list_dir(path)

    def make_dirs(self, path: str) -> None:
        self.sim.make_dirs(path)

    def rename(self, source: str, target: str) -> None:
        self.step("rename")
        self.sim.rename(source, target)

    def remove(self, path: str) -> None:
        self.step("remove")
        self.sim.remove(path)

    def remove_dir(self, path: str) -> None:
        self.step("remove_dir")
        self.sim.remove_dir(path)

    def fsync_dir(self, path: str) -> None:
        self.step("fsync_dir")
        self.sim.fsync_dir(path)

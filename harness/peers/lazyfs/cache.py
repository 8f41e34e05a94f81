"""The page cache of a lazy file system: what was written but not yet fsynced, per file.

A process's writes to a file reach the disk only when it fsyncs (or the OS writes its dirty
pages back); a power loss loses the rest. `PageCache` holds, per file (by its path under the
mount), the operations not yet on the disk, in order: writes (offset, bytes) and truncates
(size). The backing file holds exactly what was synced. A read is the backing bytes with the
pending operations laid over them; `take` hands a file's pending operations over for the
fsync that applies them; a power loss is losing the `PageCache` object (the daemon's memory).

What this model keeps and what it does not (docs/lazyfs.md):
- file data is lazy: a write or truncate is lost unless an fsync of that file follows it;
  unlike Linux, nothing is ever written back on its own (no dirty_expire_centisecs), so a
  power loss loses every byte not fsynced: the worst case, and kraftlab's own
  `kraftlab.log.unflushed.in.process` model;
- the namespace is eager: creating, renaming and deleting files and directories reach the
  backing directory at once, as if the file system's journal committed them before
  answering, so a renamed file keeps its pending data under its new name and a deleted one
  loses it.

Pure: no I/O (the caller reads the backing file and gives its bytes), so it is tested on its
own (tests/peers/test_lazyfs_cache.py, a Hypothesis state machine against a plain model).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Write:
    offset: int
    data: bytearray


@dataclass(slots=True)
class Truncate:
    size: int


Op = Write | Truncate


@dataclass(slots=True)
class Dirty:
    """One file's pending operations and its size as the writer sees it."""

    size: int
    ops: list[Op] = field(default_factory=list)


class PageCache:
    """Pending (unsynced) operations by file path (module docstring)."""

    def __init__(self) -> None:
        self.files: dict[str, Dirty] = {}

    def __contains__(self, path: str) -> bool:
        return path in self.files

    def size(self, path: str, synced_size: int) -> int:
        """The file's size as the writer sees it (`synced_size`: the backing file's)."""
        dirty = self.files.get(path)
        return synced_size if dirty is None else dirty.size

    def _dirty(self, path: str, synced_size: int) -> Dirty:
        dirty = self.files.get(path)
        if dirty is None:
            dirty = self.files[path] = Dirty(synced_size)
        return dirty

    def write(self, path: str, offset: int, data: bytes, synced_size: int) -> None:
        if not data:
            return
        dirty = self._dirty(path, synced_size)
        last = dirty.ops[-1] if dirty.ops else None
        if isinstance(last, Write) and last.offset + len(last.data) == offset:
            last.data += data  # an append to the last write: one run
        else:
            dirty.ops.append(Write(offset, bytearray(data)))
        dirty.size = max(dirty.size, offset + len(data))

    def truncate(self, path: str, size: int, synced_size: int) -> None:
        dirty = self._dirty(path, synced_size)
        dirty.ops.append(Truncate(size))
        dirty.size = size

    def read(self, path: str, offset: int, length: int, synced: bytes, synced_size: int) -> bytes:
        """`length` bytes at `offset` as the writer sees them: `synced` is the backing file's
        bytes at `offset` (up to `length`), `synced_size` its size."""
        dirty = self.files.get(path)
        if dirty is None:
            return synced[:max(0, min(length, synced_size - offset))]
        end = offset + length
        buf = bytearray(synced[:length])
        buf.extend(bytes(length - len(buf)))
        size = synced_size
        for op in dirty.ops:
            if isinstance(op, Truncate):
                if op.size < end:  # what lay beyond is gone; a later write may re-extend
                    cut = max(op.size - offset, 0)
                    buf[cut:] = bytes(length - cut)
                size = op.size
                continue
            lo, hi = max(op.offset, offset), min(op.offset + len(op.data), end)
            if lo < hi:
                buf[lo - offset:hi - offset] = op.data[lo - op.offset:hi - op.offset]
            size = max(size, op.offset + len(op.data))
        return bytes(buf[:max(0, min(length, size - offset))])

    def take(self, path: str) -> list[Op]:
        """The file's pending operations, in order, for the fsync that applies them; the file
        is clean afterwards."""
        dirty = self.files.pop(path, None)
        return [] if dirty is None else dirty.ops

    def paths(self) -> list[str]:
        return sorted(self.files)

    def rename(self, old: str, new: str) -> None:
        """A file or directory renamed: its pending data (and its files') moves with it; what
        `new` replaced is gone."""
        self.unlink(new)
        for path in [p for p in self.files if p == old or p.startswith(old + "/")]:
            self.files[new + path[len(old):]] = self.files.pop(path)

    def unlink(self, path: str) -> None:
        """A file or directory deleted: its pending data (and its files') is gone."""
        for p in [p for p in self.files if p == path or p.startswith(path + "/")]:
            del self.files[p]

"""The Storage seam: the only way partition/log touches a disk (docs/storage.md: storage follows the
same seam as the cores).

A `Storage` is a tiny filesystem: files addressed by '/'-separated string paths, opened as
`StorageFile` handles that append, read at a position, report their size, fsync and truncate;
plus directory operations (list, make, rename a file or a directory, remove a file, remove an
empty directory, exists, fsync a directory).

Implementations: `SimStorage` here; the real ones, which touch the operating system, live with
the runtime in harness/runtime/file_storage.py (a core imports no os: tests/test_architecture.py):

- `FileStorage`: the real thing (os.open/os.writev/os.pread/os.fsync). `fsync_dir` opens the
  directory and fsyncs it, so a create, rename or remove survives power loss. A file opened with
  `preallocate=True` (the segments' .log files) reserves disk blocks ahead of its end as it grows,
  with fallocate(2) and FALLOC_FL_KEEP_SIZE where the platform has it (Linux): the file's size
  and content are exactly what was appended, so readers, truncation, recovery and the crash model
  see nothing of it; only the filesystem's per-append block reservation is saved (delayed
  allocation on ext4: a buffered append into reserved blocks costs about a fifth less, see
  docs/benchmarks.md "Log storage"). How far ahead: as much as the file holds, between
  PREALLOCATE_MIN_BYTES and PREALLOCATE_MAX_BYTES, so a quiet log reserves little. The blocks
  past the end are given back by `truncate(size)` (the log cuts a sealed segment to its size)
  and by `close`; a crash leaves them to the segment's next truncation or close.
  A file opened with `zero_fill=True` (the segments of a log with `LogConfig.preallocate`: the
  Raft metadata log) is preallocated the way Kafka's `log.preallocate` does it, with the size
  made to cover what comes next: zeros are written ahead of the logical end,
  ZERO_FILL_CHUNK_BYTES at a time, appends overwrite them at the logical end (pwrite, no
  O_APPEND), and `fsync` is fdatasync while the appended bytes lie inside zeros already made
  durable (the file's size and blocks are on disk: only the data goes out, not the inode; one
  block write instead of two), fsync otherwise (once per chunk). `size()` and `read` see only
  what was appended. `truncate(size())` and `close` cut the zero tail off; a crash leaves it on
  disk, after the last appended byte, for the reader to find: the segment's recovery takes the
  first position where no valid batch starts as the end (docs/storage.md, "Crash recovery").
  Which sync is used only changes the cost: fdatasync also writes a size or block map change a
  later read needs (fdatasync(2)), so a file whose zeros were cut by another handle stays safe.
- `BufferedFileStorage`: FileStorage whose appends stay in process memory until fsync, so that
  kill -9 of a real process loses the unflushed tail (the real-process nemesis crash-unflushed).
- `SimStorage`: bytes in memory for harness/sim and crash tests. It models what a crash can lose:

  * file *contents* are durable only up to the last `fsync()` of that file; writes since then are
    kept as an ordered list of pending operations;
  * directory *entries* (a create, a rename, a remove) are durable only once the parent directory
    was fsynced (`fsync_dir`) after the change; a renamed file whose directory was not fsynced
    comes back under its old name after a crash, a removed one comes back, a created one vanishes;
  * `crash(rng)` applies all that: every open handle becomes invalid (`StorageCrashed`), each
    file reverts to its durable content, and the directory tree to its durable entries. With
    `rng=None` every unsynced byte is lost. With a seeded `random.Random`, each file keeps a random
    prefix of its pending operations, in order (disks write back in order), and the first dropped
    write may survive as a torn prefix of random length: the "torn last write". The same rng state
    gives the same result, so a simulator seed reproduces the crash exactly.
  * directories themselves (`make_dirs`) are durable at once: a simplification, the log never
    depends on a directory's creation being lost;
  * a `zero_fill` file is extended as on disk: a write of `zero_fill_chunk_bytes` zeros past the
    end, then appends over them at the logical end, each a pending operation in order, so a
    crash can keep the zeros and lose or tear the appends after them (a zero tail, or a torn
    batch followed by zeros); what was fsynced is never lost (zeros go only past the logical
    end, and the trim on close or seal cuts only zeros).

Invariants: `StorageFile.append` returns the position the data was written at and the file grows
by exactly the bytes given (FileStorage loops on short writes); `read(position, size)` returns
fewer bytes only at end of file.
"""

from __future__ import annotations

import posixpath
import random
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview


class StorageError(Exception):
    """Misuse of a storage path (missing file, file exists, not a directory)."""


class StorageCrashed(StorageError):
    """A handle opened before a simulated crash was used after it."""


class StorageFile(Protocol):
    """An open file. Handles are not shared across threads."""

    @property
    def path(self) -> str: ...

    def append(self, *buffers: Buffer) -> int:
        """Write the buffers, concatenated, at the end of the file. Returns the position written at."""
        ...

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position` (fewer only at end of file)."""
        ...

    def size(self) -> int: ...

    def fsync(self) -> None:
        """Make this file's content durable (not its directory entry: see `Storage.fsync_dir`)."""
        ...

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (never grows it), giving back space preallocated past it."""
        ...

    def close(self) -> None: ...


class Storage(Protocol):
    """A filesystem. Paths are strings joined with '/'."""

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        """Open a file for append and read, creating it (empty) if `create` and missing.
        `preallocate`: a hint that the file grows by appends for a long time (a segment), so
        disk space may be reserved past its end; its size and content are unaffected.
        `zero_fill`: zeros are written ahead of the end (module docstring); this handle's size
        and reads exclude them, but a crash may leave them after the last append."""
        ...

    def exists(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]:
        """Names (not paths) in a directory, sorted."""
        ...

    def make_dirs(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None:
        """Atomically move `source` to `target`, replacing `target` if present."""
        ...

    def remove(self, path: str) -> None: ...

    def remove_dir(self, path: str) -> None:
        """Remove an empty directory (StorageError if it is missing or not empty)."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory `path` (creates, renames, removes) durable."""
        ...


def read_whole(storage: Storage, path: str) -> bytes:
    """All bytes of a file (small files: checkpoints, snapshots)."""
    handle = storage.open(path, create=False)
    try:
        return handle.read(0, handle.size())
    finally:
        handle.close()


# ---------------------------------------------------------------------------------- simulated


@dataclass(slots=True, eq=False)
class _Inode:
    """File content: `data` is what readers see; `durable` what survives a crash; `pending` the
    operations since the last fsync, in order: ("w", position, bytes) or ("t", size).
    `zero_tail`: how many bytes at the end of `data` are zero fill, not appended (a zero_fill
    handle's size excludes them; a crash forgets the count, not the zeros)."""

    data: bytearray = field(default_factory=bytearray)
    durable: bytearray = field(default_factory=bytearray)
    pending: list[tuple[str, int, bytes]] = field(default_factory=list)
    zero_tail: int = 0


def _cut(inode: _Inode, size: int) -> None:
    """Cut `data` to `size`; what is left of the zero tail stays one."""
    logical = len(inode.data) - inode.zero_tail
    del inode.data[size:]
    inode.zero_tail = max(0, len(inode.data) - logical)


def _apply(target: bytearray, op: tuple[str, int, bytes]) -> None:
    kind, arg, payload = op
    if kind == "w":
        end = arg + len(payload)
        if len(target) < arg:
            target.extend(b"\0" * (arg - len(target)))
        target[arg:end] = payload
    else:
        del target[arg:]


class _SimFile:
    __slots__ = ("_generation", "_inode", "_path", "_storage", "_zero_fill")

    def __init__(self, storage: SimStorage, path: str, inode: _Inode, zero_fill: bool = False) -> None:
        self._storage = storage
        self._path = path
        self._inode = inode
        self._generation = storage.generation
        self._zero_fill = zero_fill

    def _node(self) -> _Inode:
        if self._generation != self._storage.generation:
            raise StorageCrashed(f"handle for {self._path} opened before a crash")
        return self._inode

    @property
    def path(self) -> str:
        return self._path

    def append(self, *buffers: Buffer) -> int:
        inode = self._node()
        payload = b"".join(bytes(memoryview(b).cast("B")) for b in buffers)
        if self._zero_fill:
            return self._append_over_zeros(inode, payload)
        position = len(inode.data)
        inode.data += payload
        inode.pending.append(("w", position, payload))
        inode.zero_tail = 0  # appended after them: the zeros are content now
        return position

    def _append_over_zeros(self, inode: _Inode, payload: bytes) -> int:
        """Zero fill as FileStorage does it: zeros past the end first (one pending write), then
        the payload over them at the logical end (another)."""
        position = len(inode.data) - inode.zero_tail
        if len(payload) > inode.zero_tail:
            zeros = bytes(len(payload) - inode.zero_tail + self._storage.zero_fill_chunk_bytes)
            inode.pending.append(("w", len(inode.data), zeros))
            inode.data += zeros
            inode.zero_tail += len(zeros)
        inode.data[position : position + len(payload)] = payload
        inode.pending.append(("w", position, payload))
        inode.zero_tail -= len(payload)
        return position

    def read(self, position: int, size: int) -> bytes:
        return bytes(self._node().data[position : min(position + size, self.size())])

    def size(self) -> int:
        inode = self._node()
        return len(inode.data) - inode.zero_tail if self._zero_fill else len(inode.data)

    def fsync(self) -> None:
        inode = self._node()
        for op in inode.pending:
            _apply(inode.durable, op)
        inode.pending.clear()
        self._storage.fsync_count += 1

    def truncate(self, size: int) -> None:
        inode = self._node()
        if size < self.size() or (self._zero_fill and size == self.size() and inode.zero_tail):
            _cut(inode, size)  # on a zero_fill handle, truncate(size()) cuts the zero tail
            inode.pending.append(("t", size, b""))

    def close(self) -> None:
        if self._zero_fill and self._generation == self._storage.generation and self._inode.zero_tail:
            self.truncate(self.size())


class SimStorage:
    """In-memory storage with crash semantics (see the module docstring). Deterministic: no
    clock, no global randomness; `crash` draws only from the rng it is given.

    Counters for tests and the simulator: `fsync_count` (file fsyncs), `fsync_dir_count`.
    """

    def __init__(self, zero_fill_chunk_bytes: int = 4096) -> None:
        self.zero_fill_chunk_bytes = zero_fill_chunk_bytes  # small: a simulated crash often hits zeros
        self._files: dict[str, _Inode] = {}  # visible namespace: path -> inode
        self._durable: dict[str, _Inode] = {}  # namespace as it would be after a crash
        self._dirs: set[str] = {"", "/", "."}
        self.generation = 0
        self.fsync_count = 0
        self.fsync_dir_count = 0

    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath(path)  # "" -> "."

    @staticmethod
    def _parent(path: str) -> str:
        return posixpath.dirname(path) or "."

    def _check_dir(self, path: str) -> None:
        parent = self._parent(path)
        if parent not in self._dirs:
            raise StorageError(f"no such directory: {parent}")

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        path = self._norm(path)
        inode = self._files.get(path)
        if inode is None:
            if not create:
                raise StorageError(f"no such file: {path}")
            self._check_dir(path)
            inode = self._files[path] = _Inode()
        return _SimFile(self, path, inode, zero_fill)

    def exists(self, path: str) -> bool:
        path = self._norm(path)
        return path in self._files or path in self._dirs

    def list_dir(self, path: str) -> list[str]:
        path = self._norm(path)
        if path not in self._dirs:
            raise StorageError(f"no such directory: {path}")
        names = {posixpath.basename(p) for p in self._files if self._parent(p) == path}
        names |= {posixpath.basename(d) for d in self._dirs
                  if d not in (path, "", "/", ".") and self._parent(d) == path}
        return sorted(names)

    def make_dirs(self, path: str) -> None:
        path = self._norm(path)
        while path not in self._dirs:
            self._dirs.add(path)
            path = self._parent(path)

    def rename(self, source: str, target: str) -> None:
        source, target = self._norm(source), self._norm(target)
        if source in self._dirs and source not in ("", "/", "."):
            self._rename_dir(source, target)
            return
        if source not in self._files:
            raise StorageError(f"no such file: {source}")
        self._check_dir(target)
        self._files[target] = self._files.pop(source)

    def _rename_dir(self, source: str, target: str) -> None:
        """A directory moves with everything in it. Its entries stay durable under the new name
        (one inode, as on a real filesystem); the move itself is durable at once, like make_dirs
        (a simplification: the log never depends on a directory rename being lost)."""
        if target in self._dirs or target in self._files:
            raise StorageError(f"rename target exists: {target}")
        self._check_dir(target)
        prefix = source + "/"

        def moved(path: str) -> str:
            return target + path[len(source):]

        self._dirs = {moved(d) if d == source or d.startswith(prefix) else d for d in self._dirs}
        for table in (self._files, self._durable):
            for path in [p for p in table if p.startswith(prefix)]:
                table[moved(path)] = table.pop(path)

    def remove(self, path: str) -> None:
        path = self._norm(path)
        if path not in self._files:
            raise StorageError(f"no such file: {path}")
        del self._files[path]

    def remove_dir(self, path: str) -> None:
        path = self._norm(path)
        if path not in self._dirs:
            raise StorageError(f"no such directory: {path}")
        if self.list_dir(path):
            raise StorageError(f"directory not empty: {path}")
        self._dirs.discard(path)

    def fsync_dir(self, path: str) -> None:
        path = self._norm(path)
        for p in [p for p in self._durable if self._parent(p) == path]:
            del self._durable[p]
        for p, inode in self._files.items():
            if self._parent(p) == path:
                self._durable[p] = inode
        self.fsync_dir_count += 1

    # -- crash ---------------------------------------------------------------------------------

    def crash(self, rng: random.Random | None = None) -> None:
        """Lose everything not made durable; invalidate every open handle. See module docstring."""
        self.generation += 1
        survivors: dict[str, _Inode] = {}
        seen: dict[int, _Inode] = {}
        for path in sorted(self._durable):
            inode = self._durable[path]
            if id(inode) not in seen:  # one inode may have two durable names; recover it once
                seen[id(inode)] = self._recover_inode(inode, rng)
            survivors[path] = seen[id(inode)]
        self._files = dict(survivors)
        self._durable = dict(survivors)

    @staticmethod
    def _recover_inode(inode: _Inode, rng: random.Random | None) -> _Inode:
        content = bytearray(inode.durable)
        if rng is not None and inode.pending:
            keep = rng.randint(0, len(inode.pending))
            for op in inode.pending[:keep]:
                _apply(content, op)
            if keep < len(inode.pending):
                kind, position, payload = inode.pending[keep]
                if kind == "w" and payload:
                    torn = rng.randint(0, len(payload) - 1)
                    _apply(content, ("w", position, payload[:torn]))
        return _Inode(data=bytearray(content), durable=bytearray(content))

    # -- helpers for tests and the simulator ---------------------------------------------------

    def unsynced_bytes(self) -> int:
        """Bytes written but not yet fsynced, over all files (0 after a full flush)."""
        return sum(len(op[2]) for inode in self._files.values() for op in inode.pending)

    def corrupt(self, path: str, position: int, value: int) -> None:
        """Overwrite one byte, durably (a bit rot for tests; not a normal write)."""
        inode = self._files[self._norm(path)]
        inode.data[position] = value
        if position < len(inode.durable):
            inode.durable[position] = value

    def cut(self, path: str, size: int) -> None:
        """Truncate a file durably (simulates a torn tail already on disk)."""
        inode = self._files[self._norm(path)]
        _cut(inode, size)
        del inode.durable[size:]
        inode.pending = [op for op in inode.pending if op[0] == "t" or op[1] < size]

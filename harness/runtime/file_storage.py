"""The real Storage (partition/log/storage.py has the seam, its contract and SimStorage):
`FileStorage` over os.open/os.writev/os.pread/os.fsync, with block preallocation and the
zero-filled files of `LogConfig.preallocate`, and `BufferedFileStorage`, whose appends wait in
process memory until fsync. What each guarantees is written in partition/log/storage.py's
docstring and docs/storage.md; this module is the only one that touches the disk for a log.
"""

from __future__ import annotations

import ctypes
import os
import posixpath
from collections.abc import Callable

from partition.log.storage import Buffer, StorageError, StorageFile

_writev = os.writev  # bound once: append is on the hot path
_write = os.write
_JOIN_BELOW_BYTES = 4096
PREALLOCATE_MIN_BYTES = 64 << 10
PREALLOCATE_MAX_BYTES = 8 << 20
_FALLOC_FL_KEEP_SIZE = 0x01  # linux/falloc.h


def _find_fallocate() -> Callable[[int, int, int, int], int] | None:
    """fallocate(2) of the C library (glibc's 64-bit-offset entry point), None where there is
    none: the os module offers only posix_fallocate, which grows the file's size."""
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate64
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _find_fallocate()


class _OsFile:
    __slots__ = ("_fd", "_path", "_preallocate", "_reserved", "_size")
    _FLAGS = os.O_RDWR | os.O_APPEND

    def __init__(self, path: str, create: bool, preallocate: bool = False) -> None:
        flags = self._FLAGS | (os.O_CREAT if create else 0)
        try:
            self._fd = os.open(path, flags, 0o644)
        except FileNotFoundError as exc:
            raise StorageError(f"no such file: {path}") from exc
        self._path = path
        self._size = os.fstat(self._fd).st_size
        self._preallocate = preallocate and _FALLOCATE is not None
        self._reserved = 0  # end of the space this handle reserved; <= _size: none past the end

    @property
    def path(self) -> str:
        return self._path

    def append(self, *buffers: Buffer) -> int:
        position = self._size
        if len(buffers) == 1:  # the log's small appends come joined already: one write(2)
            data = buffers[0]
            end = position + len(data)  # byte buffers only: len() is their size
            if end > self._reserved and self._preallocate:
                self._reserve(end)
            written = _write(self._fd, data)
            if written < end - position:
                self._write_rest(data, written)
            self._size = end
            return position
        return self._append_buffers(position, buffers)

    def _append_buffers(self, position: int, buffers: tuple[Buffer, ...]) -> int:
        total = sum(map(len, buffers))
        if position + total > self._reserved and self._preallocate:
            self._reserve(position + total)
        if total <= _JOIN_BELOW_BYTES:
            # One small write: joining a few hundred bytes and calling write(2) costs about half
            # of Python's writev (which allocates iovec and buffer arrays per call).
            buffers = (b"".join(buffers),)
            written = _write(self._fd, buffers[0])
        else:
            written = _writev(self._fd, buffers)
        if written < total:
            self._write_rest(b"".join(buffers), written)
        self._size = position + total
        return position

    def _write_rest(self, data: Buffer, written: int) -> None:
        """A short write: finish the rest of `data`, in order."""
        rest = memoryview(data)[written:]
        while rest:
            rest = rest[os.write(self._fd, rest) :]

    def _reserve(self, end: int) -> None:
        """Reserve blocks from the end of the file to past `end`, keeping the size (module
        docstring). A failure (no space left, a filesystem without fallocate) only ends the
        preallocation for this handle: the append itself goes on, as it would without it."""
        ahead = min(PREALLOCATE_MAX_BYTES, max(PREALLOCATE_MIN_BYTES, end))
        assert _FALLOCATE is not None  # _preallocate is False without it
        if _FALLOCATE(self._fd, _FALLOC_FL_KEEP_SIZE, self._size, end + ahead - self._size) != 0:
            self._preallocate = False
            return
        self._reserved = end + ahead

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def size(self) -> int:
        return self._size

    def fsync(self) -> None:
        os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        if size < self._size:
            os.ftruncate(self._fd, size)  # frees blocks reserved past `size` too (ext4, xfs)
            self._size = size
            self._reserved = min(self._reserved, size)
        elif size == self._size and self._reserved > size:
            self._release()

    def _release(self) -> None:
        """Give back the blocks reserved past the end: a truncate to the size the file has on
        disk (not the one this handle believes: a stale handle must never cut what another
        handle appended since)."""
        os.ftruncate(self._fd, os.fstat(self._fd).st_size)
        self._reserved = 0

    def close(self) -> None:
        if self._fd >= 0:
            if self._reserved > self._size:
                self._release()
            os.close(self._fd)
            self._fd = -1


ZERO_FILL_CHUNK_BYTES = 1 << 20
_PAGE_BYTES = 4096
_pwrite = os.pwrite
_fsync = os.fsync  # module attributes: the seam a test counts the two syncs through
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync: fsync there
_ZEROS: list[memoryview] = []  # ZERO_FILL_CHUNK_BYTES zeros, made on first use


def _zeros() -> memoryview:
    if not _ZEROS:
        _ZEROS.append(memoryview(bytes(ZERO_FILL_CHUNK_BYTES)))
    return _ZEROS[0]


class _ZeroFilledOsFile(_OsFile):
    """A segment file preallocated with zeros (module docstring, `zero_fill`). `_size` is the
    logical size (what was appended), `_end` the file's size as this handle left it (zeros from
    `_size` to `_end`), `_durable_end` how far size and zeros are known durable (0: not known,
    so the next sync is a full fsync)."""

    __slots__ = ("_durable_end", "_end", "_zero_fill")
    _FLAGS = os.O_RDWR  # appends go at the logical end with pwrite, inside the zeros

    def __init__(self, path: str, create: bool) -> None:
        super().__init__(path, create)
        self._end = self._size  # a zero tail left by a crash is the reader's to find and cut
        self._durable_end = 0
        self._zero_fill = True

    def append(self, *buffers: Buffer) -> int:
        position = self._size
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers)
        end = position + len(data)  # byte buffers only: len() is their size
        if end > self._end:
            self._extend(end)
        written = _pwrite(self._fd, data, position)
        if written < end - position:
            rest = memoryview(data)[written:]
            while rest:
                written += _pwrite(self._fd, rest, position + written)
                rest = memoryview(data)[written:]
        self._size = end
        if end > self._end:  # zero fill given up (_extend): the file grew by the append
            self._end = end
        return position

    def _extend(self, end: int) -> None:
        """Write zeros from the file's end to ZERO_FILL_CHUNK_BYTES past `end` (page-aligned).
        Not synced here: the next `fsync` is a full one, which makes them durable once. A
        failure (no space left) cuts the partial zeros off and ends zero fill for this handle;
        the append goes on and grows the file, as without it."""
        if not self._zero_fill:
            return
        target = (end + ZERO_FILL_CHUNK_BYTES + _PAGE_BYTES - 1) // _PAGE_BYTES * _PAGE_BYTES
        zeros = _zeros()
        at = max(self._end, end)  # [_end, end) is about to be written by the append itself
        try:
            while at < target:
                at += _pwrite(self._fd, zeros[: target - at], at)
        except OSError:
            os.ftruncate(self._fd, self._end)
            self._zero_fill = False
            return
        self._end = target

    def read(self, position: int, size: int) -> bytes:
        size = min(size, self._size - position)  # never the zeros past the logical end
        return os.pread(self._fd, size, position) if size > 0 else b""

    def fsync(self) -> None:
        if self._size <= self._durable_end:
            _fdatasync(self._fd)  # size and blocks already durable: the data alone
        else:
            _fsync(self._fd)
            self._durable_end = self._end

    def truncate(self, size: int) -> None:
        if size < self._size:
            os.ftruncate(self._fd, size)  # the zero tail goes with the cut
            self._size = self._end = size
            self._durable_end = 0
        elif size == self._size and self._end > size:
            self._trim()

    def _trim(self) -> None:
        """Cut the zero tail: the file ends at the logical size again (a seal, a close). Only
        zeros are cut: if the bytes past this handle's end are not all zero (another handle
        appended there since), the file is left as it is."""
        on_disk = os.fstat(self._fd).st_size
        if on_disk > self._size and self._all_zero(self._size, on_disk):
            os.ftruncate(self._fd, self._size)
        self._end = self._size
        self._durable_end = 0

    def _all_zero(self, start: int, end: int) -> bool:
        while start < end:
            chunk = os.pread(self._fd, min(ZERO_FILL_CHUNK_BYTES, end - start), start)
            if not chunk or chunk.count(0) != len(chunk):
                return False
            start += len(chunk)
        return True

    def close(self) -> None:
        if self._fd >= 0:
            if self._end > self._size:
                self._trim()
            os.close(self._fd)
            self._fd = -1


class FileStorage:
    """Real files through the os module. With a `root`, every path (even one starting with '/')
    is taken relative to it, so the same paths work on SimStorage and in a test's tmp dir."""

    def __init__(self, root: str = "") -> None:
        self._root = root

    def _p(self, path: str) -> str:
        return posixpath.join(self._root, path.lstrip("/")) if self._root else path

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        if zero_fill:
            return _ZeroFilledOsFile(self._p(path), create)
        return _OsFile(self._p(path), create, preallocate)

    def exists(self, path: str) -> bool:
        return os.path.exists(self._p(path))

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._p(path)))
        except FileNotFoundError as exc:
            raise StorageError(f"no such directory: {path}") from exc

    def make_dirs(self, path: str) -> None:
        os.makedirs(self._p(path), exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.replace(self._p(source), self._p(target))

    def remove(self, path: str) -> None:
        try:
            os.remove(self._p(path))
        except FileNotFoundError as exc:
            raise StorageError(f"no such file: {path}") from exc

    def remove_dir(self, path: str) -> None:
        try:
            os.rmdir(self._p(path))
        except OSError as exc:
            raise StorageError(f"cannot remove directory {path}: {exc.strerror}") from exc

    def fsync_dir(self, path: str) -> None:
        fd = os.open(self._p(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _BufferedOsFile(_OsFile):
    """An `_OsFile` whose appends stay in this process's memory until `fsync` (or `close`):
    what a crash of the process loses, as a power loss loses the page cache. Readers see the
    buffered tail (reads and `size` cover it); `truncate` cuts the buffer, then the file."""

    __slots__ = ("_tail",)

    def __init__(self, path: str, create: bool) -> None:
        super().__init__(path, create)
        self._tail = bytearray()

    def append(self, *buffers: Buffer) -> int:
        position = self._size
        for b in buffers:
            self._tail += b
        self._size = position + sum(map(len, buffers))
        return position

    def read(self, position: int, size: int) -> bytes:
        on_disk = self._size - len(self._tail)
        head = os.pread(self._fd, min(size, on_disk - position), position) if position < on_disk else b""
        start = max(position, on_disk) - on_disk
        return head + bytes(self._tail[start : start + size - len(head)])

    def _write_tail(self) -> None:
        rest = memoryview(bytes(self._tail))
        while rest:
            rest = rest[os.write(self._fd, rest):]
        self._tail.clear()

    def fsync(self) -> None:
        self._write_tail()
        os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        on_disk = self._size - len(self._tail)
        if size >= on_disk:
            del self._tail[size - on_disk :]
            self._size = min(self._size, size)
            return
        self._tail.clear()
        self._size = on_disk
        super().truncate(size)

    def close(self) -> None:
        if self._fd >= 0:
            self._write_tail()  # a clean close keeps what was appended (no fsync, as _OsFile)
        super().close()


class BufferedFileStorage(FileStorage):
    """`FileStorage` whose files keep appends in process memory until they are fsynced, so a
    kill -9 loses the unflushed tail as a power loss would (the nemesis's crash-unflushed;
    broker config `kraftlab.log.unflushed.in.process=1`). Directory operations are FileStorage's."""

    def open(self, path: str, *, create: bool = True, preallocate: bool = False,
             zero_fill: bool = False) -> StorageFile:  # fmt: skip
        return _BufferedOsFile(self._p(path), create)  # appends wait in memory: nothing to reserve



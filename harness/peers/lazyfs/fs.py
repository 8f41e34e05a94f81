"""The lazy file system's FUSE daemon: a directory mounted over itself, its files' unsynced data
held in the daemon's memory (cache.py) until the writer fsyncs.

    python -m harness.peers.lazyfs DIR      # mounts DIR over DIR, in the foreground

The daemon opens DIR before mounting over it, so it reaches the directory underneath by that
descriptor (every call is relative to it: `dir_fd=`), and the program whose data lives in DIR
needs no other path. Every FUSE operation runs on one thread (libfuse's `-s`) under the
daemon's one loop, so the page cache needs no lock.

- read: the backing file's bytes with the pending operations over them; write, truncate and an
  open with O_TRUNC: into the page cache only (O_APPEND writes at the size the writer sees);
- fsync / fdatasync of a file: its pending operations applied to the backing file in order,
  then os.fsync of it; the directory's own fsync does nothing (the namespace is eager);
- create, mkdir, rename, unlink, rmdir, chmod, utimens: on the backing directory at once;
- a clean unmount (`fusermount3 -u DIR`: SIGTERM of the daemon does it) applies and fsyncs
  every pending operation first, as a clean shutdown's sync does;
- a kill -9 of the daemon is the power loss: its memory, the page cache, is gone, and the
  backing directory holds only what was fsynced. The mount is left dead (ENOTCONN) until
  `fusermount3 -u -z DIR` detaches it (mount.py `power_loss`, which also removes the
  `.fuse_hidden*` files libfuse keeps for files deleted while open).

Memory-mapped files work as the kernel makes them work on FUSE: a page written through a
mapping reaches the daemon as a write when the kernel writes it back (msync, fsync, memory
pressure, unmount), so until then it is not even in the page cache here, and is lost too.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
import sys
from typing import Any

import mfusepy as fuse  # type: ignore[import-untyped]

from harness.peers.lazyfs.cache import PageCache, Truncate

STAT_KEYS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime",
             "st_mtime", "st_ctime", "st_blocks")


def _rel(path: str | None) -> str:
    """The FUSE path ("/a/b") relative to the backing directory ("a/b"; "." for the root)."""
    if not path:
        raise fuse.FuseOSError(errno.EBADF)
    rel = path.lstrip("/")
    return rel or "."


class LazyFS(fuse.Operations):  # type: ignore[misc]
    """FUSE operations over the directory open as `root` (module docstring)."""

    use_ns = True

    def __init__(self, directory: str) -> None:
        self.root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self.cache = PageCache()
        self.fds: dict[int, tuple[str, int]] = {}  # fh -> (path, open flags)

    # --------------------------------------------------------------------- the backing side

    def _synced_size(self, rel: str) -> int:
        try:
            return os.stat(rel, dir_fd=self.root, follow_symlinks=False).st_size
        except FileNotFoundError:
            return 0

    def _apply(self, rel: str, fsync: bool) -> None:
        """Put the file's pending operations on the backing file, in order."""
        ops = self.cache.take(rel)
        if not ops and not fsync:
            return
        fd = os.open(rel, os.O_WRONLY, dir_fd=self.root)
        try:
            for op in ops:
                if isinstance(op, Truncate):
                    os.ftruncate(fd, op.size)
                else:
                    os.pwrite(fd, op.data, op.offset)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _path_of(self, path: str | None, fh: int | None) -> str:
        if path is None and fh is not None and fh in self.fds:
            return self.fds[fh][0]
        return _rel(path)

    # ------------------------------------------------------------------------- attributes

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        rel = self._path_of(path, fh)
        try:
            st = os.stat(rel, dir_fd=self.root, follow_symlinks=False)
        except OSError as exc:
            raise fuse.FuseOSError(exc.errno) from exc
        attrs: dict[str, Any] = {k: getattr(st, k) for k in STAT_KEYS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        if stat.S_ISREG(st.st_mode) and rel in self.cache:
            attrs["st_size"] = self.cache.size(rel, st.st_size)
            attrs["st_blocks"] = (attrs["st_size"] + 511) // 512
        return attrs

    def access(self, path: str, amode: int) -> int:
        if not os.access(_rel(path), amode, dir_fd=self.root):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.root)
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                            "f_favail", "f_ffree", "f_files", "f_flag",
                                            "f_frsize", "f_namemax")}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(_rel(path), mode, dir_fd=self.root)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(_rel(path), uid, gid, dir_fd=self.root)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(_rel(path), dir_fd=self.root)  # now
        else:
            os.utime(_rel(path), ns=times, dir_fd=self.root)
        return 0

    # ------------------------------------------------------------------------ directories

    def readdir(self, path: str, fh: int) -> list[str]:
        fd = os.open(_rel(path), os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.root)
        try:
            return [".", "..", *os.listdir(fd)]
        finally:
            os.close(fd)

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(_rel(path), mode, dir_fd=self.root)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(_rel(path), dir_fd=self.root)
        self.cache.unlink(_rel(path))
        return 0

    def unlink(self, path: str) -> int:
        os.unlink(_rel(path), dir_fd=self.root)
        self.cache.unlink(_rel(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        os.rename(_rel(old), _rel(new), src_dir_fd=self.root, dst_dir_fd=self.root)
        self.cache.rename(_rel(old), _rel(new))
        for fh, (p, flags) in list(self.fds.items()):  # open files follow their file
            if p == _rel(old) or p.startswith(_rel(old) + "/"):
                self.fds[fh] = (_rel(new) + p[len(_rel(old)):], flags)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return 0  # the namespace is on the backing directory already

    # ------------------------------------------------------------------------------ files

    def _opened(self, rel: str, flags: int) -> int:
        if flags & os.O_TRUNC:
            self.cache.truncate(rel, 0, self._synced_size(rel))
        fd = os.open(rel, os.O_RDONLY, dir_fd=self.root)  # reads only: writes are ours
        self.fds[fd] = (rel, flags)
        return fd

    def open(self, path: str, flags: int) -> int:
        return self._opened(_rel(path), flags)

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        rel = _rel(path)
        os.close(os.open(rel, os.O_WRONLY | os.O_CREAT | (flags & os.O_EXCL), mode,
                         dir_fd=self.root))
        return self._opened(rel, flags)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        rel = self._path_of(path, fh)
        synced_size = os.fstat(fh).st_size
        synced = os.pread(fh, size, offset) if offset < synced_size else b""
        return self.cache.read(rel, offset, size, synced, synced_size)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        rel = self._path_of(path, fh)
        synced_size = os.fstat(fh).st_size
        if self.fds.get(fh, (rel, 0))[1] & os.O_APPEND:
            offset = self.cache.size(rel, synced_size)
        self.cache.write(rel, offset, bytes(data), synced_size)
        return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        rel = self._path_of(path, fh)
        self.cache.truncate(rel, length, self._synced_size(rel))
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self._apply(self._path_of(path, fh), fsync=True)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0  # close(2) does not sync

    def release(self, path: str | None, fh: int) -> int:
        self.fds.pop(fh, None)
        os.close(fh)
        return 0

    def destroy(self, path: str) -> None:
        """A clean unmount: every pending operation on the disk, as a clean shutdown syncs."""
        for rel in self.cache.paths():
            try:
                self._apply(rel, fsync=True)
            except OSError as exc:  # this file's data is lost; the others' is still synced
                print(f"lazyfs: {rel}: {exc}", file=sys.stderr)
                self.cache.take(rel)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.peers.lazyfs DIR", file=sys.stderr)
        return 2
    directory = os.path.abspath(argv[0])
    # One backing descriptor per open file, and a JVM keeps its memory-mapped indexes open:
    # as many as the hard limit allows (the JVM raises its own limit the same way).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ops = LazyFS(directory)
    fuse.FUSE(ops, directory, foreground=True, nothreads=True, fsname="kraftlab-lazyfs")
    return 0

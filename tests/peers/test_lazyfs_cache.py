"""The lazy file system's page cache (harness/peers/lazyfs/cache.py) against a plain model.

A Hypothesis state machine drives a `PageCache` over an in-memory "disk" (the backing files'
bytes, what was synced) with writes, truncates, fsyncs, renames, deletes and power losses, and
checks after every step: every file reads back as the writer sees it (the model's current
bytes), and a power loss leaves exactly what each file's last fsync put on the disk.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from harness.peers.lazyfs.cache import PageCache, Truncate

PATHS = ("a", "d/b", "d/c")


class PageCacheMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cache = PageCache()
        self.disk: dict[str, bytearray] = {}  # the backing files: what fsyncs put there
        self.seen: dict[str, bytearray] = {}  # the model: what the writer sees

    def _write_model(self, path: str, offset: int, data: bytes) -> None:
        buf = self.seen.setdefault(path, bytearray())
        if len(buf) < offset:
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(data)] = data

    @rule(path=st.sampled_from(PATHS), offset=st.integers(0, 40), data=st.binary(min_size=1, max_size=12))
    def write(self, path: str, offset: int, data: bytes) -> None:
        self.disk.setdefault(path, bytearray())  # created eagerly, as the namespace is
        self.cache.write(path, offset, data, len(self.disk[path]))
        self._write_model(path, offset, data)

    @rule(path=st.sampled_from(PATHS), data=st.binary(min_size=1, max_size=12))
    def append(self, path: str, data: bytes) -> None:
        self.disk.setdefault(path, bytearray())
        end = self.cache.size(path, len(self.disk[path]))
        self.write(path, end, data)

    @rule(path=st.sampled_from(PATHS), size=st.integers(0, 50))
    def truncate(self, path: str, size: int) -> None:
        self.disk.setdefault(path, bytearray())
        self.cache.truncate(path, size, len(self.disk[path]))
        buf = self.seen.setdefault(path, bytearray())
        del buf[size:]
        buf.extend(bytes(size - len(buf)))

    @rule(path=st.sampled_from(PATHS))
    def fsync(self, path: str) -> None:
        """fs.py `_apply`: the pending operations on the backing file, in order."""
        disk = self.disk.setdefault(path, bytearray())
        for op in self.cache.take(path):
            if isinstance(op, Truncate):
                del disk[op.size:]
                disk.extend(bytes(op.size - len(disk)))
            else:
                if len(disk) < op.offset:
                    disk.extend(bytes(op.offset - len(disk)))
                disk[op.offset:op.offset + len(op.data)] = op.data
        assert disk == self.seen.get(path, bytearray())  # synced: the disk is what was seen

    @rule(old=st.sampled_from(PATHS), new=st.sampled_from(PATHS))
    def rename(self, old: str, new: str) -> None:
        if old == new or old not in self.disk:
            return
        self.cache.rename(old, new)
        self.disk[new] = self.disk.pop(old)
        self.seen[new] = self.seen.pop(old, bytearray())

    @rule()
    def rename_directory(self) -> None:
        """d/ -> e/ (and back): pending data moves with the files inside."""
        old, new = ("d", "e") if any(p.startswith("d/") for p in self.disk) else ("e", "d")
        if any(p.startswith(new + "/") for p in self.disk):
            return  # rename(2) of a directory onto a non-empty one fails (ENOTEMPTY)
        self.cache.rename(old, new)
        for table in (self.disk, self.seen):
            for p in [p for p in table if p.startswith(old + "/")]:
                table[new + p[len(old):]] = table.pop(p)

    @rule(path=st.sampled_from(PATHS))
    def unlink(self, path: str) -> None:
        self.cache.unlink(path)
        self.disk.pop(path, None)
        self.seen.pop(path, None)

    @rule()
    def power_loss(self) -> None:
        self.cache = PageCache()  # the daemon's memory is gone
        self.seen = {p: bytearray(b) for p, b in self.disk.items()}

    @invariant()
    def reads_are_what_the_writer_sees(self) -> None:
        for path, disk in self.disk.items():
            want = bytes(self.seen.get(path, b""))
            assert self.cache.size(path, len(disk)) == len(want)
            for offset, length in ((0, 64), (3, 5), (len(want) // 2, 7), (len(want), 4)):
                got = self.cache.read(path, offset, length, bytes(disk[offset:offset + length]),
                                      len(disk))
                assert got == want[offset:offset + length], (path, offset, length)


PageCacheMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40,
                                              deadline=None)
TestPageCache = PageCacheMachine.TestCase


def test_appends_coalesce_into_one_pending_write() -> None:
    cache = PageCache()
    for i in range(100):
        cache.write("seg.log", i * 10, b"0123456789", 0)
    assert len(cache.files["seg.log"].ops) == 1 and cache.size("seg.log", 0) == 1000

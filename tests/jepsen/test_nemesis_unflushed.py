"""BufferedFileStorage (harness/runtime/file_storage.py), what the crash-unflushed nemesis relies on.

- Readers of a buffered file see exactly what FileStorage's readers see, whatever mix of appends,
  truncations and fsyncs (a model-based Hypothesis test against a bytearray);
- an abandoned handle (the process killed: no close, no fsync) leaves on disk exactly the bytes
  of the last fsync, while FileStorage's writes survive in the OS: the difference kill -9 makes;
- a clean close writes the buffered tail out (a graceful shutdown loses nothing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.runtime.file_storage import BufferedFileStorage, FileStorage

OPS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.binary(max_size=40), st.binary(max_size=8)),
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=120)),
    st.tuples(st.just("fsync")),
    st.tuples(st.just("read"), st.integers(min_value=0, max_value=120),
              st.integers(min_value=0, max_value=60)),
), max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops=OPS)
def test_buffered_file_reads_like_a_plain_file_and_keeps_only_what_was_fsynced(
    ops: list[tuple[Any, ...]], tmp_path_factory: object
) -> None:
    root = str(tmp_path_factory.mktemp("buffered"))  # type: ignore[attr-defined]
    f = BufferedFileStorage(root).open("seg.log")
    model = bytearray()
    disk = bytearray()  # what the OS holds: the last fsync, cut by later truncations below it
    for op in ops:
        match op:
            case ("append", a, b):
                assert f.append(a, b) == len(model)
                model += a + b
            case ("truncate", size):
                f.truncate(size)
                del model[size:]
                del disk[size:]
            case ("fsync",):
                f.fsync()
                disk = bytearray(model)
            case ("read", position, size):
                assert f.read(position, size) == bytes(model[position : position + size])
        assert f.size() == len(model)
    # Killed: the handle is abandoned, never closed; only `disk` survives.
    assert Path(root, "seg.log").read_bytes() == bytes(disk)
    f.close()


def test_kill_loses_the_unflushed_tail_only_with_the_buffered_storage(tmp_path: Path) -> None:
    plain = FileStorage(str(tmp_path)).open("plain.log")
    buffered = BufferedFileStorage(str(tmp_path)).open("buffered.log")
    for f in (plain, buffered):
        f.append(b"flushed")
        f.fsync()
        f.append(b"+tail")
    assert (tmp_path / "plain.log").read_bytes() == b"flushed+tail"  # in the OS page cache
    assert (tmp_path / "buffered.log").read_bytes() == b"flushed"  # only in the process
    buffered.close()
    assert (tmp_path / "buffered.log").read_bytes() == b"flushed+tail"
    plain.close()

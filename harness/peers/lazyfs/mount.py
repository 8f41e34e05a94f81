"""Start, stop and power-cut the lazy file system over one directory (fs.py).

- `mount(directory)`: start the daemon (`python -m harness.peers.lazyfs DIR`, its own session,
  its output in DIR's sibling `lazyfs.log`) and wait, bounded, until DIR is a mount point;
  returns its PID. A dead mount left by a power loss is detached first;
- `unmount(directory, pid)`: a clean unmount (`fusermount3 -u`, retried for a few seconds
  while the mount is busy, then detached), so the daemon syncs every pending write (a clean
  shutdown: libfuse calls its `destroy` when the session ends), then waits for it to exit;
- `power_loss(directory, pid)`: kill -9 the daemon (its memory is the page cache: whatever
  was not fsynced is gone), then detach the dead mount (`fusermount3 -u -z`) and remove the
  `.fuse_hidden*` files of files deleted while open, as a file system's recovery frees them. The processes
  using the directory should be dead first, as they are when a machine loses power.

Only a PID this module started and still running the daemon on this directory is signalled
(`is_daemon`), as the launcher recognises its own nodes (harness/launcher/cluster.py
`is_our_process`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

MODULE = "harness.peers.lazyfs"
MOUNT_TIMEOUT_S = 20.0
EXIT_TIMEOUT_S = 20.0
BUSY_TIMEOUT_S = 5.0  # a clean unmount retried while the mount is busy
POLL_S = 0.02


class LazyFSError(RuntimeError):
    """The lazy file system is missing, or could not be mounted or unmounted."""


def missing() -> str | None:
    """Why this machine cannot mount it (None if it can)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "fusermount3 not found (Debian's fuse3: `bash .ci/install` installs it)"
    try:
        import mfusepy  # type: ignore[import-untyped]  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: libfuse3 itself is missing
        return f"mfusepy cannot load libfuse3 ({exc}): run `bash .ci/install`"
    return None


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def is_mounted(directory: Path) -> bool:
    """Whether a file system is mounted at `directory` (a dead FUSE mount counts)."""
    target = str(directory.resolve())
    with open("/proc/self/mountinfo") as f:
        return any(_unescape(line.split()[4]) == target for line in f)


def daemons_on(directory: Path) -> list[int]:
    """PIDs of this module's daemons serving `directory` (by their command line), whether or
    not a PeerFile recorded them."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_daemon(int(entry.name), directory):
            found.append(int(entry.name))
    return found


def is_daemon(pid: int | None, directory: Path) -> bool:
    """Does `pid` run this module's daemon on `directory`?"""
    if pid is None:
        return False
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and MODULE.encode() in cmd and str(directory.resolve()).encode() in cmd


def _detach(directory: Path) -> None:
    subprocess.run(["fusermount3", "-u", "-z", str(directory)], capture_output=True,
                   timeout=10)


def mount(directory: Path) -> int:
    """Mount the lazy file system over `directory` (module docstring); its daemon's PID."""
    reason = missing()
    if reason is not None:
        raise LazyFSError(reason)
    directory = directory.resolve()
    for pid in daemons_on(directory):  # a live daemon nobody recorded: stopped cleanly first,
        unmount(directory, pid)       # or its pending writes would land under the new one
    if is_mounted(directory):
        _detach(directory)  # a power loss's dead mount
    log = open(directory.parent / "lazyfs.log", "ab")  # noqa: SIM115 - the child's
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(directory)], stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=str(Path(__file__).resolve().parents[3]))
    finally:
        log.close()
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while not is_mounted(directory):
        if proc.poll() is not None:
            raise LazyFSError(f"the lazy file system over {directory} exited with "
                              f"{proc.returncode}: see {directory.parent / 'lazyfs.log'}")
        if time.monotonic() > deadline:
            proc.kill()
            raise LazyFSError(f"{directory} was not mounted within {MOUNT_TIMEOUT_S} s")
        time.sleep(POLL_S)  # the daemon mounts in its own time
    _children[proc.pid] = proc
    return proc.pid


# Popen objects of the daemons this process started, so an exit leaves no zombie behind.
_children: dict[int, subprocess.Popen[bytes]] = {}


def _wait_gone(pid: int, directory: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        child = _children.get(pid)
        if child is not None and child.poll() is not None:
            del _children[pid]
        if not is_daemon(pid, directory):
            return True
        time.sleep(POLL_S)  # the daemon exits in its own time
    return not is_daemon(pid, directory)


def unmount(directory: Path, pid: int | None) -> None:
    """A clean unmount (module docstring); LazyFSError if it would not go."""
    directory = directory.resolve()
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while is_mounted(directory):
        done = subprocess.run(["fusermount3", "-u", str(directory)], capture_output=True,
                              text=True, timeout=30)
        if done.returncode == 0:
            break
        if not is_daemon(pid, directory):
            _detach(directory)  # nothing serves it: a dead mount
            break
        if time.monotonic() > deadline:
            # still busy: a process that was just killed can hold its files for a moment
            # after /proc stops naming it (its memory goes before its descriptors). Detach
            # now; the daemon syncs and exits once the last of them is closed.
            _detach(directory)
            break
        time.sleep(POLL_S)  # "Device or resource busy": the holder is going away
    if pid is not None and is_daemon(pid, directory) and not _wait_gone(
            pid, directory, EXIT_TIMEOUT_S):
        raise LazyFSError(f"the lazy file system's daemon {pid} did not exit")


def power_loss(directory: Path, pid: int | None) -> bool:
    """kill -9 the daemon, detach the dead mount (module docstring). False if no daemon of
    ours ran on it (nothing was lost)."""
    directory = directory.resolve()
    lost = is_daemon(pid, directory)
    if lost:
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, directory, EXIT_TIMEOUT_S)
    if is_mounted(directory):
        _detach(directory)
    _drop_hidden(directory)
    return lost


def _drop_hidden(directory: Path) -> None:
    """Files deleted while open live on as `.fuse_hidden*` until closed (libfuse's rename on
    unlink); a power loss closes nothing, and a file system's recovery would free them, so
    they are removed here (one left in a deleted partition's directory would stop its
    removal)."""
    for path in directory.rglob(".fuse_hidden*"):
        with contextlib.suppress(FileNotFoundError):  # gone already
            path.unlink()

"""The clean shutdown file of a broker (KAFKA-15586; Kafka's CleanShutdownFileHandler): written in
the broker's data directory after a graceful stop has flushed and closed every log, read and
removed at the next start.

    <metadata.log.dir>/data/.kafka_cleanshutdown   {"version": 0, "broker_epoch": N}

The broker registers with `previous_broker_epoch` = N when the file was there, -1 when it was not
(a kill -9, a power loss, a crash: the logs may have lost an unflushed tail). The active
controller compares it with the epoch of the registration it still holds: a mismatch is an
unclean shutdown and takes the broker out of every ELR (KIP-966), since an eligible replica must
still hold everything it had when it left the ISR.

Invariants: the file is removed at start before the broker registers, so a crash at any later
point leaves no file (never a clean verdict for an unclean stop); it is written atomically
(temporary file, fsync, rename, fsync of the directory), so a crash while writing leaves either
no file or a complete one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import structlog

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

log = structlog.get_logger()


def take_previous_broker_epoch(data_dir: Path) -> int:
    """The broker epoch of the last clean shutdown recorded in `data_dir` (-1: none, or an
    unreadable file), removing the file so that it vouches for one start only."""
    path = data_dir / CLEAN_SHUTDOWN_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        # A first start, or the last stop was not clean (kill -9, power loss, crash).
        log.info("broker.no_clean_shutdown_file", previous_broker_epoch=-1)
        return -1
    try:
        doc = json.loads(text)
        epoch = doc.get("broker_epoch") if isinstance(doc, dict) else None
    except ValueError:
        epoch = None
    path.unlink()
    _fsync_dir(data_dir)
    if type(epoch) is not int or epoch < 0:
        log.warning("broker.clean_shutdown_file_unreadable", path=str(path))
        return -1
    log.info("broker.clean_shutdown_detected", previous_broker_epoch=epoch)
    return epoch


def write_clean_shutdown(data_dir: Path, broker_epoch: int) -> None:
    """Record a clean shutdown at `broker_epoch` (call after every log is flushed and closed)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / CLEAN_SHUTDOWN_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"version": 0, "broker_epoch": broker_epoch}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(data_dir)
    log.info("broker.clean_shutdown_written", broker_epoch=broker_epoch)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

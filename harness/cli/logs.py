"""`kraftlab cluster logs ID [--follow]`: print one node's log file (JSON lines, harness/runtime/logs.py).

Without --follow it prints the file as it is and returns. With --follow it keeps printing what the
node appends, and stops (exit 0) when the node process is gone (checked by the PID recorded in
cluster.json, like every other cluster verb) or on Ctrl-C: the loop is bounded by the process's
life, never an unbounded tail of a dead node.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from harness.launcher import cluster as cl

FOLLOW_POLL_S = 0.2  # how often --follow looks for new lines (an interactive tail, not a test)


def _copy_new(handle: TextIO, out: TextIO) -> int:
    data = handle.read()
    if data:
        out.write(data)
        out.flush()
    return len(data)


def cmd_logs(args: argparse.Namespace, data_dir: Path) -> int:
    cluster = cl.ClusterFile.load(data_dir)
    node = cluster.node(args.id)
    path = Path(node.log_file)
    if not path.exists():
        print(f"error: {node.role} {node.id} has no log file yet ({path})", file=sys.stderr)
        return 1
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        _copy_new(handle, sys.stdout)
        if not args.follow:
            return 0
        try:
            while cl.is_our_process(node.pid, node.config_file):
                if not _copy_new(handle, sys.stdout):
                    time.sleep(FOLLOW_POLL_S)
        except KeyboardInterrupt:
            return 0
        _copy_new(handle, sys.stdout)  # what it wrote just before it exited
    print(f"{node.role} {node.id} (pid {node.pid}) is not running; stopped following",
          file=sys.stderr)
    return 0

"""What the `kraftlab` verb modules share: the cluster-directory option, the error wrapper, the
progress line on stderr, and an admin request retried over a cluster's nodes.

A verb parses, calls one package below (launcher, admin client, jepsen, sim, spark, study,
bench) and prints; an error it expects (a cluster or config problem) is one `error: ...` line on
stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.admin.client import AdminClient, OutcomeUnknown
from harness.launcher import cluster as cl
from harness.runtime.config import ConfigError

DATA_DIR_HELP = "cluster directory (default ./kraftlab-data or $KRAFTLAB_DATA_DIR)"
# Admin answers that mean "ask again (maybe elsewhere)": no active controller yet, or a stale hint.
RETRIABLE = {"LEADER_NOT_AVAILABLE", "NOT_CONTROLLER"}

Handler = Callable[[argparse.Namespace], int]


def add_data_dir(parser: argparse.ArgumentParser, help_text: str = DATA_DIR_HELP) -> None:
    parser.add_argument("--data-dir", help=help_text)


def data_dir_of(args: argparse.Namespace) -> Path:
    """`--data-dir`, else $KRAFTLAB_DATA_DIR, else ./kraftlab-data (launcher default_data_dir)."""
    return Path(args.data_dir) if args.data_dir else cl.default_data_dir()


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def guarded(fn: Callable[[argparse.Namespace], Any]) -> Handler:
    """`fn` as a handler whose cluster and config errors print `error: ...` and exit 1."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (cl.ClusterError, ConfigError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return run


def admin_request(args: argparse.Namespace, method: str, path: str,
                  body: Any = None) -> tuple[int, Any]:  # fmt: skip
    """One admin request to `--node` or any node of the cluster in `--data-dir`, retried over
    the nodes while no controller can answer, until `--timeout` (showing progress). A write
    that may have reached a node unanswered (OutcomeUnknown) is not retried: it is an
    `error: outcome unknown: ...` line."""
    cluster = cl.ClusterFile.load(data_dir_of(args))
    nodes = [cluster.node(args.node)] if args.node is not None else cluster.nodes
    deadline = time.monotonic() + args.timeout
    last: str = ""
    attempt = 0
    while True:
        node = nodes[attempt % len(nodes)]
        attempt += 1
        client = AdminClient(node.host, node.admin_port, timeout_s=5.0)
        try:
            status, data = client.request(method, path, body)
            if not (status >= 400 and isinstance(data, dict) and data.get("error") in RETRIABLE):
                return status, data
            reason = f"node {node.id}: {data.get('error')}"
        except OutcomeUnknown as exc:
            # The write reached node `node.id` and may have been executed: asking again
            # (there or elsewhere) could report a refusal for a write that took effect.
            raise cl.ClusterError(f"{exc} (node {node.id}); check before retrying") from exc
        except OSError as exc:
            reason = f"node {node.id}: {type(exc).__name__}"
        finally:
            client.close()
        if time.monotonic() > deadline:
            raise cl.ClusterError(f"no active controller answered within {args.timeout:.0f} s "
                                  f"({reason})")
        if reason != last:
            progress(f"retrying ({reason})")
            last = reason
        if attempt % len(nodes) == 0:
            time.sleep(0.1)  # a full round without an answer: back off before the next one

"""`kraftlab ui`: the web view of a running local cluster (docs/ui.md).

    kraftlab ui [--data-dir DIR] [--host 127.0.0.1] [--port 8090] [--interval-ms 250]
    kraftlab ui --replay FILE [--host ...] [--port ...]

Serves the page until Ctrl-C and prints its URL first (`--port 0`: any free port). Live, it
polls the cluster in DIR (cluster.json) a few times a second and its buttons kill, pause,
resume and restart nodes, cut and heal links and produce bursts, as `kraftlab cluster`,
`kraftlab nemesis` and `kraftlab produce` do. `--replay FILE` shows a recording written by
`kraftlab sim replay --out FILE` instead. Off 127.0.0.1 (or on a cluster started with
`kraftlab.admin.require.token=true`) the buttons need the cluster's admin token, which the page
asks for, exactly as the admin API's writes do.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import add_data_dir, data_dir_of
from harness.launcher import cluster as cl
from harness.ui.live import ClusterPoller, LiveFeed
from harness.ui.server import UiApp, build_app, is_loopback, serve

DEFAULT_PORT = 8090
REQUIRE_TOKEN_KEY = "kraftlab.admin.require.token"


def add_server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=cl.HOST, help="address to serve the page on (127.0.0.1; "
                   "any other address makes the buttons require the admin token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port ({DEFAULT_PORT}; 0: any free port)")


def register(sub: Any) -> None:
    p = sub.add_parser("ui", help="web view of a running cluster: quorum, brokers, partitions' "
                       "LEO and HW, a timeline, buttons to break it",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_data_dir(p)
    p.add_argument("--interval-ms", type=int, default=250, help="poll interval (250)")
    p.add_argument("--replay", metavar="FILE", help="show a recording of `kraftlab sim replay "
                   "--out FILE` instead of a live cluster")
    add_server_options(p)
    p.set_defaults(handler=cmd_ui)


def serve_view(ui: UiApp, args: argparse.Namespace, token: str | None, what: str) -> int:
    try:
        app = build_app(ui, bound_host=args.host, token=token)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    def announce(url: str) -> None:
        print(f"kraftlab ui: {url} ({what}; Ctrl-C stops)", flush=True)

    try:
        serve(app, args.host, args.port, announce)
    except OSError as exc:
        print(f"error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    if args.replay:
        try:
            recording = json.loads(Path(args.replay).read_text())
        except (OSError, ValueError) as exc:
            print(f"error: cannot read {args.replay}: {exc}", file=sys.stderr)
            return 1
        ui = UiApp(title=recording.get("title", args.replay), recording=recording)
        return serve_view(ui, args, None, f"replay of {args.replay}")
    if not 50 <= args.interval_ms <= 10_000:
        print("error: --interval-ms must be in [50, 10000]", file=sys.stderr)
        return 2
    data_dir = data_dir_of(args).resolve()
    try:
        cluster = cl.ClusterFile.load(data_dir)
    except cl.ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    required = not is_loopback(args.host) or any(
        overrides.get(REQUIRE_TOKEN_KEY, "false").lower() in ("true", "1")
        for overrides in [cluster.overrides, *(n.overrides for n in cluster.nodes)])
    feed = LiveFeed(ClusterPoller(data_dir), args.interval_ms / 1000)
    ui = UiApp(title=f"cluster {cluster.cluster_id}", feed=feed, data_dir=data_dir,
               token_required=required)
    return serve_view(ui, args, cl.read_token(data_dir),
                      f"live view of cluster {cluster.cluster_id} in {data_dir}")

"""`kraftlab sim replay`: record one simulated data-plane run and show it step by step (docs/ui.md).

    kraftlab sim replay --scenario kip101-loss|kip101-divergence [--leader-epoch true|false]
    kraftlab sim replay --seed N [--mode isr|quorum] [--acks 1|all] [--min-isr N] [--rf N]
                        [--unclean] [--elr] [--leader-epoch true|false] [--nemesis NAME]
                        [--duration S] [--metadata abstract|raft]
    ... [--out FILE] [--ui [--host H] [--port P]]

`--scenario` runs a scripted KIP-101 story (harness/sim/runs/kip101.py; leader epochs
off by default, so the anomaly happens); `--seed` runs the seeded data-plane run the scenario
matrix runs for those settings (`kraftlab sim matrix`), the same run for the same seed. Either
is recorded frame by frame (harness/sim/runs/recording.py). It prints the anomalies found and
the frame each first shows at; `--out FILE` writes the recording (JSON; `kraftlab ui --replay
FILE` shows it later); `--ui` serves the replay page and prints its URL: step, play, pause, jump
to the anomaly. Exit code 0; 2 on bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.cli.ui import add_server_options, serve_view

_BOOLS = {"true": True, "false": False}
# harness/sim/runs/recording.py SCENARIOS, named here so that building the parser does not
# import the simulator (tests/ui/test_cli.py checks the two agree).
SCENARIO_NAMES = ("kip101-divergence", "kip101-loss")


def add_kind(kinds: Any) -> None:
    r = kinds.add_parser("replay", help="record one data-plane run (a seed or a KIP-101 "
                         "scenario) and replay it in the web view",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument("--scenario", choices=SCENARIO_NAMES, help="a scripted KIP-101 story")
    what.add_argument("--seed", type=int, help="a seeded data-plane run")
    r.add_argument("--leader-epoch", choices=sorted(_BOOLS), default=None,
                   help="leader.epoch.enable (default: false for a scenario, true for a seed)")
    r.add_argument("--mode", choices=("isr", "quorum"), default="isr")
    r.add_argument("--acks", choices=("1", "all"), default="all")
    r.add_argument("--min-isr", type=int, default=2)
    r.add_argument("--rf", type=int, choices=(1, 3, 5), default=3)
    r.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable")
    r.add_argument("--elr", action="store_true", help="eligible leader replicas (KIP-966)")
    r.add_argument("--nemesis", default="none", help="a nemesis shape of `sim matrix`")
    r.add_argument("--duration", type=float, default=5.0, help="fault duration in s (5)")
    r.add_argument("--metadata", choices=("abstract", "raft"), default="abstract",
                   help="the controller side: one abstract controller (default) or 3 Raft voters")
    r.add_argument("--out", metavar="FILE", help="write the recording (JSON)")
    r.add_argument("--ui", action="store_true", help="serve the replay page until Ctrl-C")
    add_server_options(r)
    r.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from harness.sim.runs.recording import record_data_run, record_scenario
    from harness.sim.runs.runner import quiet_logging
    from harness.sim.runs.scenario_run import ScenarioConfig
    from harness.ui.server import UiApp

    quiet_logging()
    if args.scenario is not None:
        recording = record_scenario(args.scenario, _BOOLS[args.leader_epoch or "false"])
    else:
        try:
            config = ScenarioConfig(
                seed=args.seed, replication_mode=args.mode, acks=args.acks,
                min_insync_replicas=args.min_isr, unclean_leader_election=args.unclean,
                eligible_leader_replicas=args.elr,
                leader_epoch_enable=_BOOLS[args.leader_epoch or "true"],
                replication_factor=args.rf, nemesis=args.nemesis,
                fault_duration_ms=int(args.duration * 1000), metadata=args.metadata)
            recording = record_data_run(config)
        except ValueError as exc:
            print(f"kraftlab sim replay: INVALID_REQUEST: {exc}", file=sys.stderr)
            return 2
    document = recording.to_json()
    print(f"{recording.title}: {len(recording.frames)} frames"
          + (" (truncated: the run was longer)" if recording.truncated else ""))
    for found in recording.anomalies:
        frame = recording.frames[found["frame"]]
        print(f"  {found['kind']} at frame {found['frame']} ({frame['time_ms']} ms): "
              f"{found['text']}")
    if not recording.anomalies:
        print("  no anomaly")
    if args.out:
        Path(args.out).write_text(json.dumps(document, separators=(",", ":")))
        print(f"recording written to {args.out} (kraftlab ui --replay {args.out})")
    if args.ui:
        return serve_view(UiApp(title=recording.title, recording=document), args, None,
                          "replay")
    return 0

"""`kraftlab compare`: the README's main job (harness/study/compare.py): a live cluster check,
the simulated scenario matrix, and the Spark analysis of both, reported in OUT.
"""

from __future__ import annotations

from typing import Any

from harness.study.compare import LIVE_TIME_LIMIT_S, cmd_compare


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "compare", help="the main job: live cluster check, simulated matrix, Spark analysis")
    parser.add_argument("--out", default="./kraftlab-report", help="report directory")
    parser.add_argument("--seeds", type=int, default=None,
                        help="seeds per cell of the study's arms (default 8; the trade-off curves "
                             "use at most 5; docs/compare.md)")
    parser.add_argument("--jobs", type=int, default=None, help="simulator processes (default: all cores)")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--skip-live", "--no-live", action="store_true",
                        help="skip the whole live phase (cluster check and queue runs)")
    parser.add_argument("--live-runs", type=int, choices=(0, 1, 2), default=2,
                        help="real-process queue runs in the live phase: 2 (default: isr and "
                             "quorum), 1 (isr only) or 0 (none)")
    parser.add_argument("--live-time-limit", type=float, default=LIVE_TIME_LIMIT_S,
                        help=f"seconds of workload per queue run (default {LIVE_TIME_LIMIT_S:g})")
    parser.add_argument("--sim-vs-real-runs", type=int, default=0, metavar="N",
                        help="also run six faults x both modes N times on real processes and "
                             "on the simulator at the same settings, and table where they agree "
                             "(OUT/sim-vs-real/; about 25 s per real run; default 0: skip)")
    parser.add_argument("--metadata", choices=("raft", "abstract"), default="raft",
                        help="the matrix's metadata side: 3 simulated Raft voters (default) or "
                             "the abstract single controller (docs/compare.md)")
    parser.set_defaults(handler=cmd_compare)

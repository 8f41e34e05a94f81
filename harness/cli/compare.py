"""`kraftlab compare`: the README's main job (harness/study/compare.py): a live cluster check,
the simulated scenario matrix as Spark tasks, and the Spark analysis of both, reported in OUT.
"""

from __future__ import annotations

from typing import Any

from harness.study.compare import add_options, cmd_compare


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "compare", help="the main job: live cluster check, simulated matrix, Spark analysis")
    add_options(parser)
    parser.set_defaults(handler=cmd_compare)

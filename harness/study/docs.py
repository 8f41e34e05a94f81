"""The parts of docs/compare.md that are facts of the code, rendered from the code.

docs/compare.md marks each such part as a block:

    <!-- generated: NAME -->
    ...what BLOCKS[NAME]() renders...
    <!-- end generated -->

`render(text)` replaces every block's content with its renderer's output; the prose between
blocks is left as written. tests/spark/test_compare_docs.py fails, with the diff, when the file
differs from its rendering; `python -m harness.study.docs` rewrites it (`--check`: only report).

The blocks: the arms and comparisons (harness/spark/arms.py), the study's matrix and curves
(harness/sim/runs/study_matrix.py), the presets and their run counts (harness/study/presets.py),
the matrix before the study (harness/sim/runs/matrix.py), the faults (harness/sim/faults), the
verdicts' margins (harness/spark/stats.py), the live phase's queue runs
(harness/study/compare.py) and the simulation-against-real-processes cells and tolerances
(harness/study/sim_vs_real.py). Run counts are counted from the specs' `configs()`, never
written down.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.sim.faults.shapes import SCENARIO_NEMESES
from harness.sim.runs import matrix as mx
from harness.sim.runs import study_matrix as sm
from harness.spark import stats
from harness.spark.arms import ARMS, COMPARISONS, EQUAL_SAFETY
from harness.study import sim_vs_real as svr
from harness.study.presets import PRESETS, preset_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "compare.md"
COMMAND = "python -m harness.study.docs"
WIDTH = 99  # the page's prose width
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)"
                    r"(<!-- end generated -->)", re.S)

# What each flush policy makes durable (harness/sim/actors/disk.py), in the arms table.
DURABILITY = {
    "page-cache": "page cache (Kafka's default: replication is the durability)",
    "flush-every-message": "an fsync per append before the ack (flush.messages=1)",
    "fsync-before-ack": "an fsync before an append counts (what its safety needs)",
    "no-fsync": "page cache: the core's fsyncs skipped (the explicitly unsafe variant)",
}
# Why each of the matrix's DEFAULT_SETTINGS is there: the claim of harness/spark/conclude.py it
# serves, keyed by (mode, acks, min.insync.replicas, unclean, ELR, leader.epoch.enable).
SETTING_CLAIMS = {
    ("isr", "1", 1, False, False, True): "acks=1 baseline (zombie leader)",
    ("isr", "all", 1, False, False, True): "ISR's default durability",
    ("isr", "all", 1, True, False, True):
        "(a) leadership to an out-of-sync follower; (d) the unclean trade",
    ("isr", "all", 1, True, False, False):
        "(f) pre-KIP-101 truncation, the twin of the line above",
    ("isr", "all", 2, False, False, True): "(a), (e) min ISR 2",
    ("isr", "all", 2, True, False, True):
        "(a) min ISR 2 when leadership goes to an out-of-sync follower",
    ("isr", "all", 2, False, True, True): "(e) ELR, KIP-966",
    ("quorum", "1", 1, False, False, True): "quorum mode, leader-only acks",
    ("quorum", "all", 2, False, False, True): "(b), (c) quorum mode",
    ("raft", "all", 2, False, False, True):
        "raft mode (a Raft group per partition) beside quorum mode's acks=all",
}
_COLUMNS = ("replication_mode", "acks", "min_insync_replicas", "unclean_leader_election",
            "eligible_leader_replicas", "leader_epoch_enable", "flush_policy")


def _wrap(paragraph: str) -> str:
    """One paragraph of prose at the page's width, newline-terminated."""
    return textwrap.fill(paragraph, WIDTH, break_long_words=False, break_on_hyphens=False) + "\n"


def _page(lines: Sequence[str]) -> str:
    """Lines of a block: table rows as they are, prose wrapped at the page's width."""
    return "".join(line + "\n" if not line or line.startswith(("|", "    ")) else _wrap(line)
                   for line in lines)


def _n(x: int) -> str:
    return f"{x:,}"


def _s(ms: int) -> str:
    return f"{ms / 1000:g} s"


def _onoff(values: Sequence[bool]) -> str:
    return ", ".join("on" if v else "off" for v in values)


def _codes(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _setting(s: Sequence[Any]) -> str:
    mode, acks, min_isr, unclean, elr, epochs = s[:6]
    parts = [mode, f"acks={acks}"]
    if mode == "isr":
        parts.append(f"min.insync.replicas={min_isr}")
    parts += [p for p, on in (("unclean election", unclean), ("ELR", elr)) if on]
    if not epochs:
        parts.append("leader epochs off")
    if len(s) > 6 and s[6]:
        parts.append(str(s[6]))
    return ", ".join(parts)


def arm_of(setting: Sequence[Any]) -> str:
    """The key of the arm (harness/spark/arms.py) a study setting's runs belong to, or ""."""
    row = dict(zip(_COLUMNS, setting, strict=True))
    keys = [a.key for a in ARMS.values() if a.matches(row)]
    return keys[0] if keys else ""


def _faults(faults: Sequence[str]) -> str:
    if tuple(faults) == tuple(SCENARIO_NEMESES):
        return f"every fault ({len(faults)})"
    return _codes(faults)


# -- the blocks ---------------------------------------------------------------------------------


def arms_block() -> str:
    lines = ["| arm | settings | flush policy (durability) | in the default study |",
             "|---|---|---|---|"]
    faults_of = {arm_of(s): f for s, f in sm.ARM_FAULTS if s[0] in mx.MODES}
    for arm in ARMS.values():
        policies = [p for p in arm.flush_policies if p is not None]
        durability = "; ".join(f"`{p}`: {DURABILITY[p]}" for p in policies)
        where = _faults(faults_of[arm.key]) if arm.key in faults_of else "not run"
        lines.append(f"| `{arm.key}` | {arm.label}, RF 3 | {durability} | {where} |")
    return "\n".join(lines) + "\n"


def comparisons_block() -> str:
    lines = ["| comparison (b vs a) | kind | what differs | why they are compared |",
             "|---|---|---|---|"]
    for c in sorted(COMPARISONS, key=lambda c: c.kind != EQUAL_SAFETY):
        lines.append(f"| `{c.key}` | {c.kind} | {c.axis} | {c.why} |")
    return "\n".join(lines) + "\n"


def faults_block() -> str:
    return _wrap(f"The matrix's faults (harness/sim/faults/shapes.py `SCENARIO_NEMESES`, "
                 f"{len(SCENARIO_NEMESES)} with the fault-free `none`): "
                 f"{_codes(SCENARIO_NEMESES)}.")


def _values(changes: dict[str, Any]) -> str:
    if "lag_ms" in changes:
        return "replica.lag.time.max.ms " + ", ".join(_s(v) for v in changes["lag_ms"])
    if "session_ms" in changes:
        return "broker.session.timeout.ms " + ", ".join(_s(v) for v in changes["session_ms"])
    if "durations_ms" in changes:
        return "fault duration " + ", ".join(_s(v) for v in changes["durations_ms"])
    if "election_ms" in changes:
        return "election timeout " + ", ".join(f"{v} ms" for v in changes["election_ms"])
    rf = " vs ".join(str(r) for r in changes["rf"])
    isr = sorted({s[2] for s in changes["settings"] if s[0] == "isr"})
    return f"RF {rf}, ISR min.insync.replicas {' vs '.join(map(str, isr))}"


def study_block() -> str:
    """The default study: each setting with its faults and runs, the curves, the total."""
    specs = sm.arms_specs()
    arm_runs = sum(len(s.configs()) for s in specs)
    lines = [f"The arms' runs: RF 3, faults held {_s(specs[0].durations_ms[0])}, "
             f"{sm.STUDY_SEEDS} seeds per cell, the Kafka-like producers and the "
             f"{sm.PROBE_MS} ms probe; the metadata side a Raft quorum of 3 voters.", "",
             "| setting | arm | faults | runs |", "|---|---|---|---|"]
    for (setting, faults), spec in zip(
            [(s, f) for s, f in sm.ARM_FAULTS if s[0] in mx.MODES], specs, strict=True):
        arm = arm_of(setting)
        lines.append(f"| {_setting(setting)} | {f'`{arm}`' if arm else '(reference scenarios)'} "
                     f"| {_faults(faults)} | {_n(len(spec.configs()))} |")
    lines += ["", f"The trade-off curves ({sm.CURVE_SEEDS} seeds per point, the other settings "
                  "at the arms' defaults):", "",
              "| curve | values | faults | settings | runs |", "|---|---|---|---|---|"]
    curve_runs = 0
    for curve, spec in zip(sm.CURVES, sm.curve_specs(), strict=True):
        runs = len(spec.configs())
        curve_runs += runs
        settings = "; ".join(_setting(s) for s in spec._settings())
        lines.append(f"| {curve.name} | {_values(curve.changes)} | {_codes(curve.nemeses)} | "
                     f"{settings} | {_n(runs)} |")
    total = len(sm.study_configs())
    lines += ["", f"{_n(arm_runs)} arm runs and {_n(curve_runs)} curve runs, of which "
                  f"{_n(arm_runs + curve_runs - total)} are arm runs already (a curve's point at "
                  f"the defaults): **{_n(total)} runs**."]
    return _page(lines)


def describe(name: str) -> str:
    """What a preset runs, in words, from its spec."""
    spec = preset_spec(name)
    if isinstance(spec, sm.StudySpec):
        arms = len([s for s, _ in sm.ARM_FAULTS if s[0] in mx.MODES])
        if spec.large:
            return (f"the study's {arms} settings, every one under every fault at 1, 5 and 30 s, "
                    f"RF 3 and 5, and the curves, {spec.seeds} seeds")
        faults = (f"under {_and([f'`{n}`' for n in spec.nemeses])} held 5 s"
                  if spec.nemeses else "each under its faults (above), 5 s faults")
        curves = (f"the curves at {min(spec.seeds, spec.curve_seeds)} seeds" if spec.curves
                  else "no curves")
        return f"the study: its {arms} settings {faults}, {spec.seeds} seeds; {curves}"
    dims = []
    if spec.settings is not None:
        dims.append(f"the {len(spec.settings)} settings of `DEFAULT_SETTINGS`"
                    if spec.settings == mx.DEFAULT_SETTINGS else f"{len(spec.settings)} settings")
    else:
        dims += [f"modes {', '.join(spec.modes)}", f"acks {', '.join(spec.acks)}",
                 f"min.insync.replicas {', '.join(map(str, spec.min_isr))} (up to the RF)",
                 f"unclean {_onoff(spec.unclean)}", f"ELR {_onoff(spec.elr)}",
                 f"leader epochs {_onoff(spec.leader_epoch)}"]
    dims.append("RF " + ", ".join(map(str, spec.rf)))
    dims.append(f"every fault at {', '.join(_s(d) for d in spec.durations_ms)}")
    return (" x ".join(dims) + f", {spec.seeds} seeds, the {spec.producer} producer")


@functools.cache
def preset_runs(name: str) -> int:
    """The runs of preset `name` at its own seeds and faults (counted once per process: the
    larger presets take a second to list)."""
    return len(preset_spec(name).configs())


def presets_block() -> str:
    lines = ["| preset | matrix | runs |", "|---|---|---|"]
    for name in PRESETS:
        lines.append(f"| `{name}` | {describe(name)} | {_n(preset_runs(name))} |")
    return "\n".join(lines) + "\n"


def settings_block() -> str:
    lines = ["| mode | acks | min ISR | unclean | ELR | leader epochs | why |",
             "|---|---|---|---|---|---|---|"]
    for s in mx.DEFAULT_SETTINGS:
        mode, acks, min_isr, unclean, elr, epochs = s
        cells = [mode, acks, str(min_isr), str(unclean).lower(), str(elr).lower(),
                 str(epochs).lower() if epochs else "**false**"]
        lines.append(f"| {' | '.join(cells)} | {SETTING_CLAIMS[s]} |")
    return "\n".join(lines) + "\n"


def matrix_size_block() -> str:
    spec = mx.default_spec()
    faults = len([n for n in spec.nemeses if n != "none"])
    full = mx.MatrixSpec(seeds=mx.DEFAULT_SEEDS)
    full_runs = _full_runs()
    return _wrap(f"Size: {len(spec.settings or ())} settings x (1 + {faults} x "
                 f"{len(spec.durations_ms)}) nemesis-duration cells x {spec.seeds} seeds = "
                 f"{_n(len(spec.configs()))} runs; speed in docs/benchmarks.md. `--full` (or any "
                 f"dimension option) starts from the whole product instead "
                 f"({describe_full(full)}: {_n(full_runs)} runs).")


@functools.cache
def _full_runs() -> int:
    return len(mx.MatrixSpec(seeds=mx.DEFAULT_SEEDS).configs())


def describe_full(spec: mx.MatrixSpec) -> str:
    return (f"modes {', '.join(spec.modes)} x acks {', '.join(spec.acks)} x min.insync.replicas "
            f"{', '.join(map(str, spec.min_isr))} x unclean {_onoff(spec.unclean)} x ELR "
            f"{_onoff(spec.elr)} x RF {', '.join(map(str, spec.rf))}, raft without unclean "
            f"election or ELR, x every fault at {', '.join(_s(d) for d in spec.durations_ms)}, "
            f"{spec.seeds} seeds")


def margins_block() -> str:
    lines = ["| metric | better when | margin |", "|---|---|---|"]
    for m in stats.METRICS:
        margin = f"{100 * m.margin:g} pp" if m.unit == "fraction" else f"{m.margin:g} {m.unit}"
        lines.append(f"| {m.label} | {'higher' if m.higher_is_better else 'lower'} | "
                     f"{margin} |")
    return _page([f"Per cell: the mean paired difference with a {100 * stats.LEVEL:g}% "
                  f"BCa bootstrap interval ({_n(stats.RESAMPLES)} resamples of the seeds, "
                  f"the generator seeded by the cell's name), its paired sign-flip permutation "
                  f"p-value (exact up to {stats.EXACT_FLIPS_MAX} seeds, else "
                  f"{_n(stats.SIGN_FLIPS)} seeded flips) and its Benjamini-Hochberg q-value over "
                  f"every cell and metric of the report, held to a false-discovery rate of "
                  f"{stats.FDR:g}; *cannot tell* below {stats.MIN_SEEDS} paired seeds. "
                  f"The margins:", "", *lines])


def live_block() -> str:
    from harness.jepsen.run_core import QUEUE_OVERRIDES
    from harness.study import compare as cmp

    fault = cmp.LIVE_FAULT_S[0]
    overrides = ", ".join(f"{k}={v}" for k, v in QUEUE_OVERRIDES.items())
    return _wrap(f"{len(cmp.LIVE_MODES)} real-process queue runs (`live_queue_runs`), one per "
                 f"replication mode ({_codes(cmp.LIVE_MODES)}, each in its own topic), all "
                 f"under `{cmp.LIVE_NEMESIS}`, {cmp.LIVE_TIME_LIMIT_S:g} s of workload each with "
                 f"the fault held {fault:g} s; the brokers run with the runner's short timeouts "
                 f"(`QUEUE_OVERRIDES`: {overrides}). `--live-runs N` runs the first N of them "
                 f"(default {len(cmp.LIVE_MODES)}).")


def commands_block() -> str:
    study = len(sm.study_configs())
    spec = mx.default_spec()
    rows = [
        ("kraftlab sim matrix --out runs/ --study default",
         f"the study: {_n(study)} runs (report.html's input)"),
        ("kraftlab sim matrix --out runs/",
         f"the matrix before the study: {_n(len(spec.configs()))} runs, {spec.seeds} seeds"),
        ("kraftlab jepsen run --workload queue --nemesis halves --out jepsen/run-1",
         "real processes"),
        ("kraftlab analyze --input runs/ jepsen/ --out report/ --master 'local[2]'", ""),
    ]
    width = max(len(c) for c, _ in rows[:2]) + 1
    return "\n".join(f"    {c.ljust(width)}# {note}" if len(c) < width
                     else f"    {c}   # {note}" if note else f"    {c}"
                     for c, note in rows) + "\n"


def sim_vs_real_block() -> str:
    timing = svr.real_timing()
    tol = f"{100 * svr.AVAILABILITY_TOLERANCE:g} points"
    lines = [f"The cells: {len(svr.FAULTS)} faults x {_codes(svr.MODES)} x the runs asked for, "
             f"each fault held {svr.FAULT_S:g} s after a {svr.LEAD_IN_S:g} s lead-in; the "
             f"simulator at the real cluster's timeouts (broker.session.timeout.ms "
             f"{timing.session_timeout_ms}, heartbeat {timing.heartbeat_interval_ms}, "
             f"replica.lag.time.max.ms {timing.replica_lag_time_max_ms}), each mode's flush "
             f"policy ({', '.join(f'{m} `{p}`' for m, p in svr.FLUSH.items())}).", "",
             "| real nemesis | simulated shape |", "|---|---|"]
    lines += [f"| `{real}` | `{sim}` |" for real, sim in svr.FAULTS]
    # sim_vs_real._agree's rule per metric; a metric added there without a rule here fails.
    agree = {
        "loss": ("loss", "both lose some acknowledged writes, or neither does"),
        "availability": ("availability (acknowledged / attempted, during the fault)",
                         f"within {tol}"),
        "available time": ("available time during the fault", f"within {tol}"),
        "recovery": ("recovery after the heal (median)",
                     f"within max({svr.RECOVERY_TOLERANCE_MS} ms, half the larger)"),
        "elections": ("elections (median per run)", "within one"),
    }
    lines += ["", "| metric | the two agree when |", "|---|---|",
              *(f"| {agree[m][0]} | {agree[m][1]} |" for m in svr.METRICS)]
    return _page(lines)


BLOCKS: dict[str, Callable[[], str]] = {
    "arms": arms_block,
    "comparisons": comparisons_block,
    "faults": faults_block,
    "study": study_block,
    "presets": presets_block,
    "settings": settings_block,
    "matrix-size": matrix_size_block,
    "margins": margins_block,
    "live-runs": live_block,
    "commands": commands_block,
    "sim-vs-real": sim_vs_real_block,
}


def render(text: str, blocks: dict[str, Callable[[], str]] | None = None) -> str:
    """`text` with every generated block's content rendered; ValueError on an unknown block or
    a block of BLOCKS that `text` lacks."""
    blocks = BLOCKS if blocks is None else blocks
    seen: set[str] = set()

    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in blocks:
            raise ValueError(f"unknown generated block {name!r}; known: {', '.join(blocks)}")
        seen.add(name)
        return m.group(1) + blocks[name]() + m.group(4)

    out = _BLOCK.sub(one, text)
    missing = [n for n in blocks if n not in seen]
    if missing:
        raise ValueError(f"generated blocks missing from the text: {', '.join(missing)}")
    return out


def diff(path: Path = DOC) -> str:
    """The unified diff from `path` to its rendering ("" when they agree)."""
    text = path.read_text()
    return "".join(difflib.unified_diff(text.splitlines(True), render(text).splitlines(True),
                                        f"{path.name} (as written)",
                                        f"{path.name} (rendered from the code)"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="?", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true",
                        help="print the diff and exit 1 if the file differs; write nothing")
    args = parser.parse_args(argv)
    changes = diff(args.path)
    if args.check:
        sys.stdout.write(changes)
        return 1 if changes else 0
    if changes:
        args.path.write_text(render(args.path.read_text()))
        print(f"{args.path}: regenerated")
    else:
        print(f"{args.path}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())

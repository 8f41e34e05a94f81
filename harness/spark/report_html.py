"""report.html beside compare.md: the study for a Kafka operator, verdicts first.

Order: how to read it (the unit of evidence, the pairing, the intervals and every margin, stated
before any number); the verdicts at equal safety, each with its headline, the loss it showed, the
mechanism of each decisive fault in a sentence, what it costs in latency, its forest plot, the
evidence table and its reproductions (seed, the command that replays it, the replica timeline
around the loss); the twelve reference scenarios; the trade-offs, labelled as such; what
durability costs; the trade-off curves; simulation against real processes; the earlier claims.

Everything is computed before this module runs (harness/spark/compare.py); it only lays out.
Self-contained HTML (inline CSS, images beside it), no script.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.spark.arms import ARMS, EQUAL_SAFETY
from harness.spark.reference import Finding
from harness.spark.repro import Replayed
from harness.spark.stats import LEVEL, METRICS, MIN_SEEDS, RESAMPLES
from harness.spark.study_plots import CURVES, LATENCY_PLOT, arm_of
from harness.spark.verdicts import Verdict

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{margin-bottom:.3em}.meta{color:#666;font-size:.9em}
.verdict{border-left:5px solid #1b9e77;padding:.2em 1em;margin:1.2em 0;background:#fafafa}
.trade{border-left-color:#d95f02}.headline{font-size:1.05em}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
code{background:#f3f3f3;padding:.1em .3em;font-size:.85em;word-break:break-all}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
.shown{color:#1a9850;font-weight:600}.not{color:#d73027;font-weight:600}
.nodata{color:#999}.outside{color:#7570b3}
details{margin:.4em 0}summary{cursor:pointer;color:#235}
"""
STATUS_CLASS = {"shown": "shown", "not shown": "not", "no data": "nodata",
                "outside the matrix": "outside"}


@dataclass(slots=True)
class HtmlInput:
    meta: dict[str, Any]
    verdicts: Sequence[Verdict]
    findings: Sequence[Finding]
    sentences: dict[str, list[str]]
    configs: pd.DataFrame
    forest_plots: dict[str, str] = field(default_factory=dict)  # comparison -> file name
    timelines: dict[str, Replayed] = field(default_factory=dict)
    sim_vs_real: pd.DataFrame | None = None


def esc(value: Any) -> str:
    return html.escape(str(value))


def cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return esc(value)


def table(frame: pd.DataFrame, columns: Sequence[str], heads: Sequence[str]) -> str:
    cols = [c for c in columns if c in frame.columns]
    names = [h for c, h in zip(columns, heads, strict=True) if c in frame.columns]
    rows = "".join("<tr>" + "".join(f"<td>{cell(r[c])}</td>" for c in cols) + "</tr>"
                   for _, r in frame.iterrows())
    return ("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in names) + "</tr>"
            + rows + "</table>")


def markdown_to_html(text: str) -> str:
    """The subset the timelines use: paragraphs, `- ` bullets, one pipe table, `code`."""
    out, bullets, rows = [], [], []

    def inline(s: str) -> str:
        parts = esc(s).split("`")
        return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

    def flush() -> None:
        if bullets:
            out.append("<ul>" + "".join(f"<li>{b}</li>" for b in bullets) + "</ul>")
            bullets.clear()
        if rows:
            head, *body = rows
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>"
                                 for r in body) + "</table>")
            rows.clear()

    for line in text.splitlines():
        if line.startswith("- "):
            bullets.append(inline(line[2:]))
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                rows.append(cells)
        else:
            flush()
            if line.strip():
                out.append(f"<p>{inline(line)}</p>")
    flush()
    return "\n".join(out)


def method_section() -> str:
    margins = "".join(
        f"<tr><td>{esc(m.label)}</td><td>{esc(m.unit)}</td><td>"
        f"{'higher' if m.higher_is_better else 'lower'}</td><td>"
        f"{100 * m.margin:g} pp</td></tr>" if m.unit == "fraction" else
        f"<tr><td>{esc(m.label)}</td><td>{esc(m.unit)}</td><td>"
        f"{'higher' if m.higher_is_better else 'lower'}</td><td>{m.margin:g} {esc(m.unit)}</td>"
        f"</tr>" for m in METRICS)
    return f"""
<h2>How to read this report (the rules, before the numbers)</h2>
<ul>
<li><b>The unit of evidence is the seed.</b> One seed fixes the fault schedule, its victims and
the clients' timings in every arm, so the runs of one seed in two arms are a pair; a cell is a
fault and its duration, the replication factor, the client and the timeouts.</li>
<li><b>Differences are paired.</b> Per cell, the mean over seeds of (challenger &minus; baseline),
with its {100 * LEVEL:.0f}% percentile bootstrap interval ({RESAMPLES} resamples of the seeds,
from a generator seeded by the cell's name, so the same data always gives the same interval).
</li>
<li><b>Verdict per cell</b>: <i>better</i> when the whole interval is past the margin below,
<i>the same</i> when it lies within the margin, <i>cannot tell</i> otherwise or with fewer than
{MIN_SEEDS} paired seeds.</li>
<li><b>Safety is not averaged.</b> An arm that lost an acknowledged write in any run of a cell
has shown that it can (the run is its reproduction, with the command that replays it); for an
arm that lost none, the 95% Wilson upper bound of its per-run loss rate is what the runs
exclude. Intervals are per cell, never pooled over different faults.</li>
<li><b>Availability in time</b> comes from an open-loop probe that offers one write every 10 ms
whatever is in flight; a slot counts as available when its write was acknowledged within
200 ms. The writers are Kafka-like producers (idempotent, retries within delivery.timeout.ms).
Phases: <i>before</i> the fault, <i>during</i> it (to the heal), <i>after</i>.</li>
<li><b>Equal safety</b> means the same acknowledgement rule (acks=all, 2 of 3 copies) at each
mode's own durability (ISR on the page cache, quorum and Raft with an fsync before an append
counts); everything else is a <i>trade-off</i>, labelled so.</li>
</ul>
<table><tr><th>metric</th><th>unit</th><th>better</th><th>margin (no difference within)</th></tr>
{margins}</table>"""


def _latency_of(configs: pd.DataFrame, arm: str) -> tuple[float, float] | None:
    if configs.empty:
        return None
    rows = configs[configs["source"] == "sim"]
    rows = rows[[arm_of(r) == arm for _, r in rows.iterrows()]]
    if rows.empty:
        return None
    return (float(rows["latency_p50_ms_before"].median()),
            float(rows["latency_p99_ms_before"].median()))


def cost_sentence(v: Verdict, configs: pd.DataFrame) -> str:
    a, b = v.comparison.a, v.comparison.b
    la, lb = _latency_of(configs, a), _latency_of(configs, b)
    if la is None or lb is None or any(math.isnan(x) for x in (*la, *lb)):
        return ""
    return (f"Cost without a fault: acknowledged-write latency p50/p99 {la[0]:.0f}/{la[1]:.0f} ms "
            f"for {ARMS[a].label}, {lb[0]:.0f}/{lb[1]:.0f} ms for {ARMS[b].label}.")


EVIDENCE_COLUMNS = ("nemesis", "seeds", "mean_a", "mean_b", "diff", "diff_low", "diff_high",
                    "verdict", "a_lossy_runs", "a_runs", "b_lossy_runs", "b_runs", "loss_verdict",
                    "a_lossy_seeds", "b_lossy_seeds")


def verdict_block(v: Verdict, inp: HtmlInput) -> str:
    kind = "verdict" if v.comparison.kind == EQUAL_SAFETY else "verdict trade"
    a, b = ARMS[v.comparison.a].label, ARMS[v.comparison.b].label
    mech = "".join(f"<li><b>{esc(n)}</b> ({esc(w)}): {esc(why)}</li>"
                   for n, w, why in v.decisive if why)
    parts = [f'<section class="{kind}"><h3>{esc(v.title)}</h3>',
             f'<p class="headline">{esc(v.headline)}</p>', f"<p>{esc(v.safety)}</p>"]
    if mech:
        parts.append(f"<p>Why, where it was decisive:</p><ul>{mech}</ul>")
    cost = cost_sentence(v, inp.configs)
    if cost:
        parts.append(f"<p>{esc(cost)}</p>")
    plot = inp.forest_plots.get(v.comparison.key)
    if plot:
        parts.append(f'<img src="{esc(plot)}" alt="paired differences, {esc(b)} vs {esc(a)}">')
    heads = ("fault", "seeds", "baseline mean", "challenger mean", "difference", "95% low",
             "95% high", "verdict", "baseline lossy runs", "of", "challenger lossy runs", "of",
             "loss", "baseline losing seeds", "challenger losing seeds")
    parts.append("<details><summary>Evidence per fault (baseline: " + esc(a) + "; challenger: "
                 + esc(b) + ")</summary>" + table(v.evidence, EVIDENCE_COLUMNS, heads)
                 + "</details>")
    for r in v.reproductions:
        replayed = inp.timelines.get(r.run_id)
        parts.append(f"<p>Reproduction: {esc(ARMS[r.arm].label)} under <b>{esc(r.nemesis)}</b>, "
                     f"seed {r.seed}, {r.lost_writes} acknowledged writes lost: "
                     f"<code>{esc(r.command or 'no replay command (real-process run)')}</code></p>")
        if replayed is not None:
            parts.append("<details><summary>Timeline around the loss (leader, epoch, ISR, LEO "
                         "and HW per replica)</summary>"
                         + markdown_to_html(replayed.timeline_markdown) + "</details>")
    parts.append("</section>")
    return "\n".join(parts)


def findings_section(findings: Sequence[Finding]) -> str:
    rows = "".join(
        f"<tr><td>{esc(f.ref)}</td><td>{esc(f.title)}</td><td class=\""
        f"{STATUS_CLASS.get(f.status, '')}\">{esc(f.status)}</td><td style=\"text-align:left\">"
        f"{esc(f.sentence)}</td></tr>" for f in findings)
    evidence = "".join(
        f"<details><summary>Evidence of {esc(f.ref)} ({esc(f.title)})</summary>"
        + table(f.evidence, list(f.evidence.columns), list(f.evidence.columns)) + "</details>"
        for f in findings if f.evidence is not None and not f.evidence.empty)
    return ("<h2>The twelve reference scenarios</h2><p>Each row is a rule over the runs that "
            "could come out either way; <i>outside the matrix</i> names the test that checks "
            "what the matrix cannot show.</p><table><tr><th>ref</th><th>scenario</th>"
            f"<th>verdict</th><th>what the runs show</th></tr>{rows}</table>{evidence}")


def cost_section(configs: pd.DataFrame) -> str:
    if configs.empty:
        return ""
    g = configs[configs["source"] == "sim"].copy()
    g["arm"] = [arm_of(r) for _, r in g.iterrows()]
    g = g[g["arm"].notna()]
    cols = [f"latency_{q}_ms_{p}" for p in ("before", "during", "after")
            for q in ("p50", "p99", "p999")]
    if g.empty or not set(cols) <= set(g.columns):
        return ""
    agg = g.groupby("arm")[cols].median().reset_index()
    heads = ["arm"] + [f"{q.replace('p999', 'p99.9')} {p}" for p in ("before", "during", "after")
                       for q in ("p50", "p99", "p999")]
    return ("<h2>What durability costs</h2><p>Acknowledged-write latency (ms) per arm and phase: "
            "the median over the arm's groups of the median over runs of each run's "
            "percentile. An fsync per append (flush.messages=1, quorum and Raft) adds the "
            "disk's fsync time, drawn from the distribution measured by "
            "<code>kraftlab bench fsync</code>.</p>"
            f'<img src="{LATENCY_PLOT}" alt="latency by arm">'
            + table(agg, ["arm", *cols], heads))


def curves_section() -> str:
    imgs = "".join(f'<h3>{esc(title)}</h3><img src="{esc(name)}" alt="{esc(title)}">'
                   for name, title, _, _, _ in CURVES)
    return ("<h2>Trade-off curves</h2><p>Top: the share of the probe's 10 ms slots acknowledged "
            "during the fault; bottom: the runs that lost an acknowledged write, with the 95% "
            "Wilson interval. Each point is one setting of one arm (the equal-safety arms; for "
            "the replication factor, ISR with min.insync.replicas 2 and 3; for the election "
            "timeout, Raft partitions only, the other arms electing through the controller), "
            "the other settings at the study's defaults.</p>" + imgs)


def sim_vs_real_section(frame: pd.DataFrame | None) -> str:
    if frame is None or frame.empty:
        return ("<h2>Simulation against real processes</h2><p>Not in this report: the table is "
                "produced by <code>kraftlab compare --sim-vs-real</code> (docs/compare.md).</p>")
    cols = list(frame.columns)
    return ("<h2>Simulation against real processes</h2><p>The same fault and settings on the "
            "simulator and on real processes (<code>kraftlab jepsen run</code>); disagreements "
            "are findings.</p>" + table(frame, cols, cols))


def write_html(out: Path, inp: HtmlInput) -> Path:
    eq = [v for v in inp.verdicts if v.comparison.kind == EQUAL_SAFETY]
    trade = [v for v in inp.verdicts if v.comparison.kind != EQUAL_SAFETY]
    meta = inp.meta
    earlier = "".join(f"<h3>{esc(source)}</h3><ul>" + "".join(f"<li>{esc(s)}</li>" for s in said)
                      + "</ul>" for source, said in inp.sentences.items())
    body = [
        "<!doctype html><html><head><meta charset=\"utf-8\">"
        "<title>kraftlab: replication under faults</title>"
        f"<style>{CSS}</style></head><body>",
        "<h1>ISR, quorum and Raft replication under faults</h1>",
        f'<p class="meta">{esc(meta.get("runs"))} runs ({esc(meta.get("sources"))}) from '
        f"{esc(meta.get('input'))}; Spark master <code>{esc(meta.get('master'))}</code>. Tables: "
        '<a href="compare.md">compare.md</a> and its CSV files; method: docs/compare.md.</p>',
        method_section(),
        "<h2>Verdicts at equal safety</h2>",
        *(verdict_block(v, inp) for v in eq),
        "" if eq else "<p>No paired runs of the equal-safety arms in this input.</p>",
        findings_section(inp.findings),
        "<h2>Trade-offs (unequal safety)</h2><p>These arms do not acknowledge under the same "
        "rule: the verdicts say what one buys with the other, not which is better.</p>",
        *(verdict_block(v, inp) for v in trade),
        cost_section(inp.configs),
        curves_section(),
        sim_vs_real_section(inp.sim_vs_real),
        "<h2>The earlier claims, rule by rule</h2>" + earlier,
        "</body></html>",
    ]
    path = out / "report.html"
    path.write_text("\n".join(body))
    return path

"""What a real-process run produced, for people: results.json figures, report.html, a PNG.

Everything here is derived from the history alone (plus the checker's verdict), so a report can
be rebuilt from any history.jsonl:
- fault intervals: a nemesis `start-*` op opens one at its first event, the next `stop-*` op
  closes it at its last event; `stop-all` is the final heal;
- each client op belongs to a phase by its invoke time: `during_fault` (inside an interval),
  `between_faults` (the run's quiet times) or `after_heal` (after the final heal: recovery
  and final reads);
- availability is served / attempted per phase, where served means the system gave a definite
  answer of its semantics: ok, or a cas whose compare did not match (CAS_FAILED is an answer,
  not an outage); `ok_fraction` is plain ok / attempted. Latency is completion minus invoke (info ops
  end at their timeout, so they show how long the client waited).
The HTML needs no network (inline SVG); the PNG uses matplotlib's Agg backend.
"""

from __future__ import annotations

import html
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.check.history import Operation

NS_PER_S = 1_000_000_000
COLOURS = {"ok": "#2e9d4f", "fail": "#d9822b", "info": "#c0392b"}
PHASES = ("during_fault", "between_faults", "after_heal")


def fault_intervals(ops: Sequence[Operation]) -> tuple[list[dict[str, Any]], int | None]:
    """([{fault, kind, start_s, end_s}], final heal time in ns or None). A skipped fault (the
    nemesis found nothing to act on, `start-skipped`) opens no interval: nothing was faulted."""
    intervals: list[dict[str, Any]] = []
    final_heal_ns: int | None = None
    open_: dict[str, Any] | None = None
    end_ns = max((op.completion or op.invoke).time for op in ops) if ops else 0
    for op in ops:
        if op.is_client or op.f in ("start-skipped", "stop-skipped"):
            continue
        done_ns = (op.completion or op.invoke).time
        if op.f.startswith("start-"):
            value = op.invoke.value if isinstance(op.invoke.value, dict) else {}
            open_ = {"fault": value.get("fault", op.f[6:]), "kind": op.f[6:],
                     "start_ns": op.invoke.time, "detail": op.value}
        elif op.f.startswith("stop-"):
            if open_ is not None:
                intervals.append({**open_, "end_ns": done_ns})
                open_ = None
            if op.f == "stop-all":
                final_heal_ns = done_ns
    if open_ is not None:
        intervals.append({**open_, "end_ns": end_ns})
    for item in intervals:
        item["start_s"] = round(item["start_ns"] / NS_PER_S, 3)
        item["end_s"] = round(item["end_ns"] / NS_PER_S, 3)
    return intervals, final_heal_ns


def phase_of(op: Operation, intervals: list[dict[str, Any]], final_heal_ns: int | None) -> str:
    t = op.invoke.time
    if final_heal_ns is not None and t >= final_heal_ns:
        return "after_heal"
    if any(i["start_ns"] <= t <= i["end_ns"] for i in intervals):
        return "during_fault"
    return "between_faults"


def _percentile(sorted_ms: list[float], q: float) -> float | None:
    if not sorted_ms:
        return None
    idx = min(len(sorted_ms) - 1, max(0, math.ceil(q * len(sorted_ms)) - 1))
    return round(sorted_ms[idx], 2)


def latency_ms(op: Operation) -> float:
    end = (op.completion or op.invoke).time
    return (end - op.invoke.time) / 1e6


def per_second(client: Sequence[Operation]) -> list[dict[str, Any]]:
    """Per second of invoke time: [ok, fail, info] of reads (read, poll) and of writes (write,
    cas, append, send); the comparison's row has its own (summary_row.py)."""
    if not client:
        return []
    last = max(op.invoke.time for op in client) // NS_PER_S
    rows: list[dict[str, Any]] = [
        {"t": t, "read": [0, 0, 0], "write": [0, 0, 0]} for t in range(last + 1)
    ]
    slot = {"ok": 0, "fail": 1, "info": 2}
    for op in client:
        if op.f in ("assign", "subscribe"):
            continue  # neither a read nor a write
        kind = "read" if op.f in ("read", "poll") else "write"
        rows[op.invoke.time // NS_PER_S][kind][slot[op.type]] += 1
    return rows


def summarise(ops: Sequence[Operation]) -> dict[str, Any]:
    """Counts per f and type, availability per phase, latency percentiles, fault intervals."""
    intervals, final_heal_ns = fault_intervals(ops)
    client = [op for op in ops if op.is_client]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    phases: dict[str, Counter[str]] = {p: Counter() for p in PHASES}
    errors: Counter[str] = Counter()
    totals: Counter[str] = Counter(op.type for op in client)
    for op in client:
        counts[op.f][op.type] += 1
        phase = phases[phase_of(op, intervals, final_heal_ns)]
        phase[op.type] += 1
        if op.type == "ok" or (op.type == "fail" and op.error == "CAS_FAILED"):
            phase["served"] += 1
            totals["served"] += 1
        if op.error is not None and op.type != "ok":
            errors[f"{op.type}:{op.error.split(':')[0]}"] += 1

    def avail(c: Counter[str]) -> dict[str, Any]:
        attempted = c["ok"] + c["fail"] + c["info"]
        return {"ok": c["ok"], "fail": c["fail"], "info": c["info"], "attempted": attempted,
                "served": c["served"],
                "availability": round(c["served"] / attempted, 4) if attempted else None,
                "ok_fraction": round(c["ok"] / attempted, 4) if attempted else None}

    ok_ms = sorted(latency_ms(op) for op in client if op.type == "ok")
    return {
        "ops": len(client),
        "counts": {f: {t: c[t] for t in ("ok", "fail", "info")} for f, c in sorted(counts.items())},
        "totals": {t: totals[t] for t in ("ok", "fail", "info", "served")},
        "availability": round(totals["served"] / len(client), 4) if client else None,
        "ok_fraction": round(totals["ok"] / len(client), 4) if client else None,
        "phases": {p: avail(c) for p, c in phases.items()},
        "errors": dict(errors.most_common()),
        "latency_ms_ok": {"p50": _percentile(ok_ms, 0.5), "p95": _percentile(ok_ms, 0.95),
                          "p99": _percentile(ok_ms, 0.99),
                          "max": round(ok_ms[-1], 2) if ok_ms else None},
        "faults": [{k: v for k, v in i.items() if not k.endswith("_ns")} for i in intervals],
        "final_heal_s": None if final_heal_ns is None else round(final_heal_ns / NS_PER_S, 3),
        "per_second": per_second(client),
    }


# ------------------------------------------------------------------------------------ views

WIDTH_PX = 1100
LEFT_PX = 60
LANE_PX = 12
LAT_PX = 220


def _lane(op: Operation, workers: int) -> int:
    return op.process % workers if isinstance(op.process, int) else 0


def _svg(ops: Sequence[Operation], summary: dict[str, Any], workers: int) -> str:
    client = [op for op in ops if op.is_client]
    span_s = max([(op.completion or op.invoke).time / NS_PER_S for op in ops] + [1.0])
    plot_w = WIDTH_PX - LEFT_PX - 10
    lanes = max([_lane(op, workers) for op in client] + [workers - 1]) + 1
    top_h = lanes * LANE_PX + 20
    lat_top = top_h + 30
    height = lat_top + LAT_PX + 30

    def x(t_s: float) -> float:
        return LEFT_PX + plot_w * t_s / span_s

    max_ms = max([latency_ms(op) for op in client] + [10.0])
    log_max = math.log10(max_ms * 1.2)

    def y_lat(ms: float) -> float:
        frac = (math.log10(max(ms, 1.0))) / log_max
        return lat_top + LAT_PX - frac * LAT_PX

    out: list[str] = []
    for item in summary["faults"]:
        x0, x1 = x(item["start_s"]), x(item["end_s"])
        for y0, h in ((0, top_h), (lat_top, LAT_PX)):
            out.append(f'<rect x="{x0:.1f}" y="{y0}" width="{max(x1 - x0, 1):.1f}" height="{h}" '
                       f'fill="#f5c6cb" opacity="0.5"><title>{html.escape(item["fault"])} '
                       f'{item["start_s"]}-{item["end_s"]} s</title></rect>')
        out.append(f'<text x="{x0 + 2:.1f}" y="10" class="lbl">{html.escape(item["fault"])}</text>')
    if summary["final_heal_s"] is not None:
        xh = x(summary["final_heal_s"])
        out.append(f'<line x1="{xh:.1f}" y1="0" x2="{xh:.1f}" y2="{height - 30}" '
                   'stroke="#555" stroke-dasharray="4,3"/>')
    for lane in range(lanes):
        out.append(f'<text x="4" y="{20 + lane * LANE_PX + 9}" class="lbl">w{lane}</text>')
    for op in client:
        t0 = op.invoke.time / NS_PER_S
        t1 = (op.completion or op.invoke).time / NS_PER_S
        y = 20 + _lane(op, workers) * LANE_PX
        node = op.flag("node")
        tip = html.escape(f"p{op.process} {op.type} {op.f} {op.value} {op.error or ''}"
                          + ("" if node is None else f" (node {node})"))
        out.append(f'<rect x="{x(t0):.1f}" y="{y}" width="{max(x(t1) - x(t0), 1.5):.1f}" '
                   f'height="{LANE_PX - 3}" fill="{COLOURS[op.type]}"><title>{tip}</title></rect>')
        out.append(f'<circle cx="{x(t0):.1f}" cy="{y_lat(latency_ms(op)):.1f}" r="2" '
                   f'fill="{COLOURS[op.type]}"><title>{tip} {latency_ms(op):.1f} ms</title></circle>')
    for ms in (1, 10, 100, 1000, 10000):
        if ms <= max_ms * 1.2:
            out.append(f'<text x="4" y="{y_lat(ms) + 4:.1f}" class="lbl">{ms} ms</text>'
                       f'<line x1="{LEFT_PX}" x2="{WIDTH_PX - 10}" y1="{y_lat(ms):.1f}" '
                       f'y2="{y_lat(ms):.1f}" stroke="#ddd"/>')
    step = max(1, round(span_s / 10))
    for s in range(0, int(span_s) + 1, step):
        out.append(f'<text x="{x(s) - 4:.1f}" y="{height - 10}" class="lbl">{s}s</text>')
    return (f'<svg width="{WIDTH_PX}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
            + "\n".join(out) + "</svg>")


def _queue_anomalies(anomalies: dict[str, Any], shown: int = 3) -> str:
    """A table of the queue checker's anomalies: count and the first examples (JSON)."""
    import json

    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{item.get('count')}</td><td><pre>"
        + html.escape("\n".join(json.dumps(e, default=str) for e in item.get("examples", [])[:shown]))
        + "</pre></td></tr>"
        for name, item in anomalies.items() if isinstance(item, dict)
    )
    return ("<h2>Anomalies</h2><table><tr><th>anomaly</th><th>count</th>"
            f"<th>first examples (results.json has up to 8)</th></tr>{rows}</table>")


def _settings(results: dict[str, Any]) -> str:
    """The workload's settings in one phrase (kv: read consistency; queue: durability)."""
    if results.get("workload") == "queue":
        return (f"acks={results.get('acks')}, min.insync.replicas="
                f"{results.get('min_insync_replicas')}, RF {results.get('replication_factor')}, "
                f"unclean={results.get('unclean_leader_election')}, idempotence="
                f"{results.get('idempotence')}, {results.get('partitions')} partitions, "
                f"probe recovery {results.get('probe_recovery_s')} s")
    return f"reads {results.get('consistency')}"


def _system(results: dict[str, Any]) -> str:
    """What the run ran against, as the title says it."""
    if results.get("system", "kraftlab") == "kraftlab":
        return "kraftlab"
    version = (results.get("peer") or {}).get("version")
    return f"Apache Kafka {version}" if version else str(results["system"])


def render_html(ops: Sequence[Operation], results: dict[str, Any], workers: int) -> str:
    summary = results["summary"]
    verdict = results["verdict"]
    colour = {"valid": "#2e9d4f", "invalid": "#c0392b"}.get(verdict, "#d9822b")
    rows = "".join(
        f"<tr><td>{html.escape(f)}</td><td>{c['ok']}</td><td>{c['fail']}</td><td>{c['info']}</td></tr>"
        for f, c in summary["counts"].items()
    )
    phase_rows = "".join(
        f"<tr><td>{p}</td><td>{v['attempted']}</td><td>{v['ok']}</td><td>{v['fail']}</td>"
        f"<td>{v['info']}</td><td>{v['availability']}</td></tr>"
        for p, v in summary["phases"].items()
    )
    faults = "".join(
        f"<li>{i['start_s']}-{i['end_s']} s: <b>{html.escape(i['fault'])}</b> "
        f"{html.escape(str(i.get('detail')))}</li>" for i in summary["faults"]
    )
    anomalies = html.escape(str(list(results["anomalies"]))) if results["anomalies"] else "none"
    extra = ""
    if "linearizability_html" in results.get("files", {}):
        extra = f'<p>Failure window: <a href="{results["files"]["linearizability_html"]}">' \
                f'{results["files"]["linearizability_html"]}</a></p>'
    if results.get("workload") == "queue" and results["anomalies"]:
        extra += _queue_anomalies(results["anomalies"])
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kraftlab jepsen: {html.escape(results['workload'])}
on {html.escape(_system(results))} under {html.escape(results['nemesis'])}</title>
<style>body {{ font-family: sans-serif; margin: 20px; }} .lbl {{ font-size: 10px; fill: #333; }}
table {{ border-collapse: collapse; margin: 8px 0 16px; }}
td, th {{ border: 1px solid #bbb; padding: 2px 8px; font-size: 13px; }}</style></head><body>
<h1>{html.escape(results['workload'])} on {html.escape(_system(results))} under
{html.escape(results['nemesis'])}:
<span style="color:{colour}">{verdict.upper()}</span></h1>
<p>seed {results['seed']}, time limit {results['time_limit_s']} s, {html.escape(_settings(results))};
anomalies: {anomalies}.
Availability (served/attempted: ok, or a cas compare that did not match) {summary['availability']}; ok latency p50
{summary['latency_ms_ok']['p50']} ms, p99 {summary['latency_ms_ok']['p99']} ms.</p>
{extra}
<p>Top: one lane per client worker, each operation a bar from invoke to completion
(<span style="color:{COLOURS['ok']}">ok</span>, <span style="color:{COLOURS['fail']}">fail</span>,
<span style="color:{COLOURS['info']}">info</span>). Bottom: latency of each operation at its
invoke time (log scale). Shaded: nemesis faults; dashed line: the final heal.</p>
{_svg(ops, summary, workers)}
<h2>Operations</h2><table><tr><th>f</th><th>ok</th><th>fail</th><th>info</th></tr>{rows}</table>
<h2>Availability by phase</h2><table><tr><th>phase</th><th>attempted</th><th>ok</th><th>fail</th>
<th>info</th><th>ok/attempted</th></tr>{phase_rows}</table>
<h2>Faults</h2><ul>{faults or '<li>none</li>'}</ul>
<h2>Errors</h2><p>{html.escape(str(summary['errors']))}</p>
</body></html>
"""


def write_png(ops: Sequence[Operation], results: dict[str, Any], workers: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    client = [op for op in ops if op.is_client]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [1, 1]})
    for item in summary["faults"]:
        for ax in (top, bottom):
            ax.axvspan(item["start_s"], item["end_s"], color="#f5c6cb", alpha=0.5, lw=0)
        top.text(item["start_s"], workers - 0.4, item["fault"], fontsize=7, va="bottom")
    if summary["final_heal_s"] is not None:
        for ax in (top, bottom):
            ax.axvline(summary["final_heal_s"], color="#555", ls="--", lw=0.8)
    for kind, colour in COLOURS.items():
        chosen = [op for op in client if op.type == kind]
        starts = [op.invoke.time / NS_PER_S for op in chosen]
        ends = [(op.completion or op.invoke).time / NS_PER_S for op in chosen]
        lanes = [_lane(op, workers) for op in chosen]
        top.hlines(lanes, starts, ends, colors=colour, lw=4, label=kind)
        bottom.scatter(starts, [max(latency_ms(op), 0.1) for op in chosen], s=4, c=colour)
    top.set_ylabel("client worker")
    top.legend(loc="upper right", fontsize=7)
    bottom.set_yscale("log")
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("time (s)")
    fig.suptitle(f"{results['workload']} on {_system(results)} under {results['nemesis']}: "
                 f"{results['verdict']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

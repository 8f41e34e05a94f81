"""An HTML view of a linearizability failure: one self-contained file, no scripts.

The view shows the failing window of one partition as a timeline (x: history position,
one row per process). Each operation is a bar from its call to its return; an `info` operation
has no return and its bar runs off the right edge, dashed. Colours:
- green: in the longest linearizable prefix the search found (the number is its place in it);
- red: pending at the failure point and impossible to linearize next;
- dark red outline: the operation whose return forced the search back (`blocking`);
- grey: other operations overlapping the window.
Below the timeline: the model state after the prefix and the tables the text report prints.
"""

from __future__ import annotations

import html
from pathlib import Path

from harness.check.linearizable import FailureWindow, LinearizabilityResult
from harness.check.models import Model, ModelOp

ROW_PX = 26
LEFT_PX = 90
WIDTH_PX = 1100


def _colour(mop: ModelOp, prefix_pos: dict[int, int], stuck_ids: set[int]) -> str:
    if mop.op.id in stuck_ids:
        return "#e06666"
    if mop.op.id in prefix_pos:
        return "#93c47d"
    return "#cccccc"


def _bars(model: Model, window: FailureWindow) -> tuple[str, int]:
    ops = list(window.context) or list(window.stuck)
    prefix_pos = {m.op.id: k for k, m in enumerate(window.prefix, start=1)}
    stuck_ids = {m.op.id for m in window.stuck}
    lo = min(m.op.call_index for m in ops)
    hi = max(max(m.op.call_index, m.op.return_index or m.op.call_index) for m in ops) + 2
    scale = (WIDTH_PX - LEFT_PX - 20) / max(1, hi - lo)
    processes = sorted(
        {m.op.process for m in ops}, key=lambda p: (isinstance(p, str), str(p).zfill(12))
    )
    row_of = {p: k for k, p in enumerate(processes)}
    parts: list[str] = []
    for p, k in row_of.items():
        y = 20 + k * ROW_PX
        parts.append(f'<text x="4" y="{y + 15}" class="proc">process {html.escape(str(p))}</text>')
    for mop in ops:
        op = mop.op
        y = 20 + row_of[op.process] * ROW_PX
        x0 = LEFT_PX + (op.call_index - lo) * scale
        ret = op.return_index
        x1 = WIDTH_PX - 10 if ret is None else LEFT_PX + (ret - lo) * scale
        label = model.describe_op(mop.input, mop.output)
        pos = prefix_pos.get(op.id)
        if pos is not None:
            label = f"#{pos} {label}"
        stroke = "#7f0000" if op.id == window.blocking.op.id else "#555555"
        dash = ' stroke-dasharray="4 3"' if ret is None else ""
        title = f"op {op.id} process {op.process} [{op.call_index}, {ret if ret is not None else 'open'}] {op.type}"
        parts.append(
            f"<g><title>{html.escape(title)}</title>"
            f'<rect x="{x0:.1f}" y="{y}" width="{max(4.0, x1 - x0):.1f}" height="{ROW_PX - 6}" '
            f'fill="{_colour(mop, prefix_pos, stuck_ids)}" stroke="{stroke}"{dash} rx="3"/>'
            f'<text x="{x0 + 3:.1f}" y="{y + 14}" class="op">{html.escape(label)}</text></g>'
        )
    height = 40 + len(processes) * ROW_PX
    return "\n".join(parts), height


def _table(model: Model, title: str, mops: list[ModelOp]) -> str:
    rows = "".join(
        f"<tr><td>{m.op.id}</td><td>{html.escape(str(m.op.process))}</td>"
        f"<td>{m.op.call_index}</td><td>{m.op.return_index if m.op.return_index is not None else 'open'}</td>"
        f"<td>{html.escape(model.describe_op(m.input, m.output))}</td></tr>"
        for m in mops
    )
    return (
        f"<h2>{html.escape(title)}</h2><table><tr><th>op</th><th>process</th><th>call</th>"
        f"<th>return</th><th>operation</th></tr>{rows}</table>"
    )


def render_failure_html(result: LinearizabilityResult, model: Model, source: str = "") -> str:
    window = result.failure
    if window is None:
        raise ValueError("render_failure_html needs an invalid result")
    bars, height = _bars(model, window)
    start, end = window.window
    partition = (
        "" if window.partition is None else f" for key {html.escape(repr(window.partition))}"
    )
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Not linearizable{partition}</title>
<style>
body {{ font-family: sans-serif; margin: 20px; }}
.proc {{ font-size: 12px; fill: #333; }}
.op {{ font-size: 11px; fill: #000; }}
table {{ border-collapse: collapse; margin-bottom: 16px; }}
td, th {{ border: 1px solid #bbb; padding: 2px 8px; font-size: 13px; }}
</style></head><body>
<h1>Not linearizable{partition}</h1>
<p>{html.escape(source)} model <b>{html.escape(result.model)}</b>: the longest linearizable prefix
has {len(window.prefix)} operations and leaves the state at
<b>{html.escape(model.describe_state(window.state))}</b>. None of the red operations (pending at
that point) can be linearized next; the operation outlined in dark red had returned by history
position {end}. Window: positions {start}..{end}.</p>
<p>Legend: green = in the prefix (#n is its place), red = cannot be linearized next,
grey = other operations in the window, dashed = info (open to the end).</p>
<svg width="{WIDTH_PX}" height="{height}" xmlns="http://www.w3.org/2000/svg">
{bars}
</svg>
{_table(model, "Pending operations that cannot be linearized next", list(window.stuck))}
{_table(model, "Last operations of the linearizable prefix", list(window.prefix[-10:]))}
</body></html>
"""


def write_failure_html(
    result: LinearizabilityResult, model: Model, path: str | Path, source: str = ""
) -> Path:
    out = Path(path)
    out.write_text(render_failure_html(result, model, source), encoding="utf-8")
    return out

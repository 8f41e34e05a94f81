"""The replica timeline of one scenario run: what a reader needs to see how a write was lost.

`record_timeline(config)` runs the scenario (harness.sim.runs.scenario_run; the same config
gives the same run) with an after-hook on the World that snapshots every broker after each
event of any process: up or down, the leader and leader epoch its replica believes, the ISR, LEO and HW.
A row is kept when any of these changes. `Timeline.around_loss()` cuts the rows to the window
that explains a loss: from shortly before the first lost write was acknowledged to shortly after
the last structural change (leader, epoch, ISR, a process up or down) following it, keeping
every structural change and at most one LEO/HW-only row per SAMPLE_MS; `markdown()` renders it
with the fault spans and the lost offsets, the way Jepsen analyses and KIP motivations show a
case.

Invariants: recording only reads the cluster (the run and its summary row are the same as
without it); rows are in simulated time order; a broker that is down shows `up=False` and the
state its disk will restart from is not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.sim.runs.scenario_run import ScenarioConfig, ScenarioResult, ScenarioRun

SAMPLE_MS = 500
MARGIN_MS = 300


@dataclass(frozen=True, slots=True)
class Replica:
    broker: int
    up: bool
    leader: int  # as this replica believes (-1: none, or no replica)
    leader_epoch: int
    isr: tuple[int, ...]
    leo: int
    hw: int

    def structure(self) -> tuple[Any, ...]:
        return (self.up, self.leader, self.leader_epoch, self.isr)


@dataclass(frozen=True, slots=True)
class Row:
    time_ms: int
    replicas: tuple[Replica, ...]

    def structure(self) -> tuple[Any, ...]:
        return tuple(r.structure() for r in self.replicas)


@dataclass(slots=True)
class Timeline:
    run_id: str
    rows: list[Row] = field(default_factory=list)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)  # offset, value, acked_ms
    lost_count: int = 0

    def around_loss(self) -> list[Row]:
        """The rows of the window that explains the loss (every row without one)."""
        if not self.lost or not self.rows:
            return list(self.rows)
        start = min(x["acked_ms"] for x in self.lost if x["acked_ms"] is not None) - MARGIN_MS
        changes = [r.time_ms for prev, r in zip(self.rows, self.rows[1:], strict=False)
                   if r.time_ms >= start and r.structure() != prev.structure()]
        end = (max(changes) if changes else start) + MARGIN_MS
        out: list[Row] = []
        for row in self.rows:
            if not start <= row.time_ms <= end:
                continue
            structural = not out or row.structure() != out[-1].structure()
            if structural or row.time_ms - out[-1].time_ms >= SAMPLE_MS:
                out.append(row)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "spans": self.spans, "lost": self.lost,
                "lost_count": self.lost_count,
                "rows": [{"time_ms": r.time_ms, "replicas": [
                    {"broker": x.broker, "up": x.up, "leader": x.leader,
                     "leader_epoch": x.leader_epoch, "isr": list(x.isr), "leo": x.leo,
                     "hw": x.hw} for x in r.replicas]} for r in self.around_loss()]}

    def markdown(self) -> str:
        lines = [f"Run `{self.run_id}`.", ""]
        lines += [f"- fault {kind}: {a}-{b} ms" for a, b, kind in self.spans]
        if self.lost:
            shown = ", ".join(f"offset {x['offset']} (value {x['value']}, acknowledged at "
                              f"{x['acked_ms']} ms)" for x in self.lost[:10])
            more = f" and {self.lost_count - 10} more" if self.lost_count > 10 else ""
            lines.append(f"- lost acknowledged writes ({self.lost_count}): {shown}{more}")
        rows = self.around_loss()
        if not rows:
            return "\n".join(lines)
        brokers = [r.broker for r in rows[0].replicas]
        head = ["ms"] + [f"broker {b}: leader/epoch, ISR, LEO/HW" for b in brokers]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in rows:
            cells = [str(row.time_ms)] + [_cell(x) for x in row.replicas]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _cell(x: Replica) -> str:
    if not x.up:
        return "down"
    leader = "-" if x.leader < 0 else str(x.leader)
    me = " (leads)" if x.leader == x.broker else ""
    return f"{leader}/{x.leader_epoch}{me}, [{','.join(map(str, x.isr))}], {x.leo}/{x.hw}"


def _snapshot(run: ScenarioRun, now_ms: int) -> Row:
    replicas = []
    for b, broker in sorted(run.cluster.brokers.items()):
        core = broker.core
        part = core.partition if core is not None else None
        replicas.append(Replica(
            b, bool(broker.up), part.leader if part is not None else -1,
            core.leader_epoch if core is not None else -1,
            tuple(sorted(core.isr)) if core is not None else (),
            broker.log.log_end_offset if broker.log is not None and broker.up else -1,
            core.high_watermark if core is not None else -1))
    return Row(now_ms, tuple(replicas))


def _lost(result: ScenarioResult) -> list[dict[str, Any]]:
    acked: dict[Any, int] = {}
    for e in result.history.events:
        if e.f == "send" and e.type == "ok":
            acked[e.value[1][1]] = e.time // 1_000_000
    lost = [{"offset": x.get("offset"), "value": x.get("value"),
             "acked_ms": acked.get(x.get("value"))}
            for x in result.queue.anomalies.get("lost-write", [])]
    return sorted(lost, key=lambda x: (x["offset"] is None, x["offset"] or 0))


def record_timeline(config: ScenarioConfig) -> tuple[ScenarioResult, Timeline]:
    """Run `config` with the timeline recorder (see the module docstring)."""
    run = ScenarioRun(config)
    timeline = Timeline(config.key())
    world = run.cluster.world

    def after(actor: Any) -> None:
        # After any actor's event (a fault itself is no actor's event: a crash shows at the
        # next event of anyone, clients included, a few ms later at most).
        row = _snapshot(run, world.now_ms)
        rows = timeline.rows
        if not rows or rows[-1].replicas != row.replicas:
            if rows and rows[-1].time_ms == row.time_ms:
                rows[-1] = row  # several events at one instant: the state after the last
            else:
                rows.append(row)

    world.after_hooks.append(after)
    result = run.run()
    timeline.spans = [(s.start_ms, s.end_ms, s.kind) for s in result.timeline]
    timeline.lost = _lost(result)
    timeline.lost_count = result.queue.counts.get("lost-write", 0)
    return result, timeline

"""The timeline under the view: what changed between two view states, as events a person reads.

One function, `changes(before, after)`, serves both views: the live one diffs successive polls of
a running cluster (harness/ui/live.py), the replay diffs successive frames of a recorded
simulation (harness/sim/runs/recording.py). Both states have the shape docs/ui.md "The view
state" describes, so the same fault, election or ISR change reads the same in both.

An event is `{"time_ms", "kind", "text"}`, kinds:
- fault: a node went down, came back, was paused or resumed; links cut or healed;
- election: a new active controller, a new partition leader or leader epoch;
- broker: a broker fenced, unfenced or registered with a new broker epoch;
- isr: the ISR (or ELR, KIP-966) shrank or grew;
- hw: the partition leader's high watermark moved;
- truncation: a replica that stayed up has a shorter log than before (it truncated: to its HW
  before KIP-101, to the end of the leader's epoch after);
- anomaly: a divergence or a loss (recorded runs; harness/sim/runs/recording.py says which).

Pure: no I/O, no clock; `before` None means "nothing seen yet" and yields no event.
"""

from __future__ import annotations

from typing import Any

State = dict[str, Any]
Event = dict[str, Any]


def changes(before: State | None, after: State) -> list[Event]:
    """Events that turn `before` into `after`, in a stable order (nodes, partitions, links)."""
    if before is None:
        return []
    texts: list[tuple[str, str]] = []
    texts += _nodes("controller", before.get("controllers", []), after.get("controllers", []))
    texts += _active_controller(before, after)
    texts += _nodes("broker", before.get("brokers", []), after.get("brokers", []))
    texts += _registrations(before.get("brokers", []), after.get("brokers", []))
    old_parts = {_name(p): p for p in before.get("partitions", [])}
    for part in after.get("partitions", []):
        old = old_parts.get(_name(part))
        if old is not None:
            texts += _partition(old, part)
    texts += _links(before.get("links", []), after.get("links", []))
    texts += _anomalies(before.get("anomalies", []), after.get("anomalies", []))
    return [{"time_ms": after["time_ms"], "kind": kind, "text": text} for kind, text in texts]


def _name(part: State) -> str:
    return f"{part['topic']}-{part['partition']}"


def _nodes(what: str, before: list[State], after: list[State]) -> list[tuple[str, str]]:
    old = {n["id"]: n for n in before}
    out = []
    for node in after:
        prev = old.get(node["id"])
        if prev is None:
            continue
        name = f"{what} {node['id']}"
        if prev["up"] and not node["up"]:
            out.append(("fault", f"{name} went down"))
        elif node["up"] and not prev["up"]:
            out.append(("fault", f"{name} started"))
        elif node["up"] and node.get("paused") != prev.get("paused"):
            out.append(("fault", f"{name} {'paused' if node.get('paused') else 'resumed'}"))
    return out


def _active_controller(before: State, after: State) -> list[tuple[str, str]]:
    def leader(state: State) -> tuple[int | None, int | None]:
        for c in state.get("controllers", []):
            if c.get("role") == "leader" and c.get("up") and not c.get("paused"):
                return c["id"], c.get("epoch")
        return None, None

    (old, old_epoch), (new, new_epoch) = leader(before), leader(after)
    if (old, old_epoch) == (new, new_epoch):
        return []
    if new is None:
        return [("election", f"no active controller (was {old})")]
    epoch = f" in epoch {new_epoch}" if new_epoch is not None else ""
    votes = ""
    voters = [c for c in after.get("controllers", []) if c.get("voted_id") == new
              and c.get("epoch") == new_epoch]
    if voters:
        votes = f" (votes from {', '.join(str(c['id']) for c in voters)})"
    return [("election", f"controller {new} is the active controller{epoch}{votes}")]


def _registrations(before: list[State], after: list[State]) -> list[tuple[str, str]]:
    old = {b["id"]: b for b in before}
    out = []
    for b in after:
        prev = old.get(b["id"])
        if prev is None:
            continue
        if b.get("epoch") is not None and b.get("epoch") != prev.get("epoch"):
            out.append(("broker", f"broker {b['id']} registered with broker epoch {b['epoch']}"
                        + (f" (was {prev['epoch']})" if prev.get("epoch") is not None else "")))
        if b.get("fenced") != prev.get("fenced") and b.get("registered"):
            out.append(("broker", f"broker {b['id']} {'fenced' if b['fenced'] else 'unfenced'}"))
    return out


def _partition(old: State, new: State) -> list[tuple[str, str]]:
    name = _name(new)
    out: list[tuple[str, str]] = []
    if (new["leader"], new["leader_epoch"]) != (old["leader"], old["leader_epoch"]):
        leader = "no leader" if new["leader"] is None else f"leader {new['leader']}"
        out.append(("election", f"{name}: {leader} in epoch {new['leader_epoch']} (was "
                    f"{old['leader'] if old['leader'] is not None else 'none'}, epoch "
                    f"{old['leader_epoch']})"))
    for field in ("isr", "elr"):
        before, after = set(old.get(field) or []), set(new.get(field) or [])
        label = field.upper()
        if after < before:
            out.append(("isr", f"{name}: {label} shrank to {sorted(after)} "
                        f"({', '.join(map(str, sorted(before - after)))} out)"))
        elif after > before:
            out.append(("isr", f"{name}: {label} grew to {sorted(after)} "
                        f"({', '.join(map(str, sorted(after - before)))} in)"))
        elif after != before:
            out.append(("isr", f"{name}: {label} is now {sorted(after)} (was {sorted(before)})"))
    old_logs = {lg["id"]: lg for lg in old.get("logs", [])}
    for lg in new.get("logs", []):
        prev = old_logs.get(lg["id"])
        if prev is None:
            continue
        if lg["role"] == "leader" and prev["role"] == "leader" and lg["hw"] != prev["hw"]:
            out.append(("hw", f"{name}: high watermark {prev['hw']} -> {lg['hw']} "
                        f"(leader {lg['id']})"))
        if lg["leo"] < prev["leo"] and "down" not in (lg["role"], prev["role"]):
            if lg["role"] == "recovering":  # reopened from disk: what was not flushed is gone
                out.append(("truncation", f"{name}: broker {lg['id']}'s log came back from "
                            f"disk shorter, {prev['leo']} -> {lg['leo']} (unflushed tail lost)"))
            else:
                out.append(("truncation", f"{name}: broker {lg['id']} truncated its log from "
                            f"{prev['leo']} to {lg['leo']}"))
    return out


def _links(before: list[list[int]], after: list[list[int]]) -> list[tuple[str, str]]:
    old = {tuple(sorted(pair)) for pair in before}
    new = {tuple(sorted(pair)) for pair in after}

    def show(pairs: set[tuple[int, ...]]) -> str:
        return ", ".join(f"{a}-{b}" for a, b in sorted(pairs))

    out = []
    if new - old:
        out.append(("fault", f"links cut: {show(new - old)}"))
    if old - new:
        out.append(("fault", f"links healed: {show(old - new)}"))
    return out


def _anomalies(before: list[State], after: list[State]) -> list[tuple[str, str]]:
    seen = {a["kind"] for a in before}
    return [("anomaly", a["text"]) for a in after if a["kind"] not in seen]

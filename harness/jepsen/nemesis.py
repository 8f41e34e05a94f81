"""The nemesis for real-process runs: network partitions and process faults on a local cluster.

Faults act only through the cluster's public surface: `POST/DELETE /nemesis/links` on each
node's admin API (drop Raft traffic to and from the listed peers; client HTTP is untouched, so a
cut-off follower still forwards client requests) and the launcher functions of
`harness.cluster` (SIGKILL / SIGSTOP / SIGCONT / SIGTERM by the PID recorded in cluster.json,
after checking that PID still runs our node; restart rewrites cluster.json).

Fault names (`FAULTS`; groups in `GROUPS`):
- partitions: `isolate-one` (a random node cut from all others), `isolate-follower`,
  `isolate-leader` (the current controller leader), `halves` (random halves),
  `majority-minority` (the leader on the minority side), `majorities-ring` (every node sees a
  majority, no two the same one; with 3 nodes that cannot cut anything, so one random link is
  cut, leaving a chain), `bridge` (two halves joined by one node that sees both);
- processes: `kill` / `kill-leader` (kill -9, healed by starting the node again), `pause` /
  `pause-leader` (SIGSTOP, healed by SIGCONT), `restart` (SIGTERM, then start at once).

A schedule (`Schedule`) is seeded and bounded: a quiet lead-in, then until the deadline: pick a
fault, apply it, hold it for a random time in `fault_s`, heal it, stay quiet for a random time
in `quiet_s`. One fault at a time. Each step is recorded Jepsen-style as two `info` events of
process "nemesis" (`start-partition` ... `start-partition`, `stop-partition` ...), whose values
say what was done. `heal_all` undoes everything whatever happened before (links cleared on every
node, every node resumed and started if down); the runner always calls it.

Grudges (`Grudge`: node -> peers it drops) are symmetric: a cut link drops traffic both ways.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness import cluster as cl
from harness.jepsen.history import NEMESIS
from harness.jepsen.recorder import Recorder

Grudge = dict[int, frozenset[int]]

PARTITIONS = ("isolate-one", "isolate-follower", "isolate-leader", "halves",
              "majority-minority", "majorities-ring", "bridge")
PROCESS_FAULTS = ("kill", "kill-leader", "pause", "pause-leader", "restart")
FAULTS = PARTITIONS + PROCESS_FAULTS
GROUPS: dict[str, tuple[str, ...]] = {
    "none": (),
    "partition": PARTITIONS,
    "process": PROCESS_FAULTS,
    "all": FAULTS,
}


class NemesisError(ValueError):
    """A nemesis specification that names no known fault."""


def parse_nemesis(spec: str) -> tuple[str, ...]:
    """`kill,halves` or a group name (`partition`, `process`, `all`, `none`) -> fault names."""
    out: list[str] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        names = GROUPS.get(part, (part,) if part in FAULTS else None)
        if names is None:
            raise NemesisError(
                f"unknown nemesis {part!r}; use faults {', '.join(FAULTS)} "
                f"or groups {', '.join(GROUPS)}, comma-separated"
            )
        out += [n for n in names if n not in out]
    if not out and spec.strip() not in ("none", ""):
        raise NemesisError(f"nemesis {spec!r} names no fault")
    return tuple(out)


# ------------------------------------------------------------------------- grudges (pure)


def grudge_from_sides(nodes: Sequence[int], connected: Callable[[int, int], bool]) -> Grudge:
    """Each node drops every peer it is not connected to (symmetric if `connected` is)."""
    return {a: frozenset(b for b in nodes if b != a and not connected(a, b)) for a in nodes}


def grudge_components(nodes: Sequence[int], *sides: Sequence[int]) -> Grudge:
    """Disjoint sides: links inside a side stay, links across sides are cut."""
    side_of = {n: i for i, side in enumerate(sides) for n in side}
    return grudge_from_sides(nodes, lambda a, b: side_of.get(a) == side_of.get(b))


def grudge_isolate(nodes: Sequence[int], target: int) -> Grudge:
    return grudge_components(nodes, [target], [n for n in nodes if n != target])


def grudge_halves(nodes: Sequence[int], rng: random.Random) -> Grudge:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    return grudge_components(nodes, shuffled[:half], shuffled[half:])


def grudge_majority_minority(nodes: Sequence[int], leader: int, rng: random.Random) -> Grudge:
    """The leader and random others, a minority, cut from the majority."""
    others = [n for n in nodes if n != leader]
    rng.shuffle(others)
    minority = [leader] + others[: (len(nodes) - 1) // 2 - 1]
    return grudge_components(nodes, minority, [n for n in nodes if n not in minority])


def grudge_majorities_ring(nodes: Sequence[int], rng: random.Random) -> Grudge:
    """Nodes on a random ring see their neighbours within distance d, d the smallest that
    makes 1 + 2d a majority (Jepsen's majorities-ring). With 3 nodes that is everyone, so one
    random link is cut instead: a chain in which every node still sees a majority."""
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    majority = n // 2 + 1
    reach = -(-(majority - 1) // 2)  # ceil: (majority - 1) neighbours split over both sides
    pos = {node: i for i, node in enumerate(ring)}

    def connected(a: int, b: int) -> bool:
        d = abs(pos[a] - pos[b])
        return min(d, n - d) <= reach

    grudge = grudge_from_sides(nodes, connected)
    if n >= 3 and not any(grudge.values()):
        a, b = ring[0], ring[1]
        grudge = grudge_from_sides(nodes, lambda x, y: {x, y} != {a, b})
    return grudge


def grudge_bridge(nodes: Sequence[int], rng: random.Random) -> Grudge:
    """Two halves that cannot see each other, and one bridge node that sees both."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    bridge = shuffled[0]
    rest = shuffled[1:]
    left, right = set(rest[: len(rest) // 2]), set(rest[len(rest) // 2 :])
    return grudge_from_sides(
        nodes, lambda a, b: bridge in (a, b) or ({a, b} <= left) or ({a, b} <= right)
    )


def sees_majority(grudge: Grudge, node: int) -> bool:
    n = len(grudge)
    return n - len(grudge[node]) > n // 2


# --------------------------------------------------------------------------------- schedule


@dataclass(frozen=True, slots=True)
class Schedule:
    faults: tuple[str, ...]
    fault_s: tuple[float, float] = (1.0, 3.0)
    quiet_s: tuple[float, float] = (1.0, 2.0)
    lead_in_s: float = 1.0  # quiet time before the first fault (the cluster serves normally)


@dataclass(slots=True)
class Fault:
    name: str
    kind: str  # "partition" | "kill" | "pause" | "restart"
    grudge: Grudge = field(default_factory=dict)
    nodes: tuple[int, ...] = ()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fault": self.name}
        if self.grudge:
            out["drop"] = {str(a): sorted(b) for a, b in sorted(self.grudge.items()) if b}
        if self.nodes:
            out["nodes"] = list(self.nodes)
        return out


class ClusterNemesis:
    """Runs a `Schedule` against the cluster in `data_dir`, recording into `recorder`."""

    def __init__(
        self,
        data_dir: Path,
        session: aiohttp.ClientSession,
        recorder: Recorder,
        rng: random.Random,
        schedule: Schedule,
    ) -> None:
        self.data_dir = data_dir
        self.cluster = cl.ClusterFile.load(data_dir)
        self.session = session
        self.recorder = recorder
        self.rng = rng
        self.schedule = schedule
        self.active: Fault | None = None
        self.applied = 0

    @property
    def node_ids(self) -> list[int]:
        return [n.id for n in self.cluster.controllers]

    def _url(self, node_id: int, path: str) -> str:
        return self.cluster.node(node_id).admin_url + path

    async def _status(self, node_id: int) -> dict[str, Any] | None:
        try:
            timeout = aiohttp.ClientTimeout(total=0.5)
            async with self.session.get(self._url(node_id, "/quorum/status"),
                                        timeout=timeout) as resp:
                data = await resp.json(content_type=None)
                return data if resp.status == 200 and isinstance(data, dict) else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def leader(self) -> int | None:
        """The leader named by most nodes in the highest epoch any node reports."""
        views = await asyncio.gather(*(self._status(i) for i in self.node_ids))
        named = [(v["leader_epoch"], v["leader_id"]) for v in views
                 if v is not None and v.get("leader_id") is not None]
        return max(named)[1] if named else None

    async def plan(self, name: str) -> Fault:
        nodes = self.node_ids
        rng = self.rng
        leader = await self.leader() if "leader" in name or name in (
            "isolate-follower", "majority-minority") else None
        target = leader if leader is not None else rng.choice(nodes)
        match name:
            case "isolate-one":
                return Fault(name, "partition", grudge_isolate(nodes, rng.choice(nodes)))
            case "isolate-follower":
                followers = [n for n in nodes if n != leader]
                return Fault(name, "partition", grudge_isolate(nodes, rng.choice(followers)))
            case "isolate-leader":
                return Fault(name, "partition", grudge_isolate(nodes, target))
            case "halves":
                return Fault(name, "partition", grudge_halves(nodes, rng))
            case "majority-minority":
                return Fault(name, "partition", grudge_majority_minority(nodes, target, rng))
            case "majorities-ring":
                return Fault(name, "partition", grudge_majorities_ring(nodes, rng))
            case "bridge":
                return Fault(name, "partition", grudge_bridge(nodes, rng))
            case "kill" | "pause" | "restart":
                return Fault(name, name, nodes=(rng.choice(nodes),))
            case "kill-leader" | "pause-leader":
                return Fault(name, name.split("-")[0], nodes=(target,))
        raise NemesisError(f"unknown fault {name!r}")

    # ------------------------------------------------------------------------ actions

    async def _links(self, node_id: int, drop: frozenset[int] | None) -> str:
        method = "DELETE" if drop is None else "POST"
        body = None if drop is None else {"drop": sorted(drop)}
        try:
            async with self.session.request(
                method, self._url(node_id, "/nemesis/links"), json=body,
                timeout=aiohttp.ClientTimeout(total=2.0),
            ) as resp:
                return "ok" if resp.status == 200 else f"HTTP {resp.status}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            return type(exc).__name__ or "error"

    async def _process(self, action: str, node_id: int) -> str:
        node = self.cluster.node(node_id)
        match action:
            case "kill":
                gone = await asyncio.to_thread(cl.stop_node, node, force=True, timeout_s=5.0)
                node.pid = None if gone else node.pid
                self.cluster.save(self.data_dir)
                return "killed" if gone else "survived SIGKILL"
            case "stop":
                gone = await asyncio.to_thread(cl.stop_node, node, force=False, timeout_s=5.0)
                if not gone:
                    gone = await asyncio.to_thread(cl.stop_node, node, force=True, timeout_s=5.0)
                node.pid = None if gone else node.pid
                self.cluster.save(self.data_dir)
                return "stopped" if gone else "did not stop"
            case "start":
                if cl.is_our_process(node.pid, node.config_file):
                    return "already running"
                await asyncio.to_thread(cl.start_node, self.cluster, self.data_dir, node)
                return f"started pid {node.pid}"
            case "pause" | "resume":
                sig = signal.SIGSTOP if action == "pause" else signal.SIGCONT
                return action + "d" if cl.signal_node(node, sig) else "not running"
        raise NemesisError(f"unknown process action {action!r}")

    async def apply(self, fault: Fault) -> dict[str, Any]:
        if fault.kind == "partition":
            ids = sorted(i for i, drop in fault.grudge.items() if drop)
            results = await asyncio.gather(*(self._links(i, fault.grudge[i]) for i in ids))
            return dict(zip(map(str, ids), results, strict=True))
        action = {"kill": "kill", "pause": "pause", "restart": "stop"}[fault.kind]
        out = {str(i): await self._process(action, i) for i in fault.nodes}
        if fault.kind == "restart":
            out.update({f"{i}-start": await self._process("start", i) for i in fault.nodes})
        return out

    async def heal(self, fault: Fault) -> dict[str, Any]:
        if fault.kind == "partition":
            ids = self.node_ids
            results = await asyncio.gather(*(self._links(i, None) for i in ids))
            return dict(zip(map(str, ids), results, strict=True))
        action = {"kill": "start", "pause": "resume", "restart": None}[fault.kind]
        if action is None:
            return {}
        return {str(i): await self._process(action, i) for i in fault.nodes}

    async def start_fault(self, fault: Fault) -> None:
        f = f"start-{fault.kind}"
        self.recorder.record(NEMESIS, "info", f, fault.describe())
        self.active = fault
        result = await self.apply(fault)
        self.applied += 1
        self.recorder.record(NEMESIS, "info", f, {**fault.describe(), "result": result})

    async def stop_fault(self) -> None:
        fault = self.active
        if fault is None:
            return
        f = f"stop-{fault.kind}"
        self.recorder.record(NEMESIS, "info", f, {"fault": fault.name})
        result = await self.heal(fault)
        self.active = None
        self.recorder.record(NEMESIS, "info", f, {"fault": fault.name, "result": result})

    async def heal_all(self) -> dict[str, Any]:
        """Undo whatever may be in force: stop the active fault, then clear links everywhere,
        resume every node and start every node that is not running. Recorded as `stop-all`."""
        await self.stop_fault()
        self.recorder.record(NEMESIS, "info", "stop-all", None)
        result: dict[str, Any] = {}
        for node_id in self.node_ids:
            node = self.cluster.node(node_id)
            if cl.is_our_process(node.pid, node.config_file):
                cl.signal_node(node, signal.SIGCONT)
            else:
                result[f"{node_id}-start"] = await self._process("start", node_id)
        links = await asyncio.gather(*(self._links(i, None) for i in self.node_ids))
        result.update({str(i): r for i, r in zip(self.node_ids, links, strict=True)})
        self.recorder.record(NEMESIS, "info", "stop-all", result)
        return result

    async def _pause(self, seconds: float, deadline: float) -> None:
        """The schedule's own timing (a fault held, a quiet period), cut at the deadline."""
        remaining = deadline - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(min(seconds, remaining))

    async def run(self, deadline: float) -> None:
        """Faults until `deadline` (time.monotonic()); the active one is healed at the end."""
        sched = self.schedule
        if not sched.faults:
            return
        await self._pause(sched.lead_in_s, deadline)
        try:
            while time.monotonic() < deadline:
                fault = await self.plan(self.rng.choice(sched.faults))
                await self.start_fault(fault)
                await self._pause(self.rng.uniform(*sched.fault_s), deadline)
                await self.stop_fault()
                await self._pause(self.rng.uniform(*sched.quiet_s), deadline)
        finally:
            if self.active is not None:
                await self.stop_fault()

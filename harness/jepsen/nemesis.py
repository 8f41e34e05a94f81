"""The nemesis for real-process runs: network partitions and process faults on a local cluster.

Faults act only through the cluster's public surface: `POST/DELETE /nemesis/links` on each
node's admin API (drop all traffic to and from the listed peers: Raft, controller RPC, replica
fetches, and the admin requests a node forwards to its leader, which the receiver holds
unanswered; clients still reach every node unless a fault also sets `drop_clients`, see
docs/jepsen.md "Nemeses") and the launcher functions of
`harness.launcher.cluster` (SIGKILL / SIGSTOP / SIGCONT / SIGTERM by the PID recorded in cluster.json,
after checking that PID still runs our node; restart rewrites cluster.json).

Fault names (`FAULTS`; groups in `GROUPS`):
- partitions: `isolate-one` (a random node cut from all others), `isolate-follower`,
  `isolate-leader` (the current controller leader), `halves` (random halves),
  `majority-minority` (the leader on the minority side), `majorities-ring` (every node sees a
  majority, no two the same one; with 3 nodes that cannot cut anything, so one random link is
  cut, leaving a chain), `bridge` (two halves joined by one node that sees both);
- processes: `kill` / `kill-leader` (kill -9, healed by starting the node again), `pause` /
  `pause-leader` (SIGSTOP, healed by SIGCONT), `restart` (SIGTERM, then start at once).
- brokers (`BROKER_FAULTS`; need brokers and a topic; L is the leader broker of a random
  partition of the run's topics, looked up through the admin API `/topics/{topic}`):
  `isolate-partition-leader` (L cut from every node and from clients),
  `leader-cut-from-followers` (L cut from the other brokers and the controllers, clients still
  reach it: the ISR zombie, where acks=1 writes are lost), `leader-cut-from-followers-only` (L cut
  from the other brokers only: the ISR shrinks to L), `zombie-leader` (L cut from the
  controllers only), `isolate-controller-leader` (the active controller cut from every node,
  brokers included), `kill-partition-leader`, `pause-partition-leader`, `crash-unflushed` (kill
  -9 of every replica of the partition at once; with `kraftlab.log.unflushed.in.process=1` the
  brokers keep appends in memory until a flush, so the unflushed tail is really lost).
- random brokers (`BROKER_NODE_FAULTS`, group `crash` with every other process fault: the faults
  the Apache Kafka target runs too, harness/jepsen/nemesis_kafka.py): `kill-broker`,
  `pause-broker`, `restart-broker` (kill -9, SIGSTOP, SIGTERM then start, of a random broker).
- staged (`STAGED_FAULTS`, harness/jepsen/staged.py; broker faults in several steps, each
  waiting for the cluster's reaction): `staggered-isr-drop` (KIP-966: the followers leave the
  ISR one after another, then the leader is killed) and `truncate-restart-then-leader-crash`
  (KIP-101: a restarted follower truncates, then the leader is killed). Not in any group but
  `staged` and `everything`: they show settings that lose data (docs/jepsen.md "Recipes").

- clocks (`CLOCK_FAULTS`; `POST /nemesis/clock` on the node, healed by `DELETE`, which puts
  it back in step: harness/runtime/clock.py): `clock-jump-forward` (a follower controller's
  clock jumps ahead by CLOCK_JUMP_MS: its fetch timeout is due at once, it starts an election;
  KIP-996's pre-vote keeps it from disrupting a live leader), `clock-jump-back` (a random node's
  clock jumps back: its clock holds, so each of its timeouts comes that much later),
  `clock-drift` (a random node's clock runs at a rate in CLOCK_RATES). The cores' clock never
  reads backwards; safety must not depend on any of it.

With `net` (a harness.launcher.netns.Netns: the cluster runs in network namespaces, `kraftlab
jepsen run --net netns`) partitions are not asked of the nodes: each cut node's namespace drops
the packets in the kernel (nftables), and heals delete the rules; `/nemesis/links` is unused.

A schedule (`Schedule`) is seeded and bounded: a quiet lead-in, then until the deadline: pick a
fault, apply it, hold it for a random time in `fault_s`, heal it, stay quiet for a random time
in `quiet_s`. One fault at a time. Each step is recorded Jepsen-style as two `info` events of
process "nemesis" (`start-partition` ... `start-partition`, `stop-partition` ...), whose values
say what was done. `heal_all` undoes everything whatever happened before (links cleared on every
node, every node resumed and started if down); the runner always calls it.

Grudges (`Grudge`: node -> peers it drops) are symmetric: a cut link drops traffic both ways.
Client connections are cut only where a fault says so (`Fault.clients_cut`: those nodes also
drop client traffic, harness/net/transport.py LinkFilter.drop_clients). The controller-side
partitions above act among the controllers only; the broker faults among all nodes.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness.check.history import NEMESIS
from harness.jepsen.recorder import Recorder
from harness.jepsen.staged import STAGED, Target
from harness.launcher import cluster as cl
from harness.launcher.netns import Netns, NetnsError
from harness.runtime.config import parse_properties

Grudge = dict[int, frozenset[int]]

PARTITIONS = ("isolate-one", "isolate-follower", "isolate-leader", "halves",
              "majority-minority", "majorities-ring", "bridge")
PROCESS_FAULTS = ("kill", "kill-leader", "pause", "pause-leader", "restart")
BROKER_PARTITIONS = ("isolate-partition-leader", "leader-cut-from-followers",
                     "leader-cut-from-followers-only", "zombie-leader",
                     "isolate-controller-leader")
BROKER_PROCESS_FAULTS = ("kill-partition-leader", "pause-partition-leader", "crash-unflushed")
BROKER_FAULTS = BROKER_PARTITIONS + BROKER_PROCESS_FAULTS
STAGED_FAULTS = tuple(STAGED)
CLOCK_FAULTS = ("clock-jump-forward", "clock-jump-back", "clock-drift")
BROKER_NODE_FAULTS = ("kill-broker", "pause-broker", "restart-broker")
FAULTS = (PARTITIONS + PROCESS_FAULTS + BROKER_FAULTS + STAGED_FAULTS + CLOCK_FAULTS
          + BROKER_NODE_FAULTS)
GROUPS: dict[str, tuple[str, ...]] = {
    "none": (),
    "partition": PARTITIONS,
    "process": PROCESS_FAULTS,
    "all": PARTITIONS + PROCESS_FAULTS,  # the controller-side faults (kv runs need no broker)
    "broker": BROKER_FAULTS,
    "staged": STAGED_FAULTS,
    "clock": CLOCK_FAULTS,
    "crash": PROCESS_FAULTS + BROKER_PROCESS_FAULTS + BROKER_NODE_FAULTS,
    "everything": FAULTS,
}
# Clock steps: a few of the jepsen runs' fetch timeouts (1 s, runner.DEFAULT_OVERRIDES), and
# drift rates far beyond any real crystal's, so a short fault shows its effect.
CLOCK_JUMP_MS = (1500, 5000)
CLOCK_RATES = (0.5, 2.0)
# The node setting that makes crash-unflushed lose data (harness/runtime/config.py).
UNFLUSHED_KEY = "kraftlab.log.unflushed.in.process"


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


def grudge_cut(nodes: Sequence[int], side: Iterable[int], others: Iterable[int]) -> Grudge:
    """Cut every link between `side` and `others` (both ways); every other link stays."""
    a, b = set(side), set(others) - set(side)
    return grudge_from_sides(nodes, lambda x, y: not ((x in a and y in b) or (x in b and y in a)))


def sees_majority(grudge: Grudge, node: int) -> bool:
    n = len(grudge)
    return n - len(grudge[node]) > n // 2


# ------------------------------------------------------------- whom to believe (pure)


def active_controller(views: dict[int, dict[str, Any] | None]) -> int | None:
    """The controller that reports itself leader (`role` leader, `leader_id` its own id) in
    the highest epoch any answering controller reports; None if there is none, or two claim
    it. A lagging follower names an old leader, and a deposed leader that has not heard of the
    new epoch still claims it: neither is believed when a higher epoch is known (Raft: one
    leader per epoch, a higher epoch supersedes). Their /quorum/status answers are enough to
    pick whom to ask, not to trust the answer: the caller reads from it linearizably."""
    answered = {i: v for i, v in views.items() if isinstance(v, dict)}
    epochs = [v["leader_epoch"] for v in answered.values() if isinstance(v.get("leader_epoch"), int)]
    if not epochs:
        return None
    top = max(epochs)
    claims = [i for i, v in answered.items()
              if v.get("role") == "leader" and v.get("leader_id") == i
              and v.get("leader_epoch") == top]
    return claims[0] if len(claims) == 1 else None


def leaders_in(docs: dict[str, Any], wanted: Sequence[tuple[str, int | None]]) -> list[PartitionLeader]:
    """The led partitions among `wanted` in these GET /topics/{topic} answers (topic -> doc)."""
    out: list[PartitionLeader] = []
    for topic in sorted({t for t, _ in wanted}):
        doc = docs.get(topic)
        for p in doc.get("partitions", []) if isinstance(doc, dict) else []:
            chosen = (topic, None) in wanted or (topic, p["partition"]) in wanted
            if chosen and p.get("leader") is not None:
                out.append(PartitionLeader(topic, p["partition"], p["leader"],
                                           tuple(p["replicas"]), tuple(p["isr"])))
    return out


def leader_replaced(fault: Fault | None, leaders: Sequence[PartitionLeader]) -> bool:
    """Has the partition the active broker fault targets got a leader other than the one the
    fault cut off? `leaders` must be the active controller's linearizable answer
    (`ClusterNemesis.partition_leaders`); a partition missing from it is not replaced."""
    if fault is None or "partition" not in fault.target or "leader" not in fault.target:
        return False
    topic = fault.target.get("topic")
    return any(p.partition == fault.target["partition"] and p.topic == topic
               and p.leader != fault.target["leader"] for p in leaders)


def clock_words(clock: Any) -> str:
    """A node's /nemesis/clock answer, as a fault's result line says it."""
    return f"skew {round(clock.get('skew_ms', 0)):+d} ms, rate {clock.get('rate')}"


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
    kind: str  # "partition" | "kill" | "pause" | "restart" | "staged" | "clock" | "skipped"
    grudge: Grudge = field(default_factory=dict)
    nodes: tuple[int, ...] = ()
    clients_cut: frozenset[int] = frozenset()  # nodes that also drop client traffic
    target: dict[str, Any] = field(default_factory=dict)  # e.g. the partition and its leader

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fault": self.name}
        if self.grudge:
            out["drop"] = {str(a): sorted(b) for a, b in sorted(self.grudge.items()) if b}
        if self.clients_cut:
            out["drop_clients"] = sorted(self.clients_cut)
        if self.nodes:
            out["nodes"] = list(self.nodes)
        out.update(self.target)
        return out

    def links(self, node_id: int) -> dict[str, Any] | None:
        """The /nemesis/links body for `node_id` while this fault holds (None: nothing)."""
        drop = self.grudge.get(node_id, frozenset())
        if not drop and node_id not in self.clients_cut:
            return None
        return {"drop": sorted(drop), "drop_clients": node_id in self.clients_cut}


@dataclass(frozen=True, slots=True)
class PartitionLeader:
    """What the metadata says about one partition (GET /topics/{topic})."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def describe(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "replicas": list(self.replicas), "isr": list(self.isr)}


class ClusterNemesis:
    """Runs a `Schedule` against the cluster in `data_dir`, recording into `recorder`."""

    def __init__(
        self,
        data_dir: Path,
        session: aiohttp.ClientSession,
        recorder: Recorder,
        rng: random.Random,
        schedule: Schedule,
        *,
        partitions: Sequence[tuple[str, int | None]] | None = None,
        net: Netns | None = None,
    ) -> None:
        """`partitions`: where the broker faults pick their partition, as (topic, partition)
        pairs, None meaning any partition of that topic; None: every topic of the cluster.
        `net`: the run's network namespaces; partitions then cut in the kernel."""
        self.net = net
        self.data_dir = data_dir
        self.cluster = cl.ClusterFile.load(data_dir)
        self.session = session
        self.recorder = recorder
        self.rng = rng
        self.schedule = schedule
        self.partitions = None if partitions is None else list(partitions)
        # /nemesis/links mutates: a cluster bound beyond 127.0.0.1 wants its bearer token.
        token = cl.read_token(data_dir)
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.active: Fault | None = None
        self.applied = 0
        # Process actions under way (`_process`): each runs as its own task, shielded from the
        # caller's cancellation, so a cancelled kill still records its outcome (node.pid), and
        # `heal_all` waits for them before judging which node runs.
        self._in_flight: dict[asyncio.Task[str], str] = {}  # task -> its action

    @property
    def node_ids(self) -> list[int]:
        """The controllers (the Raft voters): the controller-side faults act among them."""
        return [n.id for n in self.cluster.controllers]

    @property
    def all_ids(self) -> list[int]:
        return [n.id for n in self.cluster.nodes]

    @property
    def broker_ids(self) -> list[int]:
        return [n.id for n in self.cluster.brokers]

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

    async def _get(self, node_id: int, path: str) -> Any:
        try:
            async with self.session.get(self._url(node_id, path),
                                        timeout=aiohttp.ClientTimeout(total=2.0)) as resp:
                return await resp.json(content_type=None) if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def partition_leaders(self) -> list[PartitionLeader]:
        """Partitions with a leader, as the active controller knows them ([] when there is no
        active controller or it does not answer). Asked of the controller that reports itself
        leader in the highest epoch (`active_controller`), with `consistency=linearizable`: it
        answers after a read barrier (a quorum confirmed it still leads), so a lagging
        follower's image, or a deposed leader's, is never taken for the truth (a follower
        would forward the read; a deposed leader fails the barrier and is not believed)."""
        views = await asyncio.gather(*(self._status(i) for i in self.node_ids))
        node_id = active_controller(dict(zip(self.node_ids, views, strict=True)))
        if node_id is None:
            return []
        wanted = self.partitions
        if wanted is None:
            names = await self._get(node_id, "/topics?consistency=linearizable")
            if not isinstance(names, list):
                return []
            wanted = [(str(t), None) for t in names]
        docs: dict[str, Any] = {}
        for topic in sorted({t for t, _ in wanted}):
            doc = await self._get(node_id, f"/topics/{topic}?consistency=linearizable")
            if not isinstance(doc, dict):
                return []  # no linearizable answer: nothing is known
            docs[topic] = doc
        return leaders_in(docs, wanted)

    async def partition_leader_replaced(self) -> bool:
        """`RunOptions.stop_when` for broker partition faults: the active fault's partition has
        a new leader, per the active controller (`leader_replaced`)."""
        fault = self.active
        if fault is None or "partition" not in fault.target:
            return False
        return leader_replaced(fault, await self.partition_leaders())

    async def plan_broker_fault(self, name: str) -> Fault:
        """A BROKER_FAULTS fault on a random led partition (skipped if there is none)."""
        nodes, controllers = self.all_ids, self.node_ids
        if name == "isolate-controller-leader":
            leader = await self.leader()
            if leader is None:
                return Fault(name, "skipped", target={"skipped": "no controller leader"})
            return Fault(name, "partition", grudge_isolate(nodes, leader),
                         target={"controller_leader": leader})
        leaders = await self.partition_leaders()
        if not leaders:
            return Fault(name, "skipped", target={"skipped": "no partition has a leader"})
        p = self.rng.choice(leaders)
        lead, target = p.leader, p.describe()
        other_brokers = [b for b in self.broker_ids if b != lead]
        match name:
            case "isolate-partition-leader":
                return Fault(name, "partition", grudge_isolate(nodes, lead),
                             clients_cut=frozenset({lead}), target=target)
            case "leader-cut-from-followers":
                return Fault(name, "partition", grudge_cut(nodes, [lead], other_brokers
                                                           + controllers), target=target)
            case "leader-cut-from-followers-only":
                return Fault(name, "partition", grudge_cut(nodes, [lead], other_brokers),
                             target=target)
            case "zombie-leader":
                return Fault(name, "partition", grudge_cut(nodes, [lead], controllers),
                             target=target)
            case "kill-partition-leader":
                return Fault(name, "kill", nodes=(lead,), target=target)
            case "pause-partition-leader":
                return Fault(name, "pause", nodes=(lead,), target=target)
            case "crash-unflushed":
                return Fault(name, "kill", nodes=tuple(sorted(p.replicas)), target={
                    **target, "unflushed_in_process": {
                        str(r): self.unflushed_in_process(r) for r in sorted(p.replicas)}})
        raise NemesisError(f"unknown fault {name!r}")

    def unflushed_in_process(self, node_id: int) -> bool:
        """Does this broker hold appends in its own memory until a flush (so kill -9 loses
        them)? Read from its config file (harness/runtime/config.py UNFLUSHED_KEY)."""
        try:
            text = Path(self.cluster.node(node_id).config_file).read_text()
        except OSError:
            return False
        return parse_properties(text).get(UNFLUSHED_KEY, "0").strip().lower() in ("1", "true")

    async def plan_staged_fault(self, name: str) -> Fault:
        """A STAGED_FAULTS fault on a random led partition with enough followers (skipped if
        there is none)."""
        shape = STAGED[name]
        leaders = [p for p in await self.partition_leaders()
                   if len(p.replicas) - 1 >= shape.followers_needed]
        if not leaders:
            return Fault(name, "skipped", target={
                "skipped": f"no led partition with {shape.followers_needed} follower(s)"})
        p = self.rng.choice(leaders)
        followers = tuple(r for r in p.replicas if r != p.leader)
        return Fault(name, "staged", target=Target(p.topic, p.partition, p.leader,
                                                   followers).describe())
    async def plan_clock_fault(self, name: str) -> Fault:
        """A CLOCK_FAULTS fault: which node, by how much (`target`, the POST body's fields)."""
        rng = self.rng
        if name == "clock-jump-forward":
            leader = await self.leader()
            followers = [n for n in self.node_ids if n != leader]
            node = rng.choice(followers or self.node_ids)
            return Fault(name, "clock", nodes=(node,),
                         target={"jump_ms": rng.randint(*CLOCK_JUMP_MS)})
        node = rng.choice(self.all_ids)
        if name == "clock-jump-back":
            return Fault(name, "clock", nodes=(node,),
                         target={"jump_ms": -rng.randint(*CLOCK_JUMP_MS)})
        if name == "clock-drift":
            return Fault(name, "clock", nodes=(node,), target={"rate": rng.choice(CLOCK_RATES)})
        raise NemesisError(f"unknown fault {name!r}")

    async def plan(self, name: str) -> Fault:
        if name in STAGED:
            return await self.plan_staged_fault(name)
        if name in BROKER_FAULTS:
            return await self.plan_broker_fault(name)
        if name in CLOCK_FAULTS:
            return await self.plan_clock_fault(name)
        if name in BROKER_NODE_FAULTS:
            if not self.broker_ids:
                return Fault(name, "skipped", target={"skipped": "no brokers"})
            return Fault(name, name.split("-")[0], nodes=(self.rng.choice(self.broker_ids),))
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

    async def _links(self, node_id: int, body: dict[str, Any] | None) -> str:
        """POST this /nemesis/links body to the node, or DELETE (heal) for None."""
        return await self._nemesis_call(node_id, "/nemesis/links", body)

    async def _clock(self, node_id: int, body: dict[str, Any] | None) -> str:
        """POST this /nemesis/clock body to the node, or DELETE (back in step) for None."""
        return await self._nemesis_call(node_id, "/nemesis/clock", body, clock_words)

    async def _nemesis_call(self, node_id: int, path: str, body: dict[str, Any] | None,
                            words: Callable[[Any], str] | None = None) -> str:  # fmt: skip
        """POST `body` to the node's `path`, or DELETE for None: "ok" (or the answer as `words`
        puts it), "HTTP <status>", or the name of the error that stopped the call."""
        method = "DELETE" if body is None else "POST"
        try:
            async with self.session.request(
                method, self._url(node_id, path), json=body, headers=self._auth,
                timeout=aiohttp.ClientTimeout(total=2.0),
            ) as resp:
                if resp.status != 200:
                    return f"HTTP {resp.status}"
                return "ok" if words is None else words(await resp.json(content_type=None))
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return type(exc).__name__ or "error"

    async def _cut(self, fault: Fault | None) -> dict[str, Any]:
        """Apply `fault`'s grudge, or heal every node (None): over the admin API, or with
        `net` in each node's namespace (the kernel drops the packets)."""
        ids = self.all_ids
        if self.net is None:
            bodies = {i: (fault.links(i) if fault is not None else None) for i in ids}
            if fault is not None:
                bodies = {i: b for i, b in bodies.items() if b is not None}
            results = await asyncio.gather(*(self._links(i, b) for i, b in bodies.items()))
            return dict(zip(map(str, bodies), results, strict=True))
        net = self.net

        def act(node_id: int) -> str:
            try:
                if fault is None:
                    net.heal(node_id)
                    return "healed"
                drop = fault.grudge.get(node_id, frozenset())
                clients = node_id in fault.clients_cut
                if not drop and not clients:
                    return "untouched"
                net.cut(node_id, drop, clients=clients)
                return "nft drop " + ",".join(map(str, sorted(drop))) + (
                    " +clients" if clients else "")
            except NetnsError as exc:
                return f"error: {exc}"

        results = await asyncio.gather(*(asyncio.to_thread(act, i) for i in ids))
        return dict(zip(map(str, ids), results, strict=True))

    async def settle(self) -> None:
        """Wait for every process action under way (each bounded by the launcher's own
        timeouts: stop_node's wait, start_node's spawn). A SIGKILL sent from a thread whose
        caller was cancelled may land after the caller has gone: until it has, and node.pid
        is updated, "is this node running?" has no trustworthy answer."""
        while self._in_flight:
            await asyncio.gather(*list(self._in_flight), return_exceptions=True)

    async def _process(self, action: str, node_id: int) -> str:
        """Run one process action to its end even if our caller is cancelled (see settle)."""
        task = asyncio.create_task(self._process_action(action, node_id))
        self._in_flight[task] = action
        task.add_done_callback(lambda t: self._in_flight.pop(t, None))
        return await asyncio.shield(task)

    async def _process_action(self, action: str, node_id: int) -> str:
        if action in ("start", "resume"):
            # healing acts on the outcome of the fault: wait for any kill still landing
            # (only stops and kills: two heals never wait for each other)
            await asyncio.gather(*(t for t, a in list(self._in_flight.items())
                                   if a in ("kill", "stop")), return_exceptions=True)
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

    # The StageActions of staged.py: what a staged fault may do.

    async def cut_links(self, side: Sequence[int], others: Sequence[int]) -> dict[str, str]:
        """Cut every link between `side` and `others` (both ways), on every node."""
        grudge = grudge_cut(self.all_ids, side, others)
        bodies = {i: {"drop": sorted(g), "drop_clients": False}
                  for i, g in grudge.items() if g}
        results = await asyncio.gather(*(self._links(i, b) for i, b in bodies.items()))
        return dict(zip(map(str, bodies), results, strict=True))

    async def clear_links(self) -> dict[str, str]:
        ids = self.all_ids
        results = await asyncio.gather(*(self._links(i, None) for i in ids))
        return dict(zip(map(str, ids), results, strict=True))

    async def process(self, action: str, node_id: int) -> str:
        return await self._process(action, node_id)

    async def broker_epochs(self) -> dict[int, tuple[int, bool]]:
        """broker -> (broker epoch, fenced), from the active controller ({} if none answers)."""
        views = await asyncio.gather(*(self._status(i) for i in self.node_ids))
        node_id = active_controller(dict(zip(self.node_ids, views, strict=True)))
        doc = None if node_id is None else await self._get(
            node_id, "/cluster?consistency=linearizable")
        if not isinstance(doc, dict):
            return {}
        return {b["id"]: (b["epoch"], b["fenced"]) for b in doc.get("brokers", [])}

    def _staged_target(self, fault: Fault) -> Target:
        t = fault.target
        return Target(t["topic"], t["partition"], t["leader"], tuple(t["followers"]))

    async def apply(self, fault: Fault) -> dict[str, Any]:
        if fault.kind == "skipped":
            return {}
        if fault.kind == "staged":
            hold_s = self.schedule.fault_s[0]
            return await STAGED[fault.name].apply(self, self._staged_target(fault), hold_s)
        if fault.kind == "partition":
            return await self._cut(fault)
        if fault.kind == "clock":
            return {str(i): await self._clock(i, dict(fault.target)) for i in fault.nodes}
        action = {"kill": "kill", "pause": "pause", "restart": "stop"}[fault.kind]
        if action == "kill" and len(fault.nodes) > 1:  # at once: a correlated crash
            killed = await asyncio.gather(*(self._process("kill", i) for i in fault.nodes))
            return dict(zip(map(str, fault.nodes), killed, strict=True))
        out = {str(i): await self._process(action, i) for i in fault.nodes}
        if fault.kind == "restart":
            out.update({f"{i}-start": await self._process("start", i) for i in fault.nodes})
        return out

    async def heal(self, fault: Fault) -> dict[str, Any]:
        if fault.kind == "staged":
            return await STAGED[fault.name].heal(self, self._staged_target(fault))
        if fault.kind == "partition":
            return await self._cut(None)
        if fault.kind == "clock":
            return {str(i): await self._clock(i, None) for i in fault.nodes}
        action = {"kill": "start", "pause": "resume", "restart": None, "skipped": None}[fault.kind]
        if action is None:
            return {}
        return {str(i): await self._process(action, i) for i in fault.nodes}

    async def start_fault(self, fault: Fault) -> None:
        f = f"start-{fault.kind}"
        self.recorder.record(NEMESIS, "info", f, fault.describe())
        self.active = fault
        result = await self.apply(fault)
        if fault.kind != "skipped":  # nothing was done: not a fault of the run's count
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
        resume every node and start every node that is not running. Recorded as `stop-all`.
        Process actions still under way (a cancelled fault's kill) end first (`settle`)."""
        await self.settle()
        await self.stop_fault()
        await self.settle()
        self.recorder.record(NEMESIS, "info", "stop-all", None)
        result: dict[str, Any] = {}
        for node_id in self.all_ids:
            node = self.cluster.node(node_id)
            if cl.is_our_process(node.pid, node.config_file):
                cl.signal_node(node, signal.SIGCONT)
            else:
                result[f"{node_id}-start"] = await self._process("start", node_id)
        result.update(await self._cut(None))
        clocks = await asyncio.gather(*(self._clock(i, None) for i in self.all_ids))
        result.update({f"{i}-clock": r for i, r in zip(self.all_ids, clocks, strict=True)})
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

"""The nemesis of a Jepsen run against Apache Kafka: process faults by PID on the peer's JVMs,
and with `--net netns` link faults by the kernel.

The schedule, the fault names and their planning are the kraftlab nemesis's
(harness/jepsen/nemesis.py: `ClusterNemesis.run`, `plan`, `apply`, `heal`), so one seed and
one `--nemesis` pick the same kinds of faults on both systems; what differs is how a fault is
aimed and done:

- the active controller is the leader DescribeQuorum names (KIP-595; a broker forwards it to
  the active controller, KafkaApis.handleDescribeQuorumRequest), asked through the brokers'
  Kafka listeners with the raw client (harness/kafka/wire.py);
- a partition's leader, replicas and ISR come from the brokers' Metadata, per partition the
  answer with the highest leader epoch (harness/jepsen/kafka_client.py `describe_topic`): a
  broker's metadata image may lag the controller's, and Kafka has no linearizable read of it;
- kill -9, SIGSTOP, SIGCONT, SIGTERM and start act on the PIDs in the peer's peer.json, after
  checking the PID still runs that node's JVM (harness/peers/kafka/cluster.py `signal_node`,
  `stop_node`, `start_node`); a start returns once the JVM is spawned, and the runner's
  recovery wait (`recovered`) is what waits for it to rejoin;
- a cut (with `net`, the peer laid out in network namespaces: harness/launcher/netns.py) is
  `ClusterNemesis`'s own: the grudge it planned, each cut node's namespace dropping the packets
  to and from its peers' addresses in nftables (and the clients' address where the fault cuts
  clients), a heal deleting the rules. A broker whose clients are cut is not asked for
  Metadata or DescribeQuorum while the cut holds (it would only cost a timeout).

Faults (`KAFKA_FAULTS`): the controller-side process faults (`kill`, `kill-leader`, `pause`,
`pause-leader`, `restart`: a random or the active controller), the partition leader's
(`kill-partition-leader`, `pause-partition-leader`, `crash-unflushed`: every replica at once,
losing power on a peer whose log dirs are on the lazy file system, `PeerFile.lazyfs`, which the
Kafka target starts for it: each JVM killed, then its page cache, so each replica keeps only
what it fsynced; harness/peers/lazyfs) and a random
broker's (`kill-broker`, `pause-broker`, `restart-broker`). With `net` also the link faults
(`NETNS_FAULTS`): every partition shape among the controllers (`isolate-one`, `halves`, ...)
and among all nodes (`isolate-partition-leader`, `leader-cut-from-followers`,
`leader-cut-from-followers-only`, `zombie-leader`, `isolate-controller-leader`), and the staged
`staggered-isr-drop` (cuts, a kill -9 and waits on the brokers' Metadata between its stages)
and `truncate-restart-then-leader-crash` (its wait for the restarted follower's new
registration, unfenced, is `broker_epochs` below).
Clock faults (`CLOCK_FAULTS`: `clock-jump-forward`, `clock-jump-back`, `clock-drift`, planned
as on kraftlab) on a peer started with libfaketime preloaded (`PeerFile.faketime`; the Kafka
target starts its peer so when the nemesis has clock faults): the node's control file says the
skew and rate (harness/peers/kafka/faketime.py `set_clock`), the heal puts it back in step.
Refused (`unsupported`): link faults on loopback (a Kafka JVM has no `/nemesis/links`: only the
kernel can cut it, `--net netns`).

Broker epochs (`broker_epochs`, what the staged faults wait on): Kafka's protocol does not
expose a broker's epoch (the offset of its registration in the metadata log), so an incarnation
is counted here instead: a broker's count goes up each time this nemesis starts its JVM, and
the incarnation is unfenced once that JVM answers Metadata on its own listener listing itself.
A Kafka broker opens its listeners only after the controller has unfenced its new registration
(core/src/main/scala/kafka/server/BrokerServer.scala: `enableRequestProcessing` comes after the
wait for "the broker to be unfenced"), and a killed incarnation answers nothing, so "a higher
count and unfenced" holds exactly when the new registration is unfenced, as kraftlab's broker
epochs say it.

Recovered (`recovered`): every node's JVM runs, DescribeQuorum names a leader among the
voters, and every broker's Metadata lists every broker (a KRaft broker lists only unfenced
brokers), as the peer kit's readiness (docs/kafka-peer.md).
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.check.history import NEMESIS
from harness.jepsen.kafka_client import ADMIN_TIMEOUT_S, describe_topic
from harness.jepsen.nemesis import (
    BROKER_NODE_FAULTS,
    BROKER_PARTITIONS,
    BROKER_PROCESS_FAULTS,
    CLOCK_FAULTS,
    PARTITIONS,
    PROCESS_FAULTS,
    ClusterNemesis,
    Fault,
    NemesisError,
    PartitionLeader,
    Schedule,
    clock_words,
    grudge_cut,
    leaders_in,
)
from harness.jepsen.recorder import Recorder
from harness.kafka.wire import Wire
from harness.launcher.netns import Netns
from harness.peers.kafka import cluster as pk
from harness.peers.kafka import faketime

KAFKA_FAULTS = PROCESS_FAULTS + BROKER_PROCESS_FAULTS + BROKER_NODE_FAULTS + CLOCK_FAULTS
LINK_FAULTS = PARTITIONS + BROKER_PARTITIONS
# Staged faults whose stages are cuts, process faults and Metadata waits only.
STAGED_LINK_FAULTS = ("staggered-isr-drop", "truncate-restart-then-leader-crash")
NETNS_FAULTS = LINK_FAULTS + STAGED_LINK_FAULTS  # what `--net netns` adds
STOP_TIMEOUT_S = 10.0  # SIGTERM (controlled shutdown), then SIGKILL
POLL_S = 0.1


def supported(netns: bool) -> tuple[str, ...]:
    """The faults the Kafka target does: process faults, and link faults in namespaces."""
    return KAFKA_FAULTS + (NETNS_FAULTS if netns else ())


def unsupported(faults: Sequence[str], netns: bool = False) -> list[str]:
    """The faults among `faults` the Kafka target cannot do (module docstring)."""
    return [f for f in faults if f not in supported(netns)]


def describe_quorum(brokers: Sequence[tuple[str, int]]) -> dict[str, int] | None:
    """{"leader_id", "leader_epoch"} of the metadata quorum, from the first broker of
    `brokers` (host, port) that answers DescribeQuorum without an error; None if none does."""
    for host, port in brokers:
        try:
            with Wire(port, ADMIN_TIMEOUT_S, host) as wire:
                answer = wire.describe_quorum()
        except (OSError, ConnectionError, ValueError):
            continue
        if answer.error_code != 0 or not answer.topics or not answer.topics[0].partitions:
            continue
        p = answer.topics[0].partitions[0]
        if p.error_code == 0 and p.leader_id >= 0:
            return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch}
    return None


@dataclass(frozen=True, slots=True)
class NodeClockState:
    """One node's skew as the nemesis set it: `skew_ms` ahead at `anchor_s` (monotonic),
    drifting at `rate` since."""

    skew_ms: float = 0.0
    rate: float = 1.0
    anchor_s: float = field(default_factory=time.monotonic)

    def skew_now_ms(self) -> float:
        return self.skew_ms + (self.rate - 1.0) * (time.monotonic() - self.anchor_s) * 1000.0

    def moved(self, jump_ms: float, rate: float | None) -> NodeClockState:
        """Jumped by `jump_ms` now, and running at `rate` from now (None: as it runs)."""
        return NodeClockState(self.skew_now_ms() + jump_ms,
                              self.rate if rate is None else float(rate), time.monotonic())


class KafkaNemesis(ClusterNemesis):
    """`ClusterNemesis`'s schedule and plans on an Apache Kafka peer (module docstring)."""

    def __init__(self, data_dir: Path, recorder: Recorder, rng: random.Random,
                 schedule: Schedule, *,
                 partitions: Sequence[tuple[str, int | None]] | None = None,
                 net: Netns | None = None) -> None:  # fmt: skip
        """`net`: the namespaces the peer runs in; link faults then cut in the kernel."""
        bad = unsupported(schedule.faults, netns=net is not None)
        if bad:
            raise NemesisError(
                f"the Kafka target cannot do {', '.join(bad)}"
                + ("" if net is not None else " on loopback (link faults need --net netns)")
                + f": it does {', '.join(supported(net is not None))}"
            )
        # ClusterNemesis's state, without its admin API session and cluster.json: the peer's
        # nodes carry the same ids and roles (controllers 1.., brokers 101..).
        self.net = net
        self.data_dir = data_dir
        self.cluster = pk.PeerFile.load(data_dir)  # type: ignore[assignment]
        self.recorder = recorder
        self.rng = rng
        self.schedule = schedule
        self.partitions = None if partitions is None else list(partitions)
        self._auth = {}
        self.active: Fault | None = None
        self.applied = 0
        self._in_flight: dict[asyncio.Task[str], str] = {}
        self.paused: set[int] = set()
        self.incarnations: dict[int, int] = {}  # node id -> JVM starts by this nemesis
        self.clocks: dict[int, NodeClockState] = {}  # node id -> its skew, while a fault holds

    @property
    def peer(self) -> pk.PeerFile:
        return self.cluster  # type: ignore[return-value]

    def broker_addresses(self) -> list[tuple[str, int]]:
        """Kafka listeners (host, port) of the brokers that run, are not paused and are not
        cut from the clients."""
        cut = self.active.clients_cut if self.active is not None else frozenset()
        return [
            (n.host, n.kafka_port)
            for n in self.peer.brokers
            if n.kafka_port is not None
            and n.id not in self.paused
            and n.id not in cut
            and pk.running(n)
        ]

    async def quorum(self) -> dict[str, int] | None:
        return await asyncio.to_thread(describe_quorum, self.broker_addresses())

    async def leader(self) -> int | None:
        q = await self.quorum()
        return None if q is None else q["leader_id"]

    async def controller_epoch(self) -> int | None:
        q = await self.quorum()
        return None if q is None else q["leader_epoch"]

    async def partition_leaders(self) -> list[PartitionLeader]:
        wanted = self.partitions or []
        docs: dict[str, Any] = {}
        for topic in sorted({t for t, _ in wanted}):
            doc = await asyncio.to_thread(describe_topic, self.broker_addresses(), topic)
            if doc is None:
                return []
            docs[topic] = doc
        return leaders_in(docs, wanted)

    async def recovered(self, timeout_s: float) -> float | None:
        """Seconds until the peer is whole again (module docstring), or None."""
        started = time.monotonic()
        brokers = sorted(n.id for n in self.peer.brokers)
        voters = {n.id for n in self.peer.controllers}
        while time.monotonic() - started < timeout_s:
            if all(pk.running(n) for n in self.peer.nodes) and not self.paused:
                state = await asyncio.to_thread(pk.view, self.peer, ADMIN_TIMEOUT_S)
                quorum = state["quorum"]
                if (
                    quorum is not None
                    and quorum["leader_id"] in voters
                    and all(seen == brokers for seen in state["brokers_seen"].values())
                ):
                    return round(time.monotonic() - started, 3)
            await asyncio.sleep(POLL_S)  # poll interval
        return None

    # ------------------------------------------------------------------------ actions

    async def _process_action(self, action: str, node_id: int) -> str:
        if action in ("start", "resume"):
            # healing acts on the outcome of the fault: wait for any kill still landing
            await asyncio.gather(
                *(t for t, a in list(self._in_flight.items()) if a in ("kill", "stop")),
                return_exceptions=True,
            )
        node = self.peer.node(node_id)
        match action:
            case "kill" | "stop":
                gone = False
                if action == "stop":
                    gone = await asyncio.to_thread(
                        pk.stop_node, node, force=False, timeout_s=STOP_TIMEOUT_S
                    )
                if not gone:
                    gone = await asyncio.to_thread(pk.stop_node, node, force=True, timeout_s=5.0)
                if gone:
                    node.pid = None
                    self.paused.discard(node_id)
                self.peer.save(self.data_dir)
                if action == "kill":
                    return "killed" if gone else "survived SIGKILL"
                return "stopped" if gone else "did not stop"
            case "start":
                if pk.running(node):
                    return "already running"
                await asyncio.to_thread(pk.start_node, self.peer, self.data_dir, node)
                self.incarnations[node_id] = self.incarnations.get(node_id, 0) + 1
                self.clocks.pop(node_id, None)  # a new JVM starts in step (faketime.prepare)
                return f"started pid {node.pid}"
            case "power-loss":
                said = await asyncio.to_thread(pk.power_loss, self.peer, self.data_dir, node,
                                               save=False)
                self.paused.discard(node_id)
                self.peer.save(self.data_dir)  # here, in the loop: one writer at a time
                return said
            case "pause" | "resume":
                sig = signal.SIGSTOP if action == "pause" else signal.SIGCONT
                done = await asyncio.to_thread(pk.signal_node, node, sig)
                if action == "pause" and done:
                    self.paused.add(node_id)
                else:
                    self.paused.discard(node_id)
                return action + "d" if done else "not running"
        raise NemesisError(f"unknown process action {action!r}")

    def unflushed_in_process(self, node_id: int) -> bool:
        """Does a crash of this broker lose what it did not fsync? On Kafka: when its log
        dir is on the lazy file system (`PeerFile.lazyfs`, harness/peers/lazyfs)."""
        return self.peer.lazyfs

    async def apply(self, fault: Fault) -> dict[str, Any]:
        """`crash-unflushed` on a peer whose log dirs are on the lazy file system: every
        replica loses power at once (its JVM killed, then its page cache); without it the
        fault is the correlated kill -9 it is on any Kafka cluster (the page cache kept)."""
        if fault.name != "crash-unflushed" or not self.peer.lazyfs:
            return await super().apply(fault)
        lost = await asyncio.gather(*(self._process("power-loss", i) for i in fault.nodes))
        return dict(zip(map(str, fault.nodes), lost, strict=True))

    async def _cut(self, fault: Fault | None) -> dict[str, Any]:
        """ClusterNemesis's cut in the namespaces (`net`); on loopback nothing can be cut."""
        if self.net is not None:
            return await super()._cut(fault)
        if fault is None:
            return {}  # nothing was ever cut
        raise NemesisError(f"the Kafka target cuts links only with --net netns ({fault.name})")

    async def _clock(self, node_id: int, body: dict[str, Any] | None) -> str:
        """`body` as kraftlab's POST /nemesis/clock takes it (`jump_ms`: jump by; `rate`: run
        at), or None: back in step. Written to the node's libfaketime control file."""
        node = self.peer.node(node_id)
        state = self.clocks.pop(node_id, NodeClockState())
        if body is not None:
            state = state.moved(float(body.get("jump_ms", 0.0)), body.get("rate"))
        if not self.peer.faketime:
            if body is None:
                return clock_words({"skew_ms": 0, "rate": 1.0})  # never skewed
            raise NemesisError("this Kafka peer was started without libfaketime: clock "
                               "faults need a peer the run starts (or `peer kafka up "
                               "--faketime`)")
        if node.pid is None or not pk.running(node):
            return "not running"
        try:
            await asyncio.to_thread(faketime.set_clock, Path(node.data_dir), node.pid,
                                    state.skew_now_ms(), state.rate)
        except faketime.FaketimeError as exc:
            return f"clock not set: {exc}"
        if body is not None:
            self.clocks[node_id] = state
        return clock_words({"skew_ms": state.skew_now_ms(), "rate": state.rate}
                            if body is not None else {"skew_ms": 0, "rate": 1.0})

    # The StageActions of staged.py that differ: cuts in the kernel, incarnations for epochs.

    async def cut_links(self, side: Sequence[int], others: Sequence[int]) -> dict[str, str]:
        """Cut every link between `side` and `others` (both ways), in the namespaces."""
        grudge = grudge_cut(self.all_ids, side, others)
        return await self._cut(Fault("cut-links", "partition", grudge))

    async def clear_links(self) -> dict[str, str]:
        return await self._cut(None)

    async def broker_epochs(self) -> dict[int, tuple[int, bool]]:
        """Per broker (incarnation, fenced), the incarnation counted by this nemesis's starts
        and unfenced once its JVM answers Metadata listing itself (module docstring)."""
        state = await asyncio.to_thread(pk.view, self.peer, ADMIN_TIMEOUT_S)
        out: dict[int, tuple[int, bool]] = {}
        for node in self.peer.brokers:
            seen = state["brokers_seen"].get(node.id)
            out[node.id] = (self.incarnations.get(node.id, 0), seen is None or node.id not in seen)
        return out

    async def heal_all(self) -> dict[str, Any]:
        """Stop the active fault, then resume every node, start every node that is not
        running and (in namespaces) heal every node's cut. Recorded as `stop-all`; process actions under way end first (`settle`)."""
        await self.settle()
        await self.stop_fault()
        await self.settle()
        self.recorder.record(NEMESIS, "info", "stop-all", None)
        result: dict[str, Any] = {}
        for node in self.peer.nodes:
            if pk.running(node):
                if node.id in self.paused:
                    result[f"{node.id}-resume"] = await self._process("resume", node.id)
                else:
                    pk.signal_node(node, signal.SIGCONT)  # harmless if it was not stopped
            else:
                result[f"{node.id}-start"] = await self._process("start", node.id)
        if self.net is not None:
            result.update(await self._cut(None))
        for node_id in sorted(self.clocks):
            result[f"{node_id}-clock"] = await self._clock(node_id, None)
        self.recorder.record(NEMESIS, "info", "stop-all", result)
        return result

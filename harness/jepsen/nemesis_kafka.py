"""The nemesis of a Jepsen run against Apache Kafka: process faults by PID on the peer's JVMs.

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
  recovery wait (`recovered`) is what waits for it to rejoin.

Faults (`KAFKA_FAULTS`): the controller-side process faults (`kill`, `kill-leader`, `pause`,
`pause-leader`, `restart`: a random or the active controller), the partition leader's
(`kill-partition-leader`, `pause-partition-leader`, `crash-unflushed`: every replica at once;
Kafka's unflushed appends are in the page cache, which a kill -9 does not lose) and a random
broker's (`kill-broker`, `pause-broker`, `restart-broker`). Link faults (every partition
fault), staged faults (they cut links between stages) and clock faults cut links or set a clock
through kraftlab's admin API (`/nemesis/links`, `/nemesis/clock`), which a Kafka JVM does not
have; the kernel's own partitions (`--net netns`) need root and a cluster laid out in network
namespaces, which the peer kit does not do. The Kafka target refuses them before it starts
(`unsupported`).

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
from pathlib import Path
from typing import Any

from harness.check.history import NEMESIS
from harness.jepsen.kafka_client import ADMIN_TIMEOUT_S, describe_topic
from harness.jepsen.nemesis import (
    BROKER_NODE_FAULTS,
    BROKER_PROCESS_FAULTS,
    PROCESS_FAULTS,
    ClusterNemesis,
    Fault,
    NemesisError,
    PartitionLeader,
    Schedule,
    leaders_in,
)
from harness.jepsen.recorder import Recorder
from harness.kafka.wire import Wire
from harness.peers.kafka import cluster as pk

KAFKA_FAULTS = PROCESS_FAULTS + BROKER_PROCESS_FAULTS + BROKER_NODE_FAULTS
STOP_TIMEOUT_S = 10.0  # SIGTERM (controlled shutdown), then SIGKILL
POLL_S = 0.1


def unsupported(faults: Sequence[str]) -> list[str]:
    """The faults among `faults` the Kafka target cannot do (module docstring)."""
    return [f for f in faults if f not in KAFKA_FAULTS]


def describe_quorum(ports: Sequence[int]) -> dict[str, int] | None:
    """{"leader_id", "leader_epoch"} of the metadata quorum, from the first broker of `ports`
    that answers DescribeQuorum without an error; None if none does."""
    for port in ports:
        try:
            with Wire(port, ADMIN_TIMEOUT_S) as wire:
                answer = wire.describe_quorum()
        except (OSError, ConnectionError, ValueError):
            continue
        if answer.error_code != 0 or not answer.topics or not answer.topics[0].partitions:
            continue
        p = answer.topics[0].partitions[0]
        if p.error_code == 0 and p.leader_id >= 0:
            return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch}
    return None


class KafkaNemesis(ClusterNemesis):
    """`ClusterNemesis`'s schedule and plans on an Apache Kafka peer (module docstring)."""

    def __init__(self, data_dir: Path, recorder: Recorder, rng: random.Random,
                 schedule: Schedule, *,
                 partitions: Sequence[tuple[str, int | None]] | None = None) -> None:  # fmt: skip
        bad = unsupported(schedule.faults)
        if bad:
            raise NemesisError(
                f"the Kafka target cannot do {', '.join(bad)}: it supports "
                f"process faults only ({', '.join(KAFKA_FAULTS)})"
            )
        # ClusterNemesis's state, without its admin API session and cluster.json: the peer's
        # nodes carry the same ids and roles (controllers 1.., brokers 101..).
        self.net = None
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

    @property
    def peer(self) -> pk.PeerFile:
        return self.cluster  # type: ignore[return-value]

    def broker_ports(self) -> list[int]:
        """Kafka listeners of the brokers that run and are not paused."""
        return [
            n.kafka_port
            for n in self.peer.brokers
            if n.kafka_port is not None and n.id not in self.paused and pk.running(n)
        ]

    async def quorum(self) -> dict[str, int] | None:
        return await asyncio.to_thread(describe_quorum, self.broker_ports())

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
            doc = await asyncio.to_thread(describe_topic, self.broker_ports(), topic)
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
                return f"started pid {node.pid}"
            case "pause" | "resume":
                sig = signal.SIGSTOP if action == "pause" else signal.SIGCONT
                done = await asyncio.to_thread(pk.signal_node, node, sig)
                if action == "pause" and done:
                    self.paused.add(node_id)
                else:
                    self.paused.discard(node_id)
                return action + "d" if done else "not running"
        raise NemesisError(f"unknown process action {action!r}")

    async def _cut(self, fault: Fault | None) -> dict[str, Any]:
        if fault is None:
            return {}  # nothing was ever cut
        raise NemesisError(f"the Kafka target cannot cut links ({fault.name})")

    async def _clock(self, node_id: int, body: dict[str, Any] | None) -> str:
        raise NemesisError("the Kafka target has no clock faults")

    async def heal_all(self) -> dict[str, Any]:
        """Stop the active fault, then resume every node and start every node that is not
        running. Recorded as `stop-all`; process actions under way end first (`settle`)."""
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
        self.recorder.record(NEMESIS, "info", "stop-all", result)
        return result

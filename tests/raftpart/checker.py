"""The invariant checker of the raft-partition router, judging every event as it happens (Kafka's
RaftEventSimulationTest checks SingleLeader, MonotonicEpoch and MonotonicHighWatermark after every
simulated event; Jepsen names its anomalies). Each violation raises `Violation` with its name:

- `two-leaders`: two replicas claimed leadership of one partition in one epoch;
- `hw-regressed`: a running replica's high watermark went back;
- `divergence-below-hw`: two replicas (or one, before and after a crash) hold different data
  below their high watermarks. Every offset a replica's HW passes is compared with the first
  committed copy ever seen of that offset, so committed data never changes;
- `lost-write`: an acks=all produce was acknowledged but the committed log does not hold its
  batch at the offsets of the answer (checked when answered, and again at the end against the
  final leader's log: `check_acked_present`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from partition.log import batch as rb
from partition.replica import ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors
from quorum.raft.effects import LeaderChanged

if TYPE_CHECKING:
    from tests.raftpart.router import Broker, Replica, Router


class Violation(AssertionError):
    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name


def batch_values(data: bytes) -> list[bytes]:
    return [r.value or b"" for r in rb.decode_records(data, rb.read_header(data))]


class Checker:
    def __init__(self, router: Router, enabled: bool = True) -> None:
        self.router = router
        self.enabled = enabled
        self.leader_of: dict[tuple[Any, int], int] = {}  # (key, epoch) -> node
        self.committed: dict[Any, dict[int, tuple[int, bytes, bool]]] = {}
        self.acked: list[tuple[Any, int, int, list[bytes]]] = []  # key, base, last, values
        self.violations: list[Violation] = []
        self.digest = hashlib.sha256()
        # Per running replica (node, partition key), forgotten when its broker restarts: the
        # commits compared up to here, and its HW at the end of its last round.
        self.checked_up_to: dict[tuple[int, Any], int] = {}
        self.hw_seen: dict[tuple[int, Any], int] = {}

    def fail(self, name: str, detail: str) -> None:
        violation = Violation(name, detail)
        self.violations.append(violation)
        if self.enabled:
            raise violation

    # ------------------------------------------------------------------------------ hooks

    def on_effects(self, replica: Replica, effects: list[Any]) -> None:
        node = replica.node_id
        self.digest.update(f"{self.router.now_ms} {node} {replica.key[1]} {effects!r}".encode())

    def on_leader_changed(self, replica: Replica, effect: LeaderChanged) -> None:
        if not effect.is_self:
            return
        node = replica.node_id
        first = self.leader_of.setdefault((replica.key, effect.epoch), node)
        if first != node:
            self.fail("two-leaders", f"{replica.key} epoch {effect.epoch}: {first} and {node}")

    def on_commit(self, replica: Replica, high_watermark: int) -> None:
        """Compare every newly committed offset with the first committed copy of it."""
        committed = self.committed.setdefault(replica.key, {})
        node = replica.node_id
        start = max(self.checked_up_to.get((node, replica.key), 0), replica.store.start_offset)
        if start >= high_watermark:
            return
        for e in replica.store.read(start, 1 << 30):
            if e.offset >= high_watermark:
                break
            entry = (e.epoch, e.data, e.control)
            first = committed.setdefault(e.offset, entry)
            if first != entry:
                self.fail("divergence-below-hw", f"{replica.key} offset {e.offset} on {node}: "
                          f"epoch {e.epoch}, first committed at epoch {first[0]}")  # fmt: skip
        self.checked_up_to[(node, replica.key)] = high_watermark

    def on_restart(self, broker: Broker) -> None:
        """New replicas: their commits are re-read (and re-compared) from offset 0."""
        for seen in (self.checked_up_to, self.hw_seen):
            for k in [k for k in seen if k[0] == broker.node_id]:
                del seen[k]

    def on_ack(self, key: Any, request: ProduceRequest, response: ProduceResponse) -> None:
        if response.error is not Errors.NONE or request.acks != -1:
            return
        values = batch_values(request.records)
        self.acked.append((key, response.base_offset, response.last_offset, values))
        self._check_acked(key, response.base_offset, response.last_offset, values, "when answered")

    def after_round(self, replicas: list[Replica]) -> None:
        """After a round on a broker: the replicas it called (only a call moves a HW)."""
        for replica in replicas:
            now = replica.core.high_watermark
            seen = self.hw_seen.get((replica.node_id, replica.key), -1)
            if now < seen:
                self.fail("hw-regressed", f"{replica.key} on {replica.node_id}: {seen} -> {now}")
            self.hw_seen[(replica.node_id, replica.key)] = now

    # ------------------------------------------------------------------------------ final

    def _check_acked(self, key: Any, base: int, last: int, values: list[bytes], when: str) -> None:
        head = self.committed.get(key, {}).get(base)
        if head is None or head[2] or batch_values(head[1]) != values:
            self.fail("lost-write", f"{key} acked [{base}, {last}] {values} not committed ({when})")

    def check_acked_present(self, replica: Replica) -> None:
        """Every acknowledged acks=all batch is in `replica`'s log (the final leader) below its
        HW, at the offsets its producer was told."""
        hw = replica.core.high_watermark
        for key, base, last, values in self.acked:
            if key != replica.key:
                continue
            if last >= hw:
                self.fail("lost-write", f"{key} acked [{base}, {last}] above the final HW {hw}")
                continue
            entries = replica.store.read(base, 1)
            head = entries[0] if entries else None
            if (
                head is None
                or head.offset != base
                or head.control
                or batch_values(head.data) != values
            ):
                self.fail("lost-write", f"{key} acked [{base}, {last}] {values} not in the log")

    def committed_producer_batches(self, key: Any, producer_id: int) -> list[tuple[int, int]]:
        """(producer epoch, base sequence) of every committed batch of `producer_id`."""
        out = []
        for _offset, (_epoch, data, control) in sorted(self.committed.get(key, {}).items()):
            if data and not control:
                header = rb.read_header(data)
                if header.producer_id == producer_id:
                    out.append((header.producer_epoch, header.base_sequence))
        return out

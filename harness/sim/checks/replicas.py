"""The data plane's invariants, checked as the replicas change (brokers call in as their HW
moves and as they learn leader epochs), and the end-of-run replica comparison:

- hw-above-isr-leo: a leader's HW never exceeds the minimum LEO of its ISR (the majority LEO in
  quorum mode), among the followers whose LEO it knows;
- leader-epoch-regressed: the leader epochs a broker sees never go back;
- divergence-below-hw: every record a replica holds below its HW is the one first seen committed
  at that offset. It holds only while the committed prefix cannot legitimately change: leader
  epochs on (KIP-101), no unclean election, no lost disk tail (power loss). After such a loss the
  new leader reuses the lost offsets, so a rewritten record below a HW is the loss itself, not a
  simulator or replication bug: it is counted in Counters.divergence_after_loss instead;
- `replica_divergence` (after the run): offsets where two live replicas hold different records
  below their own HWs (the KIP-101 divergence the summary row reports as divergent_offsets).

`replication.mode=raft` partitions (harness.sim.actors.raft_host), checked as in Kafka's
RaftEventSimulationTest (SingleLeader, MonotonicEpoch, MonotonicHighWatermark):
- two-leaders: two brokers led one partition in one Raft epoch;
- leader-epoch-regressed: a broker's Raft epoch of a partition went back (across restarts too:
  the epoch is in the fsynced quorum-state file);
- hw-regressed: a replica's HW went back within one process;
- hw-above-majority-leo: a leader's HW above the log end offset a majority of the voters reached,
  as its followers' fetches told it;
- divergence-below-hw is an invariant whatever was lost: Raft commits a record only once a
  majority of the voters fsynced it, so a power loss of any number of brokers takes no committed
  record away (`lost_tail` changes nothing in raft mode), and there is no unclean election.
Also the run's counters: partition leader elections (unclean ones apart), ISR shrinks/expands,
from the committed image's partition changes (`count_change`).

Invariant of the checker itself: it only reads replicas; violations are counted with the
simulated time and a few examples, never raised (the run goes on and reports them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from partition.log import PartitionLog
from partition.log import batch as rb
from partition.replica import ReplicaConfig
from quorum.metadata.records import LeaderRecoveryState, Partition

MAX_EXAMPLES = 8


class HostedReplica(Protocol):
    """A broker as the checks read it: its id, whether it runs, its log and replica core."""

    node_id: int
    up: bool
    log: PartitionLog | None
    core: Any


class Clock(Protocol):
    now_ms: int


@dataclass
class Counters:
    leader_elections: int = 0
    unclean_elections: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    # divergence-below-hw seen after an unclean election or a lost disk tail (or with leader
    # epochs off): legitimate loss rewriting the committed prefix, counted, not a violation.
    divergence_after_loss: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)


def decode_values(data: bytes) -> list[list[int]]:
    """[[offset, value], ...] of the data records in `data` (control batches skipped: a
    quorum-mode leader's epoch marker; consumers skip them too)."""
    out: list[list[int]] = []
    for h in rb.iter_headers(data, check_crc=False):
        if h.is_control:
            continue
        for r in rb.decode_records(data, h):
            out.append([r.offset, int((r.value or b"0").decode())])
    return out


class ReplicaChecker:
    """The invariants above over one run's replicas."""

    def __init__(self, config: ReplicaConfig, clock: Clock, raft_mode: bool = False) -> None:
        self.config = config
        self.clock = clock
        self.raft_mode = raft_mode
        self.counters = Counters()
        self.raft_leaders: dict[tuple[Any, int], int] = {}  # (partition, epoch) -> its leader
        self.raft_epochs: dict[tuple[int, Any], int] = {}  # (broker, partition) -> highest epoch
        self.raft_led: set[Any] = set()  # partitions that had a Raft leader
        # The batches first seen committed (below some replica's HW): base offset -> (broker,
        # raw batch), and offset -> the base offset of the batch that holds it.
        self.committed_batches: dict[int, tuple[int, bytes]] = {}
        self.committed_owner: dict[int, int] = {}
        self.check_prefix = config.leader_epoch_enable
        # Set by an unclean election or a lost disk tail: from then on the committed prefix may
        # be rewritten legitimately, so divergence-below-hw is counted, not a violation.
        self.prefix_may_change = False
        # When the partition's HW first passed each new height (time ms, HW): what consumers
        # could read from then on (harness.sim.runs.measures.visibility_columns).
        self.hw_marks: list[tuple[int, int]] = []
        # When the committed image first named the partition's leader, so that clients could
        # find one (the controller's choice at creation; a raft partition's first election once
        # its leader reported it): writes invoked before it measure topic creation.
        self.first_leader_ms: int | None = None

    def violation(self, name: str, detail: str) -> None:
        c = self.counters
        c.violations[name] = c.violations.get(name, 0) + 1
        if len(c.examples) < MAX_EXAMPLES:
            c.examples.append(f"{self.clock.now_ms} ms {name}: {detail}")

    def lost_tail(self) -> None:
        """A replica lost unflushed writes (power loss): they may have been committed (not in
        raft mode, where only fsynced records count toward a commit)."""
        if not self.raft_mode:
            self.prefix_may_change = True

    def saw_leader_epoch(self, broker: int, epoch: int, seen: int) -> None:
        if epoch < seen:
            self.violation("leader-epoch-regressed", f"broker {broker} saw epoch {epoch} "
                           f"after {seen}")

    def count_change(self, old: Partition | None, new: Partition) -> None:
        """A committed change of the partition: elections (unclean ones), ISR shrinks/expands."""
        c = self.counters
        if new.leader != -1 and self.first_leader_ms is None:
            self.first_leader_ms = self.clock.now_ms
        if old is None:
            return
        if self.raft_mode:
            pass  # Raft groups elect (counted by raft_leader); the image records their choice
        elif new.leader != -1 and (new.leader_epoch > old.leader_epoch) and (
            new.leader != old.leader or old.leader == -1
        ):
            c.leader_elections += 1
            recovering = new.leader_recovery_state == LeaderRecoveryState.RECOVERING
            outside = new.leader not in old.isr and new.leader not in old.elr
            # Quorum mode elects the most up-to-date live majority member, ISR or not: only a
            # KIP-704 RECOVERING leader counts as unclean there.
            if recovering or (outside and not self.config.is_quorum_mode):
                c.unclean_elections += 1
                self.prefix_may_change = True
        if len(new.isr) < len(old.isr):
            c.isr_shrinks += 1
        elif len(new.isr) > len(old.isr):
            c.isr_expands += 1

    # -- raft partitions ---------------------------------------------------------------------------

    def raft_leader(self, partition: Any, epoch: int, broker: int) -> None:
        """`broker` became the leader of `partition` in Raft epoch `epoch`. Every epoch with a
        leader after the group's first is a leader election (the first one, like the leader an
        ISR partition is created with, is not counted)."""
        key = (partition, epoch)
        first = self.raft_leaders.get(key)
        if first is not None:
            if first != broker:
                self.violation("two-leaders", f"{partition} epoch {epoch}: brokers {first} and "
                               f"{broker}")
            return
        if partition in self.raft_led:
            self.counters.leader_elections += 1
        self.raft_led.add(partition)
        self.raft_leaders[key] = broker

    def raft_epoch(self, broker: int, partition: Any, epoch: int) -> None:
        """`broker`'s replica of `partition` is at Raft epoch `epoch` (never lower than before)."""
        seen = self.raft_epochs.get((broker, partition), -1)
        self.saw_leader_epoch(broker, epoch, seen)
        self.raft_epochs[(broker, partition)] = max(seen, epoch)

    def raft_commit_bound(self, broker: int, hw: int, status: Any) -> None:
        """A raft leader's HW is at most the log end a majority of the voters reached
        (partition.raft.status rows: -1 for a voter that has not fetched in this epoch)."""
        ends = sorted((v.log_end_offset for v in status.voters), reverse=True)
        bound = ends[len(ends) // 2]
        if hw > bound:
            self.violation("hw-above-majority-leo", f"leader {broker} HW {hw} > {bound} "
                           f"(voters' log ends {ends})")

    def on_high_watermark(self, broker: HostedReplica, before: int, after: int) -> None:
        """No two replicas disagree below the HW: every record a replica holds below its HW is
        the one first seen committed at that offset (checked as each HW advances, over the
        batches newly below it).

        Followers append the leader's batches byte for byte, so a batch is compared as raw
        bytes with the batch first seen committed at its base offset; records are decoded only
        when the bytes differ or the batch overlaps offsets first seen in another batch (a
        rewrite after a truncation), which keeps this check a few percent of a run instead of
        the ~18% that decoding every record below every new HW cost."""
        if after <= before or broker.log is None:
            return
        if not self.hw_marks or after > self.hw_marks[-1][1]:
            self.hw_marks.append((self.clock.now_ms, after))
        self._check_leader_hw(broker, after)
        log = broker.log
        start = max(before, log.log_start_offset)
        if start >= after:
            return
        data = log.read(start, 1 << 22, max_offset=after)  # whole batches below `after`
        batches = self.committed_batches
        owner = self.committed_owner
        for h in rb.iter_headers(data, check_crc=False):
            raw = data[h.position:h.position + h.size]
            known = batches.get(h.base_offset)
            if known is not None and known[1] == raw:
                continue  # the same batch, byte for byte
            offsets = range(h.base_offset, h.base_offset + h.last_offset_delta + 1)
            if known is None and not any(o in owner for o in offsets):
                batches[h.base_offset] = (broker.node_id, raw)  # first seen committed
                for o in offsets:
                    owner[o] = h.base_offset
                continue
            self._compare_records(broker, data, h, raw, after)

    def _committed_value(self, offset: int) -> tuple[int, bytes] | None:
        """(broker, value) of the record first seen committed at `offset` (decodes its batch)."""
        base = self.committed_owner.get(offset)
        if base is None:
            return None
        node_id, raw = self.committed_batches[base]
        for h in rb.iter_headers(raw, check_crc=False):
            for r in rb.decode_records(raw, h):
                if r.offset == offset:
                    return node_id, r.value or b""
        return None

    def _compare_records(self, broker: HostedReplica, data: bytes, h: rb.BatchHeader,
                         raw: bytes, after: int) -> None:
        """The slow path: decode the batch and compare each record below `after` with the one
        first seen committed at its offset; the batch then owns its offsets."""
        for r in rb.decode_records(data, h):
            if r.offset >= after:
                break
            value = r.value or b""
            known = self._committed_value(r.offset)
            if known is not None and known[1] != value:
                if self.check_prefix and not self.prefix_may_change:
                    self.violation("divergence-below-hw",
                                   f"offset {r.offset}: broker {broker.node_id} has {value!r}, "
                                   f"broker {known[0]} had {known[1]!r} below its HW")
                else:
                    self.counters.divergence_after_loss += 1
        self.committed_batches[h.base_offset] = (broker.node_id, raw)
        for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1):
            self.committed_owner[o] = h.base_offset

    def _check_leader_hw(self, broker: HostedReplica, hw: int) -> None:
        """HW <= min ISR LEO (ISR mode) / the majority LEO (quorum mode), when a leader moves
        it (followers whose LEO the leader does not know yet are not counted)."""
        core = broker.core
        if core is None or not core.is_leader or core.partition is None:
            return
        followers = core.role.followers
        if self.config.is_quorum_mode:
            leos = sorted([core.log_end_offset] + [f.log_end_offset for f in followers.values()],
                          reverse=True)
            bound = leos[len(leos) // 2]
        else:
            bound = min([core.log_end_offset] + [followers[r].log_end_offset
                                                 for r in core.partition.isr
                                                 if r in followers
                                                 and followers[r].log_end_offset >= 0])
        if hw > bound:
            self.violation("hw-above-isr-leo", f"leader {broker.node_id} HW {hw} > {bound}")


def _committed_bytes(brokers: Iterable[HostedReplica]) -> list[tuple[int, bytes]]:
    """(HW, the raw batches below it) of every broker that is up (a broker's HW is what it
    believes committed: min(leader HW, own LEO) on a follower)."""
    out: list[tuple[int, bytes]] = []
    for broker in brokers:
        log = broker.log
        if not broker.up or log is None:
            continue
        hw = broker.core.high_watermark if broker.core is not None else log.high_watermark
        out.append((hw, log.read(log.log_start_offset, 1 << 26, max_offset=hw)
                    if hw > log.log_start_offset else b""))
    return out


def replica_divergence(brokers: Iterable[HostedReplica]) -> int:
    """Offsets at which two live replicas hold different records below their own HWs at the end
    of the run: the KIP-101 divergence (its scenarios 1 and 2, KAFKA-1211), which epoch-based
    truncation must rule out whatever was lost. An acknowledged write that was lost and whose
    offset was reused by a later write is loss, not divergence: every replica then agrees on
    the new record (the client-side `inconsistent-offsets` count mixes the two).

    Followers append the leader's batches byte for byte, so replicas that agree hold byte
    prefixes of one another; only when they do not are the records decoded and compared."""
    logs = sorted(_committed_bytes(brokers), key=lambda hw_data: len(hw_data[1]))
    if not logs or all(logs[-1][1].startswith(data) for _, data in logs):
        return 0
    seen: dict[int, int] = {}
    divergent: set[int] = set()
    for hw, data in logs:
        for offset, value in decode_values(data):
            if offset < hw and seen.setdefault(offset, value) != value:
                divergent.add(offset)
    return len(divergent)

"""Raft partition leadership as the rest of the cluster sees it (replication.mode=raft).

A raft partition's replicas elect their leader themselves (partition/raft); nobody else decides
it. This module makes the decision visible, without putting anything on its path:

- To the controller: every partition this broker leads whose leader, Raft epoch or in-sync
  voters the metadata image does not show yet goes into ONE ReportRaftLeadersRequest (all
  partitions at once, one in flight), sent right after a round in which this broker became a
  leader, and re-checked every REPORT_INTERVAL_MS (a report was lost; the controller was down,
  or dropped a leader it fenced). The in-sync voters are compared every ISR_CHECK_INTERVAL_MS
  only: they cost a status of each group led here, and they are informational. The controller
  records it all (quorum/controller/raft_leaders.py). With no controller the report fails and is
  tried again later: elections and writes go on.
- To clients: `leader_for(part)` is the (leader, epoch) a Metadata answer gives for a partition:
  the image's, unless this broker's own replica knows a newer Raft epoch with a leader (or the
  same epoch, where the image names nobody). So with every controller down, a broker hosting a
  replica still sends clients to the new leader, with the epoch they must present (KIP-320).

In-sync voters (the ISR a raft partition shows): the leader and the voters that fetched from it
within fetch.timeout.ms (partition.raft.status "follower"; in a new epoch, also those that have
not fetched yet while the epoch is younger than that: partition.raft.in_sync_voters).
Informational: acks=all waits for a majority of the voters whatever the ISR says
(min.insync.replicas does not apply).

The check after a round and the periodic one run through harness/loop (a Soon, a Timer on the
loop's own clock) with the node's crash as on_error.
"""

from __future__ import annotations

from typing import Any

import structlog

from harness.drive.raft_host import HostedRaft, RaftPartitionHost
from harness.loop import LoopTime, Soon, Timer
from harness.runtime.context import BrokerLink, NodeContext
from partition.raft import in_sync_voters, metadata_leader
from quorum.controller.messages import (
    RaftLeader,
    ReportRaftLeadersRequest,
    ReportRaftLeadersResponse,
)
from quorum.metadata.errors import Errors
from quorum.metadata.records import Partition
from quorum.raft.effects import LeaderChanged

log = structlog.get_logger()

REPORT_INTERVAL_MS = 1_000
ISR_CHECK_INTERVAL_MS = 5_000


class RaftLeadership:
    """Reports this broker's raft leaderships to the controller; answers who leads."""

    def __init__(self, node: NodeContext, broker: BrokerLink) -> None:
        self.node = node
        self.broker = broker
        self.loop = node.loop
        self.partitions: RaftPartitionHost | None = None  # set by the replica manager
        self._in_flight = False
        self._check_soon = Soon(self.loop, self.check, on_error=node.crash)
        self._timer = Timer(LoopTime(self.loop), self._on_timer, on_error=node.crash)
        self._next_isr_check_ms = 0
        self._closed = False
        self.reports_sent = 0
        self.leaders_reported = 0

    def start(self, partitions: RaftPartitionHost) -> None:
        self.partitions = partitions
        self._timer.arm_in(REPORT_INTERVAL_MS)

    # --- partition/raft's LeaderChanged, through HostedRaft.on_leader_changed ---------------------

    def leadership_changed(self, replica: HostedRaft, effect: LeaderChanged) -> None:
        if effect.is_self:
            self.schedule_check()

    def schedule_check(self) -> None:
        """Check (and report) after the current round."""
        if not self._closed:
            self._check_soon.schedule()

    def _on_timer(self) -> None:
        if self._closed:
            return
        now_ms = self.node.now_ms()
        with_isr = now_ms >= self._next_isr_check_ms
        if with_isr:
            self._next_isr_check_ms = now_ms + ISR_CHECK_INTERVAL_MS
        self.check(with_isr)
        self._timer.arm_in(REPORT_INTERVAL_MS)

    # --- reports --------------------------------------------------------------------------------

    def unrecorded(self, with_isr: bool = True) -> list[RaftLeader]:
        """Partitions led here whose leader or epoch (or, `with_isr`, in-sync voters) the image
        lacks; a partition new to the image's leadership is reported with its in-sync voters."""
        if self.partitions is None:
            return []
        image = self.node.image
        me = self.node.node_id
        now_ms = self.node.now_ms()
        out: list[RaftLeader] = []
        for r in self.partitions.replicas.values():
            if not r.core.is_leader:
                continue
            part = image.partition(r.topic_id, r.partition)
            if part is None:
                continue
            epoch = r.core.leader_epoch
            if (part.leader, part.leader_epoch) == (me, epoch) and not with_isr:
                continue
            isr = tuple(in_sync_voters(r.core.status(), now_ms, r.core.config.raft.fetch_timeout_ms))
            if (part.leader, part.leader_epoch, part.isr) == (me, epoch, isr):
                continue
            out.append(RaftLeader(r.topic_id, r.partition, epoch, isr))
        return out

    def check(self, with_isr: bool = False) -> None:
        if self._in_flight or self._closed or not self.broker.session.registered:
            return
        leaders = self.unrecorded(with_isr)
        if not leaders:
            return
        self._in_flight = True
        self.reports_sent += 1
        self.leaders_reported += len(leaders)
        request = ReportRaftLeadersRequest(self.node.node_id, self.broker.broker_epoch,
                                           tuple(leaders))  # fmt: skip
        self.broker.send_controller(request, self._answered)

    def _answered(self, response: Any) -> None:
        self._in_flight = False
        if not isinstance(response, ReportRaftLeadersResponse):
            return  # no controller, or no answer in time: the timer tries again
        if response.error is not Errors.NONE:
            log.info("raft_partition.report_refused", error=response.error.name)
            return
        refused = [r for r in response.results if r.error is not Errors.NONE]
        if refused:  # a stale leadership of ours (a newer epoch won meanwhile), most likely
            log.info("raft_partition.report_partly_refused",
                     refused=[(r.topic_id, r.partition, r.error.name) for r in refused[:10]])  # fmt: skip

    # --- who leads, for Metadata answers ----------------------------------------------------------

    def leader_for(self, part: Partition) -> tuple[int, int]:
        """(leader, epoch) for a Metadata answer: the image's, or this broker's Raft view when
        it is newer (module docstring)."""
        if self.partitions is None:
            return part.leader, part.leader_epoch
        known = self.partitions.leader_of((part.topic_id, part.partition))
        if known is None:
            return part.leader, part.leader_epoch
        return metadata_leader(part.leader, part.leader_epoch, *known)

    def close(self) -> None:
        self._closed = True
        self._check_soon.cancel()
        self._timer.cancel()

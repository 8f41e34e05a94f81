"""GET /metrics: Prometheus text exposition of one node, with Kafka's metric names where one exists.

Kafka's JMX names as the Prometheus JMX exporter spells them (`kafka.controller:type=KafkaController,
name=ActiveControllerCount` -> `kafka_controller_active_controller_count`):

- controllers: kafka_controller_active_controller_count, _offline_partitions_count,
  _global_topic_count, _global_partition_count, _fenced_broker_count, _active_broker_count
  (KRaft's ControllerMetadataMetrics, computed from this controller's metadata image);
- every node: kafka_controller_leader_elections_total and _unclean_leader_elections_total
  (cluster-wide, see `MetadataCounters`), the raft-metrics group
  kafka_server_raft_metrics_{high_watermark,log_end_offset,current_epoch,current_leader};
- brokers: kafka_server_replica_manager_{partition_count,leader_count,
  under_replicated_partitions,under_min_isr_partition_count,at_min_isr_partition_count} over the
  partitions this broker leads (Kafka's definitions, harness/runtime/status.py `partition_health`;
  for replication.mode=quorum topics "min ISR" is a majority of the replicas),
  and kafka_server_replica_manager_isr_{shrinks,expands}_total for the partitions it leads;
  replication.mode=raft partitions (min ISR: a majority of the voters) add to the per-partition
  LEO/HW/lag gauges and have kraftlab_raft_partition_* counters (rounds, grouped fsyncs,
  envelopes per peer, leadership reports);
- every admin route: kafka_network_request_metrics_total_time_ms, a histogram per method and
  route template (Kafka's RequestMetrics TotalTimeMs, per HTTP route instead of per API key).
kraftlab_* names remain for what Kafka has no name for (transport counters, among them the native
client's slow_clients_closed and dropped_client_frames; commit latency, per-partition LEO/HW,
follower lag as the leader sees it).

prometheus_client renders it (a per-node CollectorRegistry, never the global one, so several
nodes in one test process do not mix): it escapes label values and help text and writes histogram
buckets, `+Inf`, `_sum` and `_count` exactly as the exposition format wants, which the first,
hand-formatted version of this module did not do for label values. Gauges are computed at scrape
time by a collector (no state to keep in sync); the counters below are the only state.

Counters derived from metadata (`MetadataCounters`): every node applies the same committed
PartitionChange records, so elections and ISR changes are counted from them, not from controller
or leader internals. Records already in this node's log when it started are replayed without
counting (Prometheus counters count what happened while this process ran).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from harness.drive.raft_host import RaftPartitionHost
from harness.runtime.broker import BrokerNode
from harness.runtime.raft_leadership import RaftLeadership
from harness.runtime.status import partition_health
from partition.raft.log import RaftLogStore
from quorum.metadata.errors import Errors
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.metadata.records import NO_LEADER, Partition, PartitionChange

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: Kafka has none and they double the output
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Admin request latency buckets (ms): loopback reads are ~1 ms, commits a few ms, long polls
# (max_wait_ms) and forwarded writes under failover up to seconds.
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


# HTTP methods kept as a label value; anything else a client sends is `other`.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

class LatencyWindow:
    """The last `size` samples (ms) plus all-time count and sum, for a Prometheus summary."""

    def __init__(self, size: int = 4096) -> None:
        self.samples: deque[float] = deque(maxlen=size)
        self.count = 0
        self.total_ms = 0.0

    def add(self, value_ms: float) -> None:
        self.samples.append(value_ms)
        self.count += 1
        self.total_ms += value_ms

    def quantile(self, q: float) -> float:
        if not self.samples:
            return math.nan
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(slots=True)
class _PartitionView:
    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]


class MetadataCounters:
    """Leader elections and ISR changes counted from applied PartitionChange records.

    - election: the leader changes to a broker (not to NO_LEADER, not to itself);
    - unclean election: the new leader was in neither the ISR nor the ELR before (KIP-966: a
      leader from the ELR is a clean election);
    - ISR shrink / expand: the ISR lost / gained members (a record may do both). Whether the
      partition leader asked (AlterPartition) or the controller removed a fenced replica, the
      record is the same, so both count. Per broker, only partitions the broker leads after the
      change count (Kafka's IsrShrinksPerSec is the leader's).
    """

    def __init__(self, node_id: int, count_from_offset: int) -> None:
        self.node_id = node_id
        self.count_from_offset = count_from_offset
        self.leader_elections = 0
        self.unclean_leader_elections = 0
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._parts: dict[tuple[str, int], _PartitionView] = {}

    def seed(self, image: MetadataImage) -> None:
        """Start from an image (a restored or installed snapshot)."""
        self._parts = {(t.topic_id, p.partition): _PartitionView(p.leader, p.isr, p.elr)
                       for t, p in image.all_partitions()}

    def observe(self, result: ApplyResult, image: MetadataImage) -> None:
        record = result.record
        if not isinstance(record, Partition | PartitionChange):
            return
        key = (record.topic_id, record.partition)
        now = image.partition(*key)
        before = self._parts.get(key)
        if now is None:
            self._parts.pop(key, None)
            return
        self._parts[key] = _PartitionView(now.leader, now.isr, now.elr)
        if (not isinstance(record, PartitionChange) or before is None
                or result.error is not Errors.NONE or result.offset < self.count_from_offset):
            return
        if now.leader != before.leader and now.leader != NO_LEADER:
            self.leader_elections += 1
            if now.leader not in before.isr and now.leader not in before.elr:
                self.unclean_leader_elections += 1
        if now.leader == self.node_id:
            if set(before.isr) - set(now.isr):
                self.isr_shrinks += 1
            if set(now.isr) - set(before.isr):
                self.isr_expands += 1


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def _counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, value=value)


class ScrapedNode(BrokerNode, Protocol):
    """What a scrape reads of the node beyond its context: the metadata log's offsets and the
    counters the node keeps for this module."""

    @property
    def high_watermark(self) -> int: ...

    @property
    def log(self) -> RaftLogStore: ...

    @property
    def commit_latency(self) -> LatencyWindow: ...

    @property
    def metadata_counters(self) -> MetadataCounters: ...


class _NodeCollector:
    """Everything computed at scrape time from the node's core, image and replica cores."""

    def __init__(self, node: ScrapedNode) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        node = self.node
        yield from self._raft(node)
        counters = node.metadata_counters
        yield _counter("kafka_controller_leader_elections",
                       "partition leader elections (cluster-wide, from PartitionChange records)",
                       counters.leader_elections)
        yield _counter("kafka_controller_unclean_leader_elections",
                       "elections of a leader outside the ISR and ELR (cluster-wide)",
                       counters.unclean_leader_elections)
        if node.broker is None:
            yield from self._controller(node)
        else:
            yield from self._broker(node)
        t = node.transport
        yield _counter("kraftlab_transport_bad_frames", "connections closed for a bad frame",
                       t.bad_frames)
        yield _counter("kraftlab_transport_refused_handshakes",
                       "handshakes refused (INCONSISTENT_CLUSTER_ID: another cluster)", t.refused)
        yield _counter("kraftlab_transport_messages_sent", "messages sent", t.sent)
        yield _counter("kraftlab_transport_dropped",
                       "messages dropped by the link filter or backpressure",
                       t.dropped_in + t.dropped_out)
        yield _counter("kraftlab_transport_slow_clients_closed",
                       "native client connections closed for not reading their answers "
                       "(unread replies past the transport's bound)", t.slow_clients_closed)
        yield _counter("kraftlab_transport_dropped_client_frames",
                       "native client requests, hellos and answers lost to a client cut "
                       "(nemesis link filter)", t.dropped_client_frames)

    @staticmethod
    def _raft(node: ScrapedNode) -> Iterator[Metric]:
        yield _gauge("kafka_server_raft_metrics_high_watermark", "metadata log high watermark",
                     node.high_watermark)
        yield _gauge("kafka_server_raft_metrics_log_end_offset", "metadata log end offset",
                     node.log.end_offset)
        yield _gauge("kafka_server_raft_metrics_current_epoch", "current leader epoch",
                     node.epoch)
        yield _gauge("kafka_server_raft_metrics_current_leader", "known leader id (-1: none)",
                     -1 if node.leader_id is None else node.leader_id)
        yield _gauge("kraftlab_metadata_applied_offset",
                     "last offset applied to the metadata image", node.image.applied_offset)
        lat = node.commit_latency
        summary = SummaryMetricFamily("kraftlab_raft_commit_latency_ms",
                                      "propose-to-apply latency on the leader (ms)",
                                      count_value=lat.count, sum_value=lat.total_ms)
        for q in (0.5, 0.99):
            summary.add_sample("kraftlab_raft_commit_latency_ms", {"quantile": str(q)},
                               lat.quantile(q))
        yield summary
        lag = GaugeMetricFamily("kraftlab_raft_follower_lag",
                                "leader LEO minus each replica's LEO (on the Raft leader only)",
                                labels=["replica"])
        if node.is_leader:
            status = node.raft_status()
            for r in status.replicas:
                lag.add_metric([str(r.node_id)], max(0, status.log_end_offset - r.log_end_offset))
        yield lag

    @staticmethod
    def _controller(node: ScrapedNode) -> Iterator[Metric]:
        image = node.image
        health = partition_health(image)
        brokers = image.brokers()
        yield _gauge("kafka_controller_active_controller_count",
                     "1 on the active controller", 1 if node.is_leader else 0)
        yield _gauge("kafka_controller_offline_partitions_count", "partitions without a leader",
                     len(health.offline))
        yield _gauge("kafka_controller_global_topic_count", "topics", len(image.topics()))
        yield _gauge("kafka_controller_global_partition_count", "partitions", health.total)
        yield _gauge("kafka_controller_fenced_broker_count", "registered brokers that are fenced",
                     sum(1 for b in brokers if b.fenced))
        yield _gauge("kafka_controller_active_broker_count", "registered unfenced brokers",
                     sum(1 for b in brokers if not b.fenced))

    @staticmethod
    def _broker(node: ScrapedNode) -> Iterator[Metric]:
        assert node.broker is not None
        image = node.image
        led = partition_health(image, led_by=node.node_id)
        rm = node.broker.replicas
        prefix = "kafka_server_replica_manager_"
        yield _gauge(prefix + "partition_count", "replicas hosted here",
                     len(rm.replicas) + len(rm.raft.replicas))
        yield _gauge(prefix + "leader_count", "partitions led here", led.total)
        yield _gauge(prefix + "under_replicated_partitions",
                     "led partitions whose ISR is smaller than the replica set",
                     len(led.under_replicated))
        yield _gauge(prefix + "under_min_isr_partition_count",
                     "led partitions whose ISR is below min.insync.replicas (quorum-mode "
                     "topics: below a majority of the replicas)",
                     len(led.under_min_isr))
        yield _gauge(prefix + "at_min_isr_partition_count",
                     "led partitions whose ISR is exactly min.insync.replicas (quorum-mode "
                     "topics: exactly a majority)",
                     len(led.at_min_isr))
        counters = node.metadata_counters
        yield _counter(prefix + "isr_shrinks", "ISR shrinks of partitions led here",
                       counters.isr_shrinks)
        yield _counter(prefix + "isr_expands", "ISR expansions of partitions led here",
                       counters.isr_expands)
        yield _counter("kraftlab_replica_fetch_frames_sent",
                       "ReplicaFetchBatch frames sent (one per source broker per loop iteration)",
                       rm.fetch_frames_sent)
        yield _counter("kraftlab_replica_fetch_requests_sent",
                       "partition fetch requests carried by those frames", rm.fetch_requests_sent)
        yield _counter("kraftlab_replica_produce_batches",
                       "produce requests handed to leader replicas", rm.produced_batches)
        leo = GaugeMetricFamily("kraftlab_replica_log_end_offset", "per partition replica",
                                labels=["topic", "partition"])
        hw = GaugeMetricFamily("kraftlab_replica_high_watermark", "per partition replica",
                               labels=["topic", "partition"])
        lag = GaugeMetricFamily(
            "kraftlab_replica_follower_lag",
            "leader LEO minus the follower's LEO, per follower of partitions led here "
            "(Kafka's ConsumerLag is measured on the follower against the leader's HW)",
            labels=["topic", "partition", "replica"])
        for (topic, partition), r in sorted(rm.by_name.items()):
            leo.add_metric([topic, str(partition)], r.core.log_end_offset)
            hw.add_metric([topic, str(partition)], r.core.high_watermark)
            status = r.core.status()
            for f in status.followers:
                if f.log_end_offset < 0:
                    continue  # not fetched yet since this leader took over: unknown, not lag
                lag.add_metric([topic, str(partition), str(f.replica_id)],
                               max(0, status.log_end_offset - f.log_end_offset))
        raft = rm.raft
        for (topic, partition), rr in sorted(raft.by_name.items()):
            leo.add_metric([topic, str(partition)], rr.core.log_end_offset)
            hw.add_metric([topic, str(partition)], rr.core.high_watermark)
            if rr.core.is_leader:
                for v in rr.core.status().voters:
                    if v.node_id != node.node_id and v.lag is not None:
                        lag.add_metric([topic, str(partition), str(v.node_id)], v.lag)
        yield leo
        yield hw
        yield lag
        yield from _raft_partitions(raft, rm.leadership)


def _raft_partitions(raft: RaftPartitionHost, leadership: RaftLeadership) -> Iterator[Metric]:
    """replication.mode=raft: the driver's rounds, grouped fsyncs and per-peer envelopes
    (harness/drive/raft_host.py), and the Raft groups led here."""
    p = "kraftlab_raft_partition_"
    yield _gauge(p + "leader_count", "raft partitions whose Raft leader is this broker",
                 sum(1 for r in raft.replicas.values() if r.core.is_leader))
    yield _counter(p + "rounds", "event-loop rounds that ran raft partition work", raft.rounds)
    yield _counter(p + "core_calls", "inputs and ticks fed to raft partition cores",
                   raft.core_calls)
    yield _counter(p + "fsync_rounds", "grouped fsync rounds (one per round with a dirty log)",
                   raft.fsync_rounds)
    yield _counter(p + "log_fsyncs", "partition log fsyncs (at most one per log per round)",
                   raft.log_fsyncs)
    yield _counter(p + "produce_requests", "produce requests for raft partitions",
                   raft.produce_requests)
    yield _counter(p + "produce_calls", "produce calls to cores (a round's requests together)",
                   raft.produce_calls)
    yield _counter(p + "envelopes_sent", "RaftEnvelopes sent (one per peer per round)",
                   raft.mux.envelopes_sent)
    yield _counter(p + "messages_sent", "Raft messages those envelopes carried",
                   raft.mux.items_sent)
    yield _counter(p + "leadership_reports", "ReportRaftLeaders requests to the controller",
                   leadership.reports_sent)


class NodeMetrics:
    """One node's registry: the scrape-time collector plus the request latency histogram."""

    def __init__(self, node: ScrapedNode) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_NodeCollector(node))
        self.request_time_ms = Histogram(
            "kafka_network_request_metrics_total_time_ms",
            "admin API request time per route (ms), from arrival to response",
            ["method", "route"], registry=self.registry, buckets=LATENCY_BUCKETS_MS,
        )
        self._request_children: dict[tuple[str, str], Histogram] = {}

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe_request(self, request: web.Request, started: float) -> None:
        """Time one admin request (`started`: its time.perf_counter() on arrival) under its route
        template (`/kv/{key}`; an unmatched path counts as `unmatched` and an unknown method as
        `other`, so fuzzed requests cannot grow the label set). The labelled child is looked up
        once per (method, route): `labels()` validates and locks on every call."""
        elapsed_ms = (time.perf_counter() - started) * 1000
        resource = request.match_info.route.resource
        template = resource.canonical if resource is not None else "unmatched"
        method = request.method if request.method in _METHODS else "other"
        child = self._request_children.get((method, template))
        if child is None:
            child = self._request_children[(method, template)] = self.request_time_ms.labels(
                method, template)
        child.observe(elapsed_ms)

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        """aiohttp middleware timing every request (`observe_request`)."""

        @web.middleware
        async def timed(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            started = time.perf_counter()
            try:
                return await handler(request)
            finally:
                self.observe_request(request, started)

        return timed

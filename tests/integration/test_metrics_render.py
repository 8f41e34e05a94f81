"""GET /metrics rendered over a stand-in node (fast; no processes): the transport's counters are
exported under their kraftlab_* names with the node's values, including the native-client ones
(`slow_clients_closed`, `dropped_client_frames`, harness/net/transport.py), and the output parses as
Prometheus text."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from harness.runtime.metrics import LatencyWindow, MetadataCounters, NodeMetrics
from quorum.metadata.image import MetadataImage


def _stand_in_controller(**transport: int) -> SimpleNamespace:
    counters = {"bad_frames": 0, "refused": 0, "sent": 0, "dropped_in": 0, "dropped_out": 0,
                "slow_clients_closed": 0, "dropped_client_frames": 0, **transport}
    image = MetadataImage()
    return SimpleNamespace(
        high_watermark=5, log=SimpleNamespace(end_offset=6), epoch=2, leader_id=1,
        image=image, commit_latency=LatencyWindow(), is_leader=False,
        metadata_counters=MetadataCounters(node_id=1, count_from_offset=0),
        broker=None, transport=SimpleNamespace(**counters),
    )


def _scrape(node: SimpleNamespace) -> dict[str, float]:
    text = NodeMetrics(node).render().decode()  # type: ignore[arg-type]  # duck-typed node
    return {s.name: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if not s.labels}


def test_transport_counters_are_exported_with_the_nodes_values() -> None:
    values = _scrape(_stand_in_controller(slow_clients_closed=3, dropped_client_frames=17,
                                          dropped_in=2, dropped_out=5, bad_frames=4, sent=9))
    assert values["kraftlab_transport_slow_clients_closed_total"] == 3
    assert values["kraftlab_transport_dropped_client_frames_total"] == 17
    assert values["kraftlab_transport_dropped_total"] == 7
    assert values["kraftlab_transport_bad_frames_total"] == 4
    assert values["kraftlab_transport_messages_sent_total"] == 9
    # The rest of the scrape is still there (raft group, controller gauges).
    assert values["kafka_server_raft_metrics_log_end_offset"] == 6
    assert values["kafka_controller_active_controller_count"] == 0


def test_zero_counters_are_exported_too() -> None:
    values = _scrape(_stand_in_controller())
    assert values["kraftlab_transport_slow_clients_closed_total"] == 0
    assert values["kraftlab_transport_dropped_client_frames_total"] == 0

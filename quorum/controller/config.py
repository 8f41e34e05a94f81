"""Controller configuration: Kafka's names and defaults (Kafka docs: broker configs; KIP-631)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# Kafka config name -> ControllerConfig field.
KAFKA_NAMES: Mapping[str, str] = {
    "broker.heartbeat.interval.ms": "broker_heartbeat_interval_ms",
    "broker.session.timeout.ms": "broker_session_timeout_ms",
    "eligible.leader.replicas.enable": "eligible_leader_replicas_enable",
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "leader.imbalance.check.interval.ms": "leader_imbalance_check_interval_ms",
    "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_ms",  # Kafka's
    "leader.imbalance.per.broker.percentage": "leader_imbalance_per_broker_percentage",
    "controlled.shutdown.enable": "controlled_shutdown_enable",
    "producer.id.block.size": "producer_id_block_size",
}


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    # Brokers heartbeat this often; the controller tells them in every registration response.
    broker_heartbeat_interval_ms: int = 2000
    # A broker silent this long is fenced (KIP-631 BrokerHeartbeatManager).
    broker_session_timeout_ms: int = 9000
    # KIP-966 ELR; Kafka's eligible.leader.replicas.version is 0 by default in 4.0. The
    # controller also honours the feature finalized in the metadata log (FeatureLevel), so
    # either switches ELR on.
    eligible_leader_replicas_enable: bool = False
    # Features the active controller finalizes in the metadata log if the image holds a lower
    # level (Kafka's bootstrap metadata, `kafka-storage format --feature`): (name, level) pairs.
    # A real cluster sets eligible.leader.replicas.version here, so the feature is in the log
    # (describe shows it) and every later controller honours it whatever its own config says.
    bootstrap_features: tuple[tuple[str, int], ...] = ()
    auto_leader_rebalance_enable: bool = True
    # Kafka: leader.imbalance.check.interval.seconds = 300.
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    # Kafka's ProducerIdControlManager hands out blocks of 1000 ids.
    producer_id_block_size: int = 1000

    @classmethod
    def from_kafka(cls, values: Mapping[str, Any]) -> ControllerConfig:
        """Build from Kafka-named settings (`broker.session.timeout.ms` ...); unknown names are
        a ValueError, values are converted to the field's type."""
        kwargs: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        for name, raw in values.items():
            field = KAFKA_NAMES.get(name)
            if field is None:
                raise ValueError(f"unknown controller config {name!r}")
            if name == "leader.imbalance.check.interval.seconds":
                raw = int(raw) * 1000
            if types[field] in (bool, "bool"):
                kwargs[field] = raw if isinstance(raw, bool) else str(raw).lower() == "true"
            else:
                kwargs[field] = int(raw)
        return cls(**kwargs)

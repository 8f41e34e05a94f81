"""The Kafka protocol tests run on the shared 3-controller + 3-broker cluster (tests/conftest.py
`brokers`, healed for each module and torn down by PID at the end of the session), with a raw
Kafka wire client (harness/kafka/wire.py: kafka-python's message classes over a plain socket) to
send requests the client libraries would never send (bad sequences, stale leader epochs,
garbage). Every test creates topics of its own; the faults come last (test_z_*).
"""

from __future__ import annotations

import pytest

from harness.kafka.wire import Wire
from tests.live import BROKERS, LiveCluster

KafkaCluster = LiveCluster  # the shared cluster's helpers: kafka_port, bootstrap, create_topic, ...

__all__ = ["BROKERS", "KafkaCluster", "Wire"]


@pytest.fixture(scope="module")
def kcluster(brokers: LiveCluster) -> LiveCluster:
    return brokers

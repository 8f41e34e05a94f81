"""Suite-wide fixtures: structlog's configuration restored around every test, and the real
broker cluster that several test modules share (`brokers`, tests/live.py).

structlog's configuration is process-global: a test (or a command it runs in-process) that
configures it must not change what later tests see, or `structlog.testing.capture_logs()`
checks elsewhere would depend on test order. Every test starts from, and leaves behind, the
configuration it found.

`kafka_peer` (a real Apache Kafka cluster, tests/peers/kafka_peer.py) is registered here so
the peer kit's tests and the differential tests in tests/kafka share one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from tests.live import SHARED_BROKER_CONFIGS, LiveCluster, broker_cluster, heal

# The Apache Kafka peer (tests/peers/kafka_peer.py), for any test that names it.
from tests.peers.kafka_peer import kafka_peer  # noqa: F401


@pytest.fixture(autouse=True)
def _restore_structlog_config() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(scope="session")
def shared_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    """One 3-controller + 3-broker cluster for every module that asks for `brokers`, started
    at the first and SIGKILLed by PID at the end of the session, whatever the tests did."""
    with broker_cluster(tmp_path_factory.mktemp("brokers"), *SHARED_BROKER_CONFIGS) as live:
        yield live


@pytest.fixture(scope="module")
def brokers(shared_brokers: LiveCluster) -> LiveCluster:
    """The shared broker cluster, healed for this module (`tests.live.heal`: every node running,
    no fault in force, every partition fully replicated). Tests that kill, pause or cut nodes
    leave the healing to the next module; every test uses topic names of its own."""
    heal(shared_brokers)
    return shared_brokers

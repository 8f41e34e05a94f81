"""Suite-wide fixtures.

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

# The Apache Kafka peer (tests/peers/kafka_peer.py), for any test that names it.
from tests.peers.kafka_peer import kafka_peer  # noqa: F401


@pytest.fixture(autouse=True)
def _restore_structlog_config() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)

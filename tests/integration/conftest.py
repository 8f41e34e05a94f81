"""Real controller processes on loopback for the integration tests (helpers: tests/live.py).

`cluster` is 3 controllers with fast elections for one module; the 3-controller + 3-broker
cluster several modules share is tests/conftest.py's `brokers`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live import LiveCluster, started_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    with started_cluster(tmp_path_factory.mktemp("cluster")) as live:
        yield live

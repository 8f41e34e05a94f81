"""Suite-wide fixtures: structlog's configuration reset around every test, and the real
broker cluster that several test modules share (`brokers`, tests/live.py).

structlog's configuration is process-global: a test (or a command it runs in-process) that
configures it must not change what later tests see, or `structlog.testing.capture_logs()`
checks elsewhere would depend on test order (which pytest-xdist's two workers change). Every
test starts from, and leaves behind, the configuration the suite started with.

`kafka_peer` (a real Apache Kafka cluster, tests/peers/kafka_peer.py) is registered here so
the peer kit's tests and the differential tests in tests/kafka share one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from tests.live import SHARED_BROKER_CONFIGS, LiveCluster, broker_cluster, heal
from tests.peers.kafka_peer import kafka_peer  # noqa: F401  (the Apache Kafka peer, shared)

# Session fixtures that boot something costly: every test that uses one runs in one pytest-xdist
# worker (`-n 2 --dist loadgroup`, the README's test command), so each is started once, and in
# file order there (the modules that kill, pause or cut nodes are named test_z_* to come last).
SHARED_FIXTURE_GROUPS = {
    "kafka_peer": "live-shared",
    "shared_brokers": "live-shared",
    "executor_python": "spark-executor",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put each test in an xdist group: that of the costly session fixture it uses, else its
    module's (so a module's own cluster fixture is started once, in one worker)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        group = next((g for f, g in SHARED_FIXTURE_GROUPS.items() if f in fixtures),
                     item.nodeid.split("::")[0])  # fmt: skip
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _structlog_from_the_baseline() -> Iterator[None]:
    _reset_structlog()
    yield
    _reset_structlog()


# structlog's configuration as the suite found it, before any test module was imported.
_BASELINE = structlog.get_config()
_BASELINE_PROCESSORS = list(_BASELINE["processors"])


def _reset_structlog() -> None:
    """Back to the baseline, whatever changed it since: a test, a module-scoped fixture, or a
    thread an earlier module left behind. capture_logs() edits the configured processor list in
    place, so the baseline's own list object is put back with its original contents."""
    _BASELINE["processors"][:] = _BASELINE_PROCESSORS
    structlog.configure(**_BASELINE)


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



LOG_TAIL_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A failed test that used a real kraftlab cluster shows the tail of each node's log (a
    node that died or never came up says why there, not in the test's own output)."""
    report = yield
    if report.failed and call.when == "call":
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, LiveCluster):
                for name, tail in node_log_tails(value):
                    report.sections.append((f"node log {name} (last {LOG_TAIL_LINES} lines)", tail))
    return report


def node_log_tails(c: LiveCluster) -> list[tuple[str, str]]:
    out = []
    try:
        nodes = c.file.nodes
    except (OSError, ValueError):
        return out
    for node in nodes:
        try:
            lines = Path(node.log_file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        out.append((f"{node.role}-{node.id}", "\n".join(lines[-LOG_TAIL_LINES:])))
    return out

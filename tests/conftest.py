"""Suite-wide fixtures.

structlog's configuration is process-global: a test (or a command it runs in-process) that
configures it must not change what later tests see, or `structlog.testing.capture_logs()`
checks elsewhere would depend on test order. Every test starts from, and leaves behind, the
configuration it found.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_structlog_config() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)

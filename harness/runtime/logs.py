"""structlog configuration, done once per process.

One JSON object per line (the format every kraftlab process writes to its log file), or
console rendering when the output is a terminal. Context (node id, role, epoch, partition) is
bound by the code that owns it; this module only chooses the renderer and the level.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

_configured = False


class _CurrentStderr:
    """Writes to whatever `sys.stderr` is at the time of the write, not at configuration time:
    a stream captured once (by pytest, say) and closed later must not break every later log."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


def configure_logging(
    *, level: str = "info", stream: TextIO | None = None, json: bool | None = None
) -> None:
    """Configure structlog for this process. Later calls are ignored unless nothing ran yet.

    `json=None` picks JSON lines unless `stream` is a terminal.
    """
    global _configured
    if _configured:
        return
    out: TextIO = stream if stream is not None else _CurrentStderr()  # type: ignore[assignment]
    use_json = json if json is not None else not out.isatty()
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        # Not cached: a cached logger keeps the processors it was first built with, so
        # structlog.testing.capture_logs() (the tests' way to check events) would miss it.
        cache_logger_on_first_use=False,
    )
    _configured = True

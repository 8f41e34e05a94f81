"""Exceptions of the Raft core. Expected protocol outcomes are ErrorCode values in responses,
never exceptions; these are for broken invariants and API misuse."""

from __future__ import annotations


class InvariantViolation(AssertionError):
    """A Raft safety invariant broke (truncation below the HW, a non-monotonic HW, two leaders in
    one epoch...). A failing seed in the simulator, a crash in a real node."""


class RaftUsageError(RuntimeError):
    """The caller misused the core's API (e.g. a snapshot beyond the high watermark)."""

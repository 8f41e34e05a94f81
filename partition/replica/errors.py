"""Exceptions of the replica core. Expected protocol outcomes are `Errors` values in responses
(quorum.metadata.errors), never exceptions; these are for a broken invariant and for
misuse of the core's API."""

from __future__ import annotations


class InvariantViolation(AssertionError):
    """A replication safety invariant broke (a leader HW going backwards, a leader asked to
    append at an offset other than its LEO...). A failing seed in the simulator, a crash in a
    real node."""


class ReplicaUsageError(RuntimeError):
    """The caller misused the core (an input for another partition, an unknown input type)."""

"""Helpers that build small histories for the checker tests."""

from __future__ import annotations

from typing import Any

from harness.check.history import Event, Operation, pair_operations


def events(*rows: tuple[Any, ...]) -> list[Event]:
    """Rows are (process, type, f, value) or (process, type, f, value, extra-dict)."""
    out = []
    for index, row in enumerate(rows):
        process, type_, f, value = row[:4]
        extra = dict(row[4]) if len(row) > 4 else {}
        error = extra.pop("error", None)
        out.append(Event(index, index * 1000, process, type_, f, value, error, extra))
    return out


def ops(*rows: tuple[Any, ...]) -> list[Operation]:
    return pair_operations(events(*rows))

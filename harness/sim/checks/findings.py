"""Classifying a failing seed: why a node did not converge (a stable word for reports) and where
in the code an exception came from.

Invariant: these functions only read; they never change a node or draw randomness, so calling
them does not alter a run's trace.
"""

from __future__ import annotations

from typing import Any, Protocol


class RaftProcess(Protocol):
    """A simulated Raft node as these functions read it: its core and its log store (None
    while it is down)."""

    core: Any
    store: Any


def diagnose_lagging(node: RaftProcess, leader: RaftProcess) -> str:
    """Why a node does not catch up with the leader, in a stable word (for reports and for
    telling known core bugs apart from new problems):

    - stranded-higher-epoch: the node sits in an epoch above the leader's, so it ignores the
      leader (lower epoch) and cannot win an election (pre-votes refused: a live leader);
    - divergence-livelock: the leader answers its fetches with a diverging epoch, but the node
      holds no epoch <= that one, so its truncation target is its own end offset and it fetches
      the same offset again, forever;
    - lagging: anything else (slow, or a new problem)."""
    core, leader_core = node.core, leader.core
    if core is None or leader_core is None:
        return "down"
    if core.epoch > leader_core.epoch:
        return "stranded-higher-epoch"
    store, leader_store = node.store, leader.store
    if store.end_offset > store.start_offset:
        last_epoch = store.last_epoch()
        theirs = leader_store.end_offset_for_epoch(last_epoch)
        if (
            theirs.epoch != last_epoch
            and theirs.offset < store.end_offset
            and store.end_offset_for_epoch(theirs.epoch).offset < 0
        ):
            return "divergence-livelock"
    return "lagging"


def where(exc: BaseException) -> str:
    """file:line of the innermost frame, so a failing seed's one-line report points at code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 2)[-2:]!s}:{tb.tb_lineno}"

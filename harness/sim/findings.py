"""Classifying a failing seed: why a node did not converge (a stable word for reports), which
failures are core bugs already reported (KNOWN_CORE_BUGS, tolerated by tests/sim with a warning
until fixed), and where in the code an exception came from.

Invariant: these functions only read; they never change a node or draw randomness, so calling
them does not alter a run's trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sim.invariants import Violation
    from harness.sim.node import SimNode


def diagnose_lagging(node: SimNode, leader: SimNode) -> str:
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


KNOWN_CORE_BUGS: dict[str, tuple[str, ...]] = {
    # name -> fragments that all occur in the violation text of that bug.
    #
    # A voter that led epoch E and fell back to Prospective still names itself as the leader
    # (RaftCore.leader_id returns the persisted leader_id, itself) in its NOT_LEADER_OR_FOLLOWER
    # fetch answers; an observer told "not leader, the leader is 3" by node 3 follows 3 again
    # and refetches at once, without backoff: a message storm (exponential with duplicates).
    # Seeds 20194, 40139, 40242 (3 voters), 30247, 30256 (5 voters), all --duration-ms 20000,
    # reproduced on code dab921f1a802.
    "self-named-leader-fetch-storm": ("[event-storm]", "NOT_LEADER_OR_FOLLOWER"),
    # An observer whose Fetch to a voter is refused (process down) asks the next voter at once
    # (peer_unreachable resets the bootstrap timer to now): with every voter down it spins, and
    # duplicates multiply the chains. Seed 40218 (3 voters, --duration-ms 20000), reproduced on
    # code dab921f1a802.
    "observer-refused-bootstrap-storm": ("[event-storm]", "[refused-loop]"),
}
"""Failures already reported to their owner and not yet fixed, recognised by their text, so
tests/sim tolerates them (with a warning) and still fails on anything new. Every other bug the
simulator found was fixed in the session that found it (the list, with seeds, is in the
simulator's report). Remove an entry once its bug is fixed."""


def known_core_bug(violation: Violation | str | None) -> str | None:
    """The KNOWN_CORE_BUGS name a violation matches, if any."""
    if violation is None:
        return None
    text = str(violation)
    for name, fragments in KNOWN_CORE_BUGS.items():
        if all(fragment in text for fragment in fragments):
            return name
    return None


def where(exc: BaseException) -> str:
    """file:line of the innermost frame, so a failing seed's one-line report points at code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 2)[-2:]!s}:{tb.tb_lineno}"

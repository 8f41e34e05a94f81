"""Staged broker faults of the real-process nemesis: literature scenarios that are a sequence of
steps, each waiting (bounded) for the cluster's own reaction before the next, rather than one
cut or kill held for a while. One table (`STAGED`), one shape per scenario; the nemesis
(nemesis.py) plans the target partition and calls `apply` at the fault's start, `heal` at its
end, and records what each returns.

- `staggered-isr-drop` (KIP-966's motivation): the leader L is cut from its first follower F1
  (F1 is the replica an unclean election takes: the first in assignment order); once F1 is out
  of the ISR, the writes go on for `hold_s`, acknowledged by L and the second follower F2 only;
  then L is cut from F2 too, and once the ISR is {L} (below min.insync.replicas: with ELR on,
  F2 joins the ELR) L is killed (-9) and the cuts are healed. The heal waits (bounded) until the
  controller has elected someone else, then starts L. With ELR, F2 is elected and nothing
  acknowledged is lost; with unclean election and no ELR, F1 is, and what F2 acknowledged with
  L is lost (docs/jepsen.md "Recipes").
- `truncate-restart-then-leader-crash` (KIP-101's scenario 1, KAFKA-1211, on KRaft): the first
  follower B is cut from the leader L (L drops its traffic, also after B restarts), killed (-9)
  and started again at once; it re-registers
  (KRaft takes it out of the ISR) and follows L again: the pre-0.11 follower
  (`leader.epoch.enable=false`) truncates to its own high watermark, checkpointed up to 5 s
  earlier (replica.high.watermark.checkpoint.interval.ms), and cannot fetch the tail back
  (cut). Then L is killed (-9) and the cut healed; an unclean election (the topic's
  unclean.leader.election.enable=true stands in for the ZooKeeper-era controller, which kept a
  restarted follower in the ISR) elects B. Pre-0.11, the writes above the checkpoint of B are lost.
  With min.insync.replicas=1, L also acknowledged writes alone while B was away and B, elected,
  takes new writes at the same offsets: L comes back, truncates only to its own high watermark
  and keeps records B never had below it, so the replicas diverge (KIP-101 scenario 2's
  outcome). With leader epochs, B keeps its tail and L truncates to where its epoch ends on B:
  no divergence, and with min.insync.replicas=2 no loss at all (with 1, what L acknowledged
  alone is still lost: the unclean election's loss, which leader epochs do not address).

Invariants: every wait is bounded (STAGE_TIMEOUT_S) and a step that times out is recorded and
the fault goes on (a fault never hangs a run); every node a stage kills is started by `heal`,
and every link it cuts is cleared by `apply` itself or by the nemesis's heal_all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

STAGE_TIMEOUT_S = 15.0  # any one wait for the cluster's reaction (a lag timeout, a fencing)
POLL_S = 0.1  # how often the metadata is asked while waiting


class PartitionView(Protocol):
    """One partition as the active controller knows it (nemesis.PartitionLeader)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def leader(self) -> int: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def isr(self) -> tuple[int, ...]: ...


class StageActions(Protocol):
    """What a staged fault may do to the cluster (implemented by nemesis.ClusterNemesis)."""

    async def cut_links(self, side: Sequence[int], others: Sequence[int]) -> dict[str, str]: ...
    async def clear_links(self) -> dict[str, str]: ...
    async def process(self, action: str, node_id: int) -> str: ...
    async def partition_leaders(self) -> Sequence[PartitionView]: ...
    async def broker_epochs(self) -> dict[int, tuple[int, bool]]: ...


@dataclass(frozen=True, slots=True)
class Target:
    """The partition a staged fault acts on, planned from the active controller's metadata."""

    topic: str
    partition: int
    leader: int
    followers: tuple[int, ...]  # in assignment order

    def describe(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "leader": self.leader,
                "followers": list(self.followers)}


async def wait_for(what: str, check: Callable[[], Awaitable[bool]], out: dict[str, Any],
                   timeout_s: float = STAGE_TIMEOUT_S) -> bool:
    """Poll `check` until it holds or `timeout_s` passes; record the outcome in `out[what]`."""
    started = time.monotonic()
    while True:
        if await check():
            out[what] = f"after {time.monotonic() - started:.1f} s"
            return True
        if time.monotonic() - started >= timeout_s:
            out[what] = f"not within {timeout_s:.0f} s"
            return False
        await asyncio.sleep(POLL_S)  # poll interval


async def _state(actions: StageActions, t: Target) -> PartitionView | None:
    return next((p for p in await actions.partition_leaders()
                 if p.topic == t.topic and p.partition == t.partition), None)


async def _isr_is(actions: StageActions, t: Target, isr: set[int]) -> bool:
    p = await _state(actions, t)
    return p is not None and p.leader == t.leader and set(p.isr) == isr


async def _leader_other_than(actions: StageActions, t: Target, old: int) -> bool:
    p = await _state(actions, t)
    return p is not None and p.leader != old


# --------------------------------------------------------------------- staggered-isr-drop


async def staggered_apply(actions: StageActions, t: Target, hold_s: float) -> dict[str, Any]:
    first, second = t.followers[0], t.followers[1]
    out: dict[str, Any] = {"cut_first": await actions.cut_links([t.leader], [first])}
    await wait_for(f"{first}_out_of_isr", lambda: _isr_is(actions, t, {t.leader, second}), out)
    await asyncio.sleep(hold_s)  # the shape's timing: writes acknowledged by leader + second
    out["cut_second"] = await actions.cut_links([t.leader], [first, second])
    await wait_for(f"isr_down_to_{t.leader}", lambda: _isr_is(actions, t, {t.leader}), out)
    out["kill_leader"] = await actions.process("kill", t.leader)
    out["healed_links"] = await actions.clear_links()
    return out


async def leader_replaced_then_start(actions: StageActions, t: Target) -> dict[str, Any]:
    """The heal of both shapes: wait (bounded) for the controller's election, start L."""
    out: dict[str, Any] = {}
    await wait_for("new_leader", lambda: _leader_other_than(actions, t, t.leader), out)
    p = await _state(actions, t)
    out["leader"] = None if p is None else p.leader
    out["start_leader"] = await actions.process("start", t.leader)
    return out


# ------------------------------------------------------ truncate-restart-then-leader-crash


async def truncate_restart_apply(actions: StageActions, t: Target,
                                 hold_s: float) -> dict[str, Any]:
    follower = t.followers[0]
    out: dict[str, Any] = {}
    before = (await actions.broker_epochs()).get(follower, (-1, True))[0]
    out["cut"] = await actions.cut_links([t.leader], [follower])
    out["kill_follower"] = await actions.process("kill", follower)
    out["start_follower"] = await actions.process("start", follower)

    async def registered_again() -> bool:
        epoch, fenced = (await actions.broker_epochs()).get(follower, (-1, True))
        return epoch > before and not fenced

    # Unfenced = it applied the metadata up to its new registration, so its replica exists
    # and has become a follower (and, pre-0.11, truncated to its high watermark).
    await wait_for(f"{follower}_registered_again", registered_again, out)
    await asyncio.sleep(hold_s)  # the shape's timing: the leader alone (min ISR 1 takes writes)
    out["kill_leader"] = await actions.process("kill", t.leader)
    out["healed_links"] = await actions.clear_links()
    return out


@dataclass(frozen=True, slots=True)
class StagedShape:
    followers_needed: int
    apply: Callable[[StageActions, Target, float], Awaitable[dict[str, Any]]]
    heal: Callable[[StageActions, Target], Awaitable[dict[str, Any]]]


STAGED: dict[str, StagedShape] = {
    "staggered-isr-drop": StagedShape(2, staggered_apply, leader_replaced_then_start),
    "truncate-restart-then-leader-crash": StagedShape(
        1, truncate_restart_apply, leader_replaced_then_start),
}

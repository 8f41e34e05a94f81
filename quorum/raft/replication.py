"""Pull replication messages and timers (functions over quorum.raft.member.Member): routing
Fetch / FetchSnapshot to the leader role (quorum.raft.leader.LeaderState serves them) or
answering NOT_LEADER_OR_FOLLOWER, routing answers to the follower role (quorum.raft.follower),
and the role changes replication causes: losing the leader (fetch timeout, NOT_LEADER), the
observer's bootstrap, check-quorum.

Invariants: see quorum.raft.log_view and quorum.raft.leader. Every answer's epoch/leader hint is
observed first (a higher epoch always wins); an answer is applied only by the Follower of the
leader and epoch it came from.
"""

from __future__ import annotations

from dataclasses import replace

from quorum.raft.effects import Effect, Send
from quorum.raft.follower import Follower
from quorum.raft.leader import LeaderState, fetch_error, snapshot_response
from quorum.raft.member import Member
from quorum.raft.messages import (
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from quorum.raft.state import Unattached


def on_fetch_request(m: Member, src: int, req: FetchRequest, now_ms: int) -> list[Effect]:
    leader = m.qs.leader
    if leader is not None:
        effects = leader.on_fetch(src, req, now_ms)
        for i, effect in enumerate(effects):
            if type(effect) is Send and type(effect.message) is FetchResponse and (
                effect.message.snapshot_id is not None
            ):
                effects[i] = _with_snapshot_voters(m, effect)
        return effects
    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if req.leader_epoch < m.epoch:
        error = ErrorCode.FENCED_LEADER_EPOCH
    return [Send(src, fetch_error(req, error, m.leader_hint(), m.epoch))]


def on_fetch_snapshot_request(
    m: Member, src: int, req: FetchSnapshotRequest, now_ms: int
) -> list[Effect]:
    leader = m.qs.leader
    if leader is not None:
        return leader.on_fetch_snapshot(src, req, now_ms)
    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    return [Send(src, snapshot_response(req, error, m.leader_hint(), m.epoch))]


def on_fetch_response(m: Member, src: int, resp: FetchResponse, now_ms: int) -> list[Effect]:
    effects = m.observe(_usable_hint(src, resp), resp.leader_epoch, now_ms)
    role = m.current_leader_reply(src, resp.leader_epoch)
    if role is None:
        if not m.is_voter and isinstance(m.qs.role, Unattached):
            # That voter knows no leader either: ask the next one soon (observer bootstrap).
            retry = now_ms + m.config.observer_bootstrap_backoff_ms
            m.bootstrap_next_ms = min(m.bootstrap_next_ms, retry)
        return effects
    role.read_round = max(role.read_round, resp.read_round)
    if resp.error != ErrorCode.NONE:
        if resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            role.leader_lost = True  # it resigned: pre-votes may now be granted
            if not m.is_voter:
                # An observer asks the voters for the successor at once.
                m.bootstrap_next_ms = now_ms + m.config.observer_bootstrap_backoff_ms
                return effects + m.qs.to_unattached(role.epoch, now_ms)
        return effects
    return effects + role.on_fetch_answer(resp, m, now_ms)


def on_fetch_snapshot_response(
    m: Member, src: int, resp: FetchSnapshotResponse, now_ms: int
) -> list[Effect]:
    effects = m.observe(_usable_hint(src, resp), resp.leader_epoch, now_ms)
    role = m.current_leader_reply(src, resp.leader_epoch)
    if role is None:
        return effects
    return effects + role.on_snapshot_chunk(resp, m, now_ms)


def tick_follower(m: Member, role: Follower, now_ms: int) -> list[Effect]:
    if now_ms >= role.fetch_deadline_ms:
        # controller.quorum.fetch.timeout.ms without a successful fetch (KIP-595).
        if m.is_voter:
            return m.start_prospective(now_ms, leader_lost=True)
        return m.qs.to_unattached(role.epoch, now_ms)
    return role.maybe_resend(m, now_ms)


def tick_leader(m: Member, leader: LeaderState, now_ms: int) -> list[Effect]:
    if not leader.has_quorum_contact(now_ms):
        # Check-quorum (KAFKA-15489): cut off from a majority, stop serving stale reads.
        m.qs.log.warning("quorum.check_quorum_failed", epoch=leader.epoch, now_ms=now_ms)
        return m.resign(leader, now_ms, "check-quorum")
    return leader.tick(now_ms)


def _with_snapshot_voters(m: Member, effect: Effect) -> Effect:
    """A Fetch answer that sends the fetcher to a snapshot names the voters at its end (KIP-853
    keeps them in the snapshot), so the replica that installs it knows the quorum."""
    if isinstance(effect, Send) and isinstance(effect.message, FetchResponse):
        snapshot = effect.message.snapshot_id
        if snapshot is not None and m.config.dynamic_voters:
            voters = m.history.at(snapshot.offset)
            return Send(effect.to, replace(effect.message, snapshot_voters=voters))
    return effect


def _usable_hint(src: int, resp: FetchResponse | FetchSnapshotResponse) -> int | None:
    """The leader a fetch answer names, unless the answer contradicts itself: "not the leader,
    and the leader is me" from `src`. Following that hint would refetch from `src` at once, and
    again on every answer, with no backoff (the self-named-leader storm); without a usable hint
    the fetcher backs off instead (observer_bootstrap_backoff_ms, or its fetch retry)."""
    if resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == src:
        return None
    return resp.leader_id

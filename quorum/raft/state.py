"""Roles of a quorum member (one dataclass each) and `QuorumState`, the ONLY place where the role
and the durable ElectionState change (after apache/kafka's QuorumState; h11's _state.py).
The roles with behaviour of their own live beside it: Follower in quorum.raft.follower, the
leader's state (held by LeaderRole) in quorum.raft.leader; the election roles are data here.

Transition graph (voters; observers only use Unattached <-> Follower):

    Unattached --timeout--> Prospective --majority pre-votes--> Candidate --majority--> Leader
       ^  |                     |  ^                               |                    |
       |  +--grant vote--> Voted-+  +--------timeout/backoff------+      resign /    |
       |                        |                                         check-quorum
    higher epoch, no leader     +--leader hint--> Follower <--BeginQuorumEpoch--   v
       +--------------------------------------------------------------------- Resigned

- Every transition that changes (epoch, voted_id, leader_id) returns PersistElectionState before
  any effect of the new role, so a driver fsyncs it before any Send that depends on it (a vote,
  a candidacy, a fetch from a new leader: KIP-595, Raft thesis 3.8).
- Leaving the leader role closes it first (Kafka's EpochState.close): its waiting read
  barriers fail and its parked fetches are answered NOT_LEADER_OR_FOLLOWER. Those effects lead
  the list; they depend on nothing the transition persists.
- Epochs never decrease; at most one vote per epoch (voted_id is only set while it is None); a
  leader is recognised at most once per epoch (a second leader in one epoch: InvariantViolation).
- Prospective (KIP-996) changes nothing durable: a pre-vote round is invisible after a crash.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import structlog

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Effect, ElectionState, LeaderChanged, PersistElectionState
from quorum.raft.errors import InvariantViolation
from quorum.raft.follower import Follower
from quorum.raft.leader import LeaderState
from quorum.raft.log_view import LogView

__all__ = [
    "Candidate",
    "Follower",
    "LeaderRole",
    "Prospective",
    "QuorumState",
    "Resigned",
    "Role",
    "Unattached",
    "Voted",
]

_log = structlog.get_logger("quorum")


@dataclass(slots=True)
class Unattached:
    """Knows no leader in `epoch` and has not voted. Observers sit here while they bootstrap."""

    epoch: int
    election_deadline_ms: int


@dataclass(slots=True)
class Voted:
    """Voted for `voted_id` in `epoch`; waits for that candidate to win or the timer to fire."""

    epoch: int
    voted_id: int
    election_deadline_ms: int


@dataclass(slots=True)
class Prospective:
    """Pre-vote round (KIP-996) for epoch+1, without bumping the durable epoch."""

    epoch: int
    leader_id: int | None  # the leader we followed, if any (a rejection naming it sends us back)
    election_deadline_ms: int
    leader_lost: bool = False  # it resigned or refused our connection: ignore rejections naming it
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Candidate:
    epoch: int
    election_deadline_ms: int
    retries: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Resigned:
    """A leader that stepped down (resign() or check-quorum) and waits for a successor."""

    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(slots=True)
class LeaderRole:
    """Leadership in `epoch`. The leader's bookkeeping and its side of the protocol live in
    quorum.raft.leader.LeaderState, held here so it dies (is closed) with the role."""

    epoch: int
    state: LeaderState


Role = Unattached | Voted | Prospective | Candidate | Follower | Resigned | LeaderRole


class QuorumState:
    """Owns the durable ElectionState and the current role. All transitions go through here."""

    def __init__(
        self,
        config: RaftConfig,
        node_id: int,
        voters: tuple[int, ...],
        election: ElectionState,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self.voters = voters
        self.is_voter = node_id in voters
        self.election = election
        self.rng = rng
        self.role: Role = Unattached(election.epoch, 0)
        # The leader role's state while we lead this epoch, else None: `role.state` of a
        # LeaderRole, kept as a plain attribute (asked on every input) by the only two places
        # that enter and leave that role, `to_leader` and `_close`.
        self.leader: LeaderState | None = None
        self.log = _log.bind(node_id=node_id)

    def set_voters(self, voters: tuple[int, ...]) -> None:
        """A voter change is in force (KIP-853, Member.apply_voters): who counts from now on."""
        self.voters = voters
        self.is_voter = self.node_id in voters

    # ------------------------------------------------------------------------------ queries

    @property
    def epoch(self) -> int:
        return self.election.epoch

    @property
    def leader_id(self) -> int | None:
        return self.election.leader_id

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def has_live_leader(self, now_ms: int) -> bool:
        """KIP-996: we lead, or our leader answered within the fetch timeout and is not known
        to be gone. A pre-vote is refused while this holds."""
        role = self.role
        if isinstance(role, LeaderRole):
            return True
        if isinstance(role, Follower):
            return role.has_live_leader(now_ms, self.config.fetch_timeout_ms)
        return False

    def can_grant_vote(self, candidate_id: int, log_is_up_to_date: bool) -> bool:
        """A (non-pre-)vote in our current epoch: no leader known, no vote for anyone else yet,
        and the candidate's log at least as up to date as ours (Raft 5.2, 5.4.1)."""
        e = self.election
        return e.leader_id is None and e.voted_id in (None, candidate_id) and log_is_up_to_date

    def election_timeout_ms(self) -> int:
        """Uniform in [T, 2T) (Kafka's QuorumState.randomElectionTimeoutMs)."""
        t = self.config.election_timeout_ms
        return self.rng.randrange(t, 2 * t)

    def backoff_ms(self, retries: int) -> int:
        """Exponential backoff with jitter after a lost election, capped at backoff.max."""
        cap = self.config.election_backoff_max_ms
        ceiling = min(cap, 50 * (1 << min(retries, 10)))
        return self.rng.randrange(0, ceiling + 1) if ceiling > 0 else 0

    # --------------------------------------------------------------------------- transitions

    def _persist(self, new: ElectionState) -> list[Effect]:
        old = self.election
        if new.epoch < old.epoch:
            raise InvariantViolation(f"epoch would go back from {old.epoch} to {new.epoch}")
        if new.epoch == old.epoch:
            if old.voted_id is not None and new.voted_id != old.voted_id:
                raise InvariantViolation(
                    f"second vote in epoch {new.epoch}: {old.voted_id} then {new.voted_id}"
                )
            if old.leader_id is not None and new.leader_id != old.leader_id:
                raise InvariantViolation(
                    f"two leaders in epoch {new.epoch}: {old.leader_id} and {new.leader_id}"
                )
        if new == old:
            return []
        self.election = new
        return [PersistElectionState(new)]

    def _close(self) -> list[Effect]:
        """The role being left says its last words: only a leader has any (LeaderState.close)."""
        role = self.role
        if isinstance(role, LeaderRole):
            self.leader = None
            return role.state.close()
        return []

    def _leader_changed(self) -> list[Effect]:
        leader = self.election.leader_id
        return [LeaderChanged(self.epoch, leader, leader == self.node_id)]

    def to_unattached(self, epoch: int, now_ms: int) -> list[Effect]:
        """A higher epoch with no known leader (or the initial state)."""
        changed = epoch > self.epoch
        effects = self._close()
        effects += self._persist(ElectionState(epoch)) if changed else []
        deadline = now_ms + self.election_timeout_ms()
        old = self.role
        if isinstance(old, Unattached | Voted | Prospective | Candidate | Resigned):
            # Raft 5.2: only a granted vote or a live leader resets the election timer; a
            # rejected candidate with a higher epoch must not keep everyone from campaigning.
            deadline = min(deadline, old.election_deadline_ms)
        self.role = Unattached(epoch, deadline)
        if changed:
            effects += self._leader_changed()
            self.log.info("quorum.became_unattached", epoch=epoch, now_ms=now_ms)
        return effects

    def to_voted(self, candidate_id: int, now_ms: int) -> list[Effect]:
        """Grant our one vote of this epoch; persisted before the response is sent."""
        effects = self._close()
        effects += self._persist(ElectionState(self.epoch, voted_id=candidate_id))
        self.role = Voted(self.epoch, candidate_id, now_ms + self.election_timeout_ms())
        self.log.info("quorum.voted", epoch=self.epoch, candidate_id=candidate_id, now_ms=now_ms)
        return effects

    def to_prospective(self, now_ms: int, leader_lost: bool = False) -> list[Effect]:
        """Start a pre-vote round: nothing durable changes (KIP-996)."""
        effects = self._close()
        leader = self.election.leader_id if self.election.leader_id != self.node_id else None
        self.role = Prospective(
            self.epoch, leader, now_ms + self.election_timeout_ms(), leader_lost=leader_lost
        )
        self.role.granted.add(self.node_id)
        self.log.info("quorum.became_prospective", epoch=self.epoch, now_ms=now_ms)
        return effects

    def to_candidate(self, now_ms: int, retries: int = 0) -> list[Effect]:
        """Bump the epoch and vote for ourselves, durably, before asking anyone (KIP-595)."""
        epoch = self.epoch + 1
        effects = self._close()
        effects += self._persist(ElectionState(epoch, voted_id=self.node_id))
        self.role = Candidate(epoch, now_ms + self.election_timeout_ms(), retries)
        self.role.granted.add(self.node_id)
        effects += self._leader_changed()
        self.log.info("quorum.became_candidate", epoch=epoch, retries=retries, now_ms=now_ms)
        return effects

    def to_leader(self, view: LogView, now_ms: int) -> tuple[LeaderState, list[Effect]]:
        """A candidate with a majority leads; its epoch starts at our log end offset."""
        role = self.role
        if not isinstance(role, Candidate) or len(role.granted) < self.majority:
            raise InvariantViolation(f"to_leader from {type(role).__name__} without a majority")
        state = LeaderState(
            role.epoch,
            self.node_id,
            self.voters,
            view.end,
            now_ms,
            self.config,
            view,
            granting_voters=tuple(sorted(role.granted)),
        )
        effects = self._persist(ElectionState(self.epoch, self.node_id, self.node_id))
        self.role = LeaderRole(self.epoch, state)
        self.leader = state
        effects += self._leader_changed()
        self.log.info("quorum.became_leader", epoch=self.epoch, now_ms=now_ms)
        return state, effects

    def to_follower(self, epoch: int, leader_id: int, now_ms: int) -> tuple[Follower, list[Effect]]:
        """Recognise `leader_id` as the leader of `epoch` (>= ours)."""
        if leader_id == self.node_id:
            raise InvariantViolation(f"told to follow ourselves in epoch {epoch}")
        voted = self.election.voted_id if epoch == self.epoch else None
        effects = self._close()
        persisted = self._persist(ElectionState(epoch, voted_id=voted, leader_id=leader_id))
        effects += persisted
        follower = self.role = Follower(epoch, leader_id, now_ms + self.config.fetch_timeout_ms)
        if persisted:  # a new leader or epoch (not a prospective going back to its leader)
            effects += self._leader_changed()
            self.log.info("quorum.became_follower", epoch=epoch, leader_id=leader_id, now_ms=now_ms)
        return follower, effects

    def to_resigned(self, now_ms: int, successors: tuple[int, ...], reason: str) -> list[Effect]:
        if not isinstance(self.role, LeaderRole):
            raise InvariantViolation(f"resign from {type(self.role).__name__}")
        effects = self._close()
        self.role = Resigned(self.epoch, now_ms + self.election_timeout_ms(), successors)
        self.log.info("quorum.resigned", epoch=self.epoch, reason=reason, now_ms=now_ms)
        # Stop acting as leader; the epoch stays ours until a successor is elected.
        return effects + [LeaderChanged(self.epoch, None, False)]

    def restore(self, now_ms: int) -> list[Effect]:
        """Initial role after a (re)start, from the persisted ElectionState."""
        e = self.election
        self.leader = None  # never a leader after a restart (below)
        if e.leader_id is not None and e.leader_id == self.node_id:
            # A restarted leader cannot resume: it may have lost in-memory state (Kafka: Resigned).
            self.role = Resigned(e.epoch, now_ms + self.election_timeout_ms())
        elif e.leader_id is not None:
            self.role = Follower(e.epoch, e.leader_id, now_ms + self.config.fetch_timeout_ms)
        elif e.voted_id is not None and e.voted_id != self.node_id:
            self.role = Voted(e.epoch, e.voted_id, now_ms + self.election_timeout_ms())
        else:
            # Includes a candidate that crashed: it already voted for itself in e.epoch, so it
            # must not vote for anyone else there (voted_id stays set in self.election).
            self.role = Unattached(e.epoch, now_ms + self.election_timeout_ms())
        return []

"""The data-plane brokers' disk model: which appends are fsynced, and how long an fsync takes.

A flush policy (the run-summary's `flush_policy`, harness/results/schema.py FLUSH_POLICIES):
- `page-cache`: Kafka's default. No append is fsynced; the OS writes dirty pages back after
  ~30 s (the broker's periodic flush), so a power loss within a run loses every byte appended
  since the last one. Replication is the durability.
- `flush-every-message`: `flush.messages=1`. Every append, leader's and follower's, is fsynced
  before the broker goes on (Kafka flushes inside Log.append, in the request's thread).
- `fsync-before-ack`: quorum and raft modes. The appends the core marks `flush` (a leader's own
  append before its LEO counts, a follower's before its next fetch reports the new LEO) are
  fsynced before the effects after them run; what their safety argument needs
  (partition/replica/quorum_mode.py).
- `no-fsync`: the unsafe variant of the last: the core's flush marks are ignored.
- None: the model before this one (flushes as the core asks, at no cost; a power loss keeps a
  random prefix of the unflushed bytes), kept for the runs and tests that pin its numbers.

An fsync takes a time drawn from a measured distribution (harness/results/fsync.py; the
repository's default was measured with `kraftlab bench fsync`), rounded to whole simulated ms
(at least 1), from the broker's own seeded generator. While it runs the broker's replica takes
no input (the fsync blocks the append path); the bytes become durable only when it completes, so
a power loss before then loses them (with a policy set, a power loss drops exactly what was not
fsynced).

Invariants: `must_fsync` is a pure function of the policy and the effect; draws happen in the
order fsyncs start, so one seed gives one sequence of fsync times.
"""

from __future__ import annotations

import random

from harness.results.fsync import FsyncProfile, load_default
from partition.replica import AppendAsFollower, AppendAsLeader, Effect

FLUSH_POLICIES = ("page-cache", "flush-every-message", "fsync-before-ack", "no-fsync")
_DEFAULT_PROFILE: FsyncProfile | None = None


def default_profile() -> FsyncProfile:
    """The shipped distribution, read once per process."""
    global _DEFAULT_PROFILE
    if _DEFAULT_PROFILE is None:
        _DEFAULT_PROFILE = load_default()
    return _DEFAULT_PROFILE


class Disk:
    """One broker's disk under `policy` (None: the cost-free model, see the module docstring)."""

    def __init__(self, policy: str | None, rng: random.Random,
                 profile: FsyncProfile | None = None) -> None:
        if policy is not None and policy not in FLUSH_POLICIES:
            raise ValueError(f"flush policy {policy!r}, expected one of {FLUSH_POLICIES}")
        self.policy = policy
        self.rng = rng
        self.profile = profile if profile is not None or policy is None else default_profile()
        self.fsyncs = 0
        self.fsync_ms_total = 0

    @property
    def is_modelled(self) -> bool:
        return self.policy is not None

    def must_fsync(self, effect: Effect) -> bool:
        """Whether `effect` is an append this policy fsyncs (before the effects after it)."""
        if not isinstance(effect, AppendAsLeader | AppendAsFollower):
            return False
        match self.policy:
            case "flush-every-message":
                return True
            case "fsync-before-ack" | None:
                return effect.flush
            case _:
                return False

    def fsync_ms(self, batch_bytes: int) -> int:
        """The time of one fsync of an append of `batch_bytes`, drawn from the distribution."""
        assert self.profile is not None
        case = self.profile.case(batch_bytes, preallocated=False)
        ms = max(1, round(case.draw_us(self.rng.random()) / 1000))
        self.fsyncs += 1
        self.fsync_ms_total += ms
        return ms

"""Raft timing and sizing knobs, named after Kafka's controller.quorum.* configs.

Defaults are Kafka's except where noted (docs/quorum.md explains each difference):
- `append_linger_ms` = 0 here (Kafka 25): with fsync batching in the driver, lingering only adds
  latency to a sequential commit; concurrent proposals still batch, because every proposal that
  arrives before the driver runs the effects lands in the same AppendToLog.
- `fetch_max_wait_ms` = 500 is Kafka's MAX_FETCH_WAIT_MS (a constant there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

# Kafka config name -> field name, for `RaftConfig.from_properties`.
KAFKA_NAMES: dict[str, str] = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
    "controller.quorum.append.linger.ms": "append_linger_ms",
    "metadata.max.idle.interval.ms": "max_idle_interval_ms",
}


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms; timeout in [T, 2T)
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 0  # controller.quorum.append.linger.ms (Kafka: 25)
    max_idle_interval_ms: int = 500  # metadata.max.idle.interval.ms (0 disables the no-op)
    fetch_max_wait_ms: int = 500  # Kafka's KafkaRaftClient.MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = 8 << 20  # Kafka's MAX_FETCH_SIZE_BYTES
    snapshot_chunk_bytes: int = 1 << 20
    # Entries kept below the newest snapshot, so a replica a little behind fetches records rather
    # than the whole snapshot (Kafka keeps metadata.max.retention.bytes = 100 MiB of log).
    snapshot_retention_entries: int = 4096
    observer_bootstrap_backoff_ms: int = 100  # an observer told "no leader" asks the next voter
    max_batch_entries: int = 4096  # a linger batch is appended early once this big
    check_quorum_factor: float = 1.5  # LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR
    pre_vote: bool = True  # KIP-996
    fast_pre_vote_on_unreachable: bool = True  # ours: a refused leader connection -> pre-vote now
    flush_on_append: bool = True  # voters fsync appends before acknowledging them
    # KIP-853: the voter set lives in the log (VotersRecord) and can change one voter at a time.
    # Off: the voter set is the one given at construction, the log is not scanned for records
    # at start, and voter changes are refused (Kafka's kraft.version 0).
    dynamic_voters: bool = True
    # Ours (0 = Kafka's behaviour): a voter's fetch that lacks nothing but the newest high
    # watermark is parked up to this long instead of answered at once, so the next append carries
    # the HW with its records (one message per follower per commit instead of two under steady
    # load). Observers are answered at once; answers with data, read-barrier rounds and snapshots
    # never wait.
    hw_linger_ms: int = 0
    # Ours (0 = Kafka's behaviour): an append is handed at once only to as many parked voters as
    # a commit needs besides the leader (one of two followers); the other voters' long polls take
    # it with the next append, or this long later at most. Parked fetches are served in the
    # order they arrived, so with one write at a time the followers take turns, each fetching
    # every other append: per commit the leader answers and hears from one follower, not two.
    # Observers, answers without data, read-barrier rounds and snapshots never wait.
    spare_voter_linger_ms: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"{f.name} must be >= 0, got {value}")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("election_timeout_ms and fetch_timeout_ms must be > 0")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader not fetched from by a majority for this long resigns (KAFKA-15489)."""
        return int(self.fetch_timeout_ms * self.check_quorum_factor)

    @property
    def fetch_retry_ms(self) -> int:
        """A follower resends a Fetch that got no answer after the long poll plus this slack. An
        early resend is harmless: the leader lets a new fetch replace the parked one, and the
        follower drops answers to a prefix it no longer has. A late one delays noticing a dead
        leader whose connection the driver cannot report as refused."""
        return self.fetch_max_wait_ms + max(self.retry_backoff_ms, 50)

    @property
    def begin_quorum_resend_ms(self) -> int:
        """BeginQuorumEpoch is resent to voters that have not acked every fetch.timeout/2."""
        return max(1, self.fetch_timeout_ms // 2)

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int]) -> RaftConfig:
        """Build from Kafka-named properties; unknown controller.quorum.* names are an error."""
        kwargs: dict[str, Any] = {}
        for key, value in props.items():
            name = KAFKA_NAMES.get(key)
            if name is None:
                if key.startswith("controller.quorum.") and key not in (
                    "controller.quorum.voters",
                    "controller.quorum.bootstrap.servers",
                ):
                    raise ValueError(f"unknown quorum config {key!r}")
                continue
            kwargs[name] = int(value)
        return replace(cls(), **kwargs)

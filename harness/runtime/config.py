"""Controller node configuration: a Kafka-style properties file (`key=value` lines, `#` comments).

Names and defaults follow Kafka's broker configs where Kafka has the setting; settings
that only kraftlab has are prefixed `kraftlab.`. Unknown keys are an error (a typo must not silently
run with a default). Example, as `kraftlab cluster up` writes it:

    node.id=1
    process.roles=controller
    cluster.id=kraftlab-3f2a9c
    controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
    kraftlab.admin.listeners=1@127.0.0.1:8081,2@127.0.0.1:8082,3@127.0.0.1:8083
    metadata.log.dir=/data/node-1
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

# The topic configs' integer syntax (ASCII `-?[0-9]+`) and its bounded int(): one parser for
# every integer setting, node or topic, so both refuse the same strings.
from quorum.metadata.configs import (
    INT_MAX,
    INTEGER_SYNTAX,
    LONG_MAX,
    LONG_MIN,
    parse_ascii_int,
    validate_topic_config,
)


class ConfigError(ValueError):
    """A configuration file or override is invalid (Kafka: INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


def parse_endpoints(value: str, key: str) -> dict[int, Endpoint]:
    """`1@127.0.0.1:9093,2@127.0.0.1:9094` -> {1: Endpoint(...), ...}."""
    out: dict[int, Endpoint] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        try:
            node, address = item.split("@", 1)
            host, port = address.rsplit(":", 1)
            if not (INTEGER_SYNTAX.fullmatch(node) and INTEGER_SYNTAX.fullmatch(port)):
                raise ValueError(item)
            out[parse_ascii_int(node)] = Endpoint(host, parse_ascii_int(port))
        except ValueError:
            raise ConfigError(f"{key}: expected id@host:port, got {item!r}") from None
    if not out:
        raise ConfigError(f"{key} is empty")
    return out


def format_endpoints(endpoints: dict[int, Endpoint]) -> str:
    return ",".join(f"{i}@{e.host}:{e.port}" for i, e in sorted(endpoints.items()))


# Tunables: property name -> (field name, default). Integers in ms unless said otherwise.
TUNABLES: dict[str, tuple[str, int]] = {
    "controller.quorum.election.timeout.ms": ("election_timeout_ms", 1000),
    "controller.quorum.fetch.timeout.ms": ("fetch_timeout_ms", 2000),
    "controller.quorum.election.backoff.max.ms": ("election_backoff_max_ms", 1000),
    "controller.quorum.request.timeout.ms": ("request_timeout_ms", 2000),
    "controller.quorum.retry.backoff.ms": ("retry_backoff_ms", 20),
    # Kafka's default is 25 ms; kraftlab batches per event-loop iteration instead (see docs).
    "controller.quorum.append.linger.ms": ("append_linger_ms", 0),
    "metadata.max.idle.interval.ms": ("max_idle_interval_ms", 500),
    # RaftConfig.hw_linger_ms: a new high watermark waits up to this long for the next append to
    # carry it to the followers (0: answered at once, as Kafka does). Saves a message per
    # follower per commit; followers' images lag the leader's by at most this when idle.
    "kraftlab.quorum.hw.linger.ms": ("hw_linger_ms", 5),
    # RaftConfig.spare_voter_linger_ms: a voter a commit does not need (one of two followers)
    # takes new records with the next append, or at most this long later (0: every parked
    # voter at once, as Kafka does).
    "kraftlab.quorum.spare.voter.linger.ms": ("spare_voter_linger_ms", 5),
    # Hung-leader detection (harness/net/liveness.py): a follower pings its leader's thread over
    # UDP this often, and starts a pre-vote when a ping is unanswered for the timeout (0: off,
    # the fetch timeout alone finds a hung leader, as in Kafka).
    "kraftlab.quorum.liveness.interval.ms": ("liveness_interval_ms", 25),
    "kraftlab.quorum.liveness.timeout.ms": ("liveness_timeout_ms", 200),
    # Take a snapshot after this many committed records since the last one, or after this many
    # bytes of committed records (Kafka's metadata.log.max.record.bytes.between.snapshots,
    # default 20 MiB), whichever comes first.
    "kraftlab.snapshot.interval.records": ("snapshot_interval_records", 10_000),
    "metadata.log.max.record.bytes.between.snapshots": ("snapshot_interval_bytes", 20 << 20),
    # ... or once this long has passed since the last snapshot with committed records not in it
    # (KIP-876's metadata.log.max.snapshot.interval.ms, Kafka's default 1 hour; 0: off). Checked
    # when records are applied (Kafka's SnapshotGenerator checks on each published delta).
    "metadata.log.max.snapshot.interval.ms": ("snapshot_interval_ms", 3_600_000),
    # Entries kept below the newest snapshot before the log prefix is deleted (RaftConfig
    # snapshot_retention_entries; Kafka keeps metadata.max.retention.bytes of log instead).
    "kraftlab.snapshot.retention.records": ("snapshot_retention_records", 4096),
    # Segment size of the metadata log (Kafka's metadata.log.segment.bytes, default 1 GiB): the
    # prefix below a snapshot goes from disk one whole segment at a time.
    "metadata.log.segment.bytes": ("metadata_log_segment_bytes", 1 << 30),
    # 1: followers fsync appended entries before acknowledging them (RaftConfig.flush_on_append);
    # 0 turns that off (the leader's own appends are always flushed by the Raft core).
    "kraftlab.log.fsync": ("fsync", 1),
    # Seed of the core's RNG (election timeouts); -1: drawn from the OS at start.
    "kraftlab.raft.seed": ("seed", -1),
    # Broker lifecycle (KIP-631). Brokers heartbeat this often; the active controller fences a
    # broker silent for the session timeout (both are read by controllers and brokers alike).
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", 2000),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", 9000),
    # Kafka's leader.imbalance.check.interval.seconds (300), in ms here.
    "leader.imbalance.check.interval.ms": ("leader_imbalance_check_interval_ms", 300_000),
    # 1: the active controller runs the periodic preferred-leader rebalance (Kafka's default).
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", 1),
    # 1: KIP-966 Eligible Leader Replicas. The active controller finalizes the feature
    # eligible.leader.replicas.version=1 in the metadata log (a FeatureLevel record, Kafka's
    # `kafka-features.sh upgrade --feature eligible.leader.replicas.version=1`) and honours it
    # from then on, whatever a later controller's own setting (docs/controller.md).
    "eligible.leader.replicas.enable": ("eligible_leader_replicas_enable", 0),
    # A broker waits at most this long for should_shut_down on SIGTERM (controlled shutdown).
    "kraftlab.controlled.shutdown.timeout.ms": ("controlled_shutdown_timeout_ms", 10_000),
    # Data replication (brokers; Kafka's names and defaults, docs/replication.md).
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", 30_000),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", 500),
    "replica.fetch.backoff.ms": ("replica_fetch_backoff_ms", 1_000),
    # Kafka's default is 30000. A fetch frame dropped by a reconnecting link (transport.py) is
    # only resent after this, so kraftlab waits less: a restarted follower resumes in seconds.
    "replica.socket.timeout.ms": ("replica_socket_timeout_ms", 3_000),
    # How often a broker writes its partitions' high watermarks (and recovery points) to the
    # checkpoint files a restart reads back (Kafka's default; docs/replication.md).
    "replica.high.watermark.checkpoint.interval.ms": (
        "replica_high_watermark_checkpoint_interval_ms", 5_000),
    # Data logs (brokers): fsync after this many appended messages (Kafka's flush.messages
    # broker default; Long.MAX_VALUE: never, leave it to the OS and to replication).
    "log.flush.interval.messages": ("log_flush_interval_messages", 2**63 - 1),
    # Broker defaults of the topic log configs (Kafka's synonyms; a topic's own config wins,
    # harness/runtime/log_configs.py, docs/storage.md "Configs"). log.flush.interval.ms: the
    # flush.ms default (Long.MAX_VALUE: never). log.roll.ms: segment.ms (Kafka: log.roll.hours=168).
    "log.flush.interval.ms": ("log_flush_interval_ms", 2**63 - 1),
    "log.segment.bytes": ("log_segment_bytes", 1 << 30),
    "log.roll.ms": ("log_roll_ms", 7 * 24 * 3600 * 1000),
    # retention.ms default: log.retention.ms when set, else log.retention.hours (Kafka's
    # precedence; Kafka's log.retention.ms default is null, -2 stands for it here).
    "log.retention.hours": ("log_retention_hours", 168),
    "log.retention.ms": ("log_retention_ms", -2),
    "log.retention.bytes": ("log_retention_bytes", -1),
    "log.retention.check.interval.ms": ("log_retention_check_interval_ms", 300_000),
    # How long a deleted topic's renamed `-delete` directory is kept before its files go.
    "log.segment.delete.delay.ms": ("log_segment_delete_delay_ms", 60_000),
    # max.message.bytes default (Kafka: 1048588).
    "message.max.bytes": ("message_max_bytes", 1024 * 1024 + 12),
    # 1: a broker's data logs keep appends in its own memory until a flush, so kill -9 loses
    # the unflushed tail as a power loss would (the Jepsen nemesis crash-unflushed, docs/jepsen.md).
    "kraftlab.log.unflushed.in.process": ("unflushed_in_process", 0),
    # Admin API security (docs/operations.md "Security"): mutating routes need the cluster's
    # bearer token when the admin listener is not 127.0.0.1, or always with this set to 1.
    "kraftlab.admin.require.token": ("admin_require_token", 0),
    # Topics a client's Metadata creates (brokers; Kafka's names and defaults): with
    # allow_auto_topic_creation (always before Metadata v4) an unknown topic is created with
    # num.partitions partitions of default.replication.factor replicas (harness/kafka/auto_create.py).
    "auto.create.topics.enable": ("auto_create_topics_enable", 1),
    "num.partitions": ("num_partitions", 1),
    "default.replication.factor": ("default_replication_factor", 1),
    # The group coordinator (brokers; Kafka's names and defaults, docs/groups.md).
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", 50),
    "offsets.topic.replication.factor": ("offsets_topic_replication_factor", 3),
    "offsets.commit.timeout.ms": ("offsets_commit_timeout_ms", 5_000),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", 3_000),
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", 6_000),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", 1_800_000),
    "group.max.size": ("group_max_size", 2**31 - 1),
}

# The admin API is open (no token) only on this address: any other bind needs the token.
LOOPBACK_HOST = "127.0.0.1"
# File holding the cluster's admin bearer token (0600, written by `kraftlab cluster up`). The
# properties name the file, never the token itself: a config dump must not leak it.
TOKEN_FILE_KEY = "kraftlab.admin.token.file"


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    cluster_id: str
    voters: dict[int, Endpoint]
    admin_listeners: dict[int, Endpoint]
    metadata_log_dir: Path
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 0
    max_idle_interval_ms: int = 500
    hw_linger_ms: int = 5
    spare_voter_linger_ms: int = 5
    liveness_interval_ms: int = 25
    liveness_timeout_ms: int = 200
    snapshot_interval_records: int = 10_000
    snapshot_interval_bytes: int = 20 << 20
    snapshot_interval_ms: int = 3_600_000
    snapshot_retention_records: int = 4096
    metadata_log_segment_bytes: int = 1 << 30
    fsync: int = 1
    seed: int = -1
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    leader_imbalance_check_interval_ms: int = 300_000
    auto_leader_rebalance_enable: int = 1
    eligible_leader_replicas_enable: int = 0
    controlled_shutdown_timeout_ms: int = 10_000
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 3_000
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    log_flush_interval_messages: int = 2**63 - 1
    log_flush_interval_ms: int = 2**63 - 1
    log_segment_bytes: int = 1 << 30
    log_roll_ms: int = 7 * 24 * 3600 * 1000
    log_retention_hours: int = 168
    log_retention_ms: int = -2
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300_000
    log_segment_delete_delay_ms: int = 60_000
    message_max_bytes: int = 1024 * 1024 + 12
    unflushed_in_process: int = 0
    admin_require_token: int = 0
    auto_create_topics_enable: int = 1
    num_partitions: int = 1
    default_replication_factor: int = 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_commit_timeout_ms: int = 5_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    admin_token_file: Path | None = None
    # "controller" or "broker" (Kafka's process.roles; combined mode is not supported).
    process_roles: str = "controller"
    # A broker's own RPC listener (controllers listen on their voter endpoint).
    listener: Endpoint | None = None
    # A broker's Kafka wire-protocol listener (`listeners=...,PLAINTEXT://host:port`,
    # harness/kafka): None when the broker's `listeners` names no PLAINTEXT entry.
    kafka_listener: Endpoint | None = None
    rack: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_broker(self) -> bool:
        return self.process_roles == "broker"

    @property
    def rpc_endpoint(self) -> Endpoint:
        if self.listener is not None:  # a broker, or a controller not among the bootstrap voters
            return self.listener
        return self.voters[self.node_id]

    @property
    def admin_endpoint(self) -> Endpoint:
        return self.admin_listeners[self.node_id]

    @property
    def admin_token_required(self) -> bool:
        """Mutating admin routes need the bearer token (bound beyond 127.0.0.1, or asked to)."""
        return bool(self.admin_require_token) or self.admin_endpoint.host != LOOPBACK_HOST

    def read_admin_token(self) -> str | None:
        """The token from `kraftlab.admin.token.file`; ConfigError if it is required but absent
        (a node must never serve an unprotected API on a non-loopback address)."""
        token = None
        if self.admin_token_file is not None:
            try:
                token = self.admin_token_file.read_text().strip() or None
            except OSError as exc:
                raise ConfigError(f"{TOKEN_FILE_KEY}: cannot read the token file: {exc}") from None
        if token is None and self.admin_token_required:
            raise ConfigError(f"the admin API on {self.admin_endpoint.host} requires a token, "
                              f"but {TOKEN_FILE_KEY} names none")
        return token

    @property
    def quorum_state_path(self) -> Path:
        """Kafka keeps `quorum-state` in the metadata partition directory."""
        return self.metadata_log_dir / "__cluster_metadata-0" / "quorum-state"

    def to_properties(self) -> str:
        lines = [
            f"node.id={self.node_id}",
            f"process.roles={self.process_roles}",
            f"cluster.id={self.cluster_id}",
            f"controller.quorum.voters={format_endpoints(self.voters)}",
            f"kraftlab.admin.listeners={format_endpoints(self.admin_listeners)}",
            f"metadata.log.dir={self.metadata_log_dir}",
        ]
        if self.listener is not None:
            value = f"{self.listener.host}:{self.listener.port}"
            if self.kafka_listener is not None:
                value += f",PLAINTEXT://{self.kafka_listener.host}:{self.kafka_listener.port}"
            lines.append(f"listeners={value}")
        if self.rack is not None:
            lines.append(f"broker.rack={self.rack}")
        if self.admin_token_file is not None:
            lines.append(f"{TOKEN_FILE_KEY}={self.admin_token_file}")
        for key, (name, _) in TUNABLES.items():
            lines.append(f"{key}={getattr(self, name)}")
        return "\n".join(lines) + "\n"


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise ConfigError(f"line {number}: expected key=value, got {raw!r}")
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip()
    return props


# Broker defaults of topic log configs: their values must pass the topic config's own rules
# (Kafka's type and bounds, quorum/metadata/configs.py), so a broker default can never be a value
# a topic could not have (a log.segment.bytes past 2^31-1 would break the offset index). Same
# check and message as `kraftlab config` (harness/cli/config.py BROKER_SYNONYMS).
_TOPIC_CONFIG_SYNONYMS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
}


# Settings that are flags (Kafka booleans): true/false (any case, as Kafka's ConfigDef) or 1/0,
# stored as 0/1. Every other tunable is an integer and refuses true/false.
BOOLEAN_KEYS = frozenset({"auto.leader.rebalance.enable", "kraftlab.log.fsync",
                          "kraftlab.admin.require.token", "eligible.leader.replicas.enable",
                          "auto.create.topics.enable"})
# Ranges checked at load beyond the 64-bit type (a value a node would misread, not merely an
# odd choice; `kraftlab config` checks more, harness/cli/config.py `minimum`):
# log.retention.ms: -2 stands for Kafka's null (unset: log.retention.hours applies), -1 is
# unlimited; log.retention.hours is Kafka's INT and must give a valid retention.ms (>= 0 here:
# unlimited is log.retention.ms=-1).
LOAD_RANGES: dict[str, tuple[int, int, str]] = {
    "log.retention.ms": (-2, LONG_MAX, " (-2: unset, log.retention.hours applies; -1: unlimited)"),
    "log.retention.hours": (0, INT_MAX, " (for unlimited retention set log.retention.ms=-1)"),
    "num.partitions": (1, 10_000, ""),
    "default.replication.factor": (1, 1_000, ""),
    "offsets.topic.num.partitions": (1, 10_000, ""),
    "offsets.topic.replication.factor": (1, 1_000, ""),
    "offsets.commit.timeout.ms": (1, INT_MAX, ""),
    "group.initial.rebalance.delay.ms": (0, INT_MAX, ""),
    "group.min.session.timeout.ms": (1, INT_MAX, ""),
    "group.max.session.timeout.ms": (1, INT_MAX, ""),
    "group.max.size": (1, INT_MAX, ""),
    "replica.high.watermark.checkpoint.interval.ms": (1, LONG_MAX, ""),
    "kraftlab.snapshot.interval.records": (1, LONG_MAX, ""),
    "metadata.log.max.record.bytes.between.snapshots": (1, LONG_MAX, ""),
    "kraftlab.snapshot.retention.records": (0, LONG_MAX, ""),
    "metadata.log.segment.bytes": (14, INT_MAX, ""),
}


def parse_integer(key: str, raw: str) -> int:
    """An integer setting: ASCII digits with an optional '-' (no sign '+', '_', spaces or
    non-ASCII digits, which Python's int() would take), within Java's long; ConfigError naming
    the key otherwise."""
    if not INTEGER_SYNTAX.fullmatch(raw):
        raise ConfigError(f"{key} must be an integer (ASCII digits with an optional '-'), "
                          f"got {raw!r}")
    value = parse_ascii_int(raw)
    if not LONG_MIN <= value <= LONG_MAX:
        raise ConfigError(f"{key} must be a 64-bit integer in [{LONG_MIN}, {LONG_MAX}], "
                          f"got {raw!r}")
    return value


def tunable_value(key: str, raw: str) -> int:
    """A tunable's integer value; Kafka's boolean settings take true/false (or 1/0)."""
    if key in BOOLEAN_KEYS:
        lowered = raw.lower()
        if lowered in ("true", "false"):
            return int(lowered == "true")
        if raw not in ("0", "1"):
            raise ConfigError(f"{key} must be true or false (or 1/0), got {raw!r}")
    value = parse_integer(key, raw)
    bounds = LOAD_RANGES.get(key)
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        low, high, hint = bounds
        raise ConfigError(f"{key} must be in [{low}, {high}]{hint}, got {raw!r}")
    return value


def validate_overrides(overrides: dict[str, str]) -> None:
    """Reject `--config k=v` overrides this node does not know (typos)."""
    for key, value in overrides.items():
        if key not in TUNABLES:
            raise ConfigError(f"unknown config {key!r}; known: {', '.join(sorted(TUNABLES))}")
        tunable_value(key, value)


def from_properties(props: dict[str, str]) -> NodeConfig:
    required = ("node.id", "cluster.id", "controller.quorum.voters", "kraftlab.admin.listeners",
                "metadata.log.dir")
    missing = [key for key in required if key not in props]
    if missing:
        raise ConfigError(f"missing required config: {', '.join(missing)}")
    roles = props.get("process.roles", "controller")
    if roles not in ("controller", "broker"):
        raise ConfigError(f"process.roles: expected 'controller' or 'broker', got {roles!r}")
    known = set(required) | {"process.roles", "listeners", "broker.rack", TOKEN_FILE_KEY} | set(
        TUNABLES)
    unknown = sorted(set(props) - known)
    if unknown:
        raise ConfigError(f"unknown config: {', '.join(unknown)}")
    tunables: dict[str, Any] = {}
    for key, (name, _) in TUNABLES.items():
        if key in props:
            tunables[name] = tunable_value(key, props[key])
            synonym = _TOPIC_CONFIG_SYNONYMS.get(key)
            problem = None if synonym is None else validate_topic_config(synonym, str(tunables[name]))
            if problem is not None:
                raise ConfigError(f"{key} is the broker default of topic config {synonym}: {problem}")
    low = tunables.get("group_min_session_timeout_ms", 6_000)
    high = tunables.get("group_max_session_timeout_ms", 1_800_000)
    if low > high:
        raise ConfigError(f"group.min.session.timeout.ms ({low}) must not exceed "
                          f"group.max.session.timeout.ms ({high})")
    node_id = parse_integer("node.id", props["node.id"])
    voters = parse_endpoints(props["controller.quorum.voters"], "controller.quorum.voters")
    admin = parse_endpoints(props["kraftlab.admin.listeners"], "kraftlab.admin.listeners")
    listener = kafka_listener = None
    if roles == "broker":
        if node_id in voters:
            raise ConfigError(f"broker node.id {node_id} must not be a controller voter")
        if "listeners" not in props:
            raise ConfigError("a broker needs listeners=host:port (its RPC listener)")
        # `host:port` is the RPC listener; `PLAINTEXT://host:port` the Kafka one (harness/kafka).
        for item in props["listeners"].split(","):
            item = item.strip()
            if item.startswith("PLAINTEXT://"):
                address = item.removeprefix("PLAINTEXT://")
                kafka_listener = parse_endpoints(f"{node_id}@{address}", "listeners")[node_id]
            elif item:
                listener = parse_endpoints(f"{node_id}@{item}", "listeners")[node_id]
        if listener is None:
            raise ConfigError("a broker needs listeners=host:port (its RPC listener)")
    elif node_id not in voters:
        # A controller joining the quorum (KIP-853 `kraftlab quorum add-controller`): it starts
        # as an observer of the bootstrap voters and listens where `listeners` says.
        if "listeners" not in props:
            raise ConfigError(f"node.id {node_id} is not in controller.quorum.voters "
                              "(a joining controller needs listeners=host:port)")
        listener = parse_endpoints(f"{node_id}@{props['listeners'].strip()}", "listeners")[node_id]
    if node_id not in admin:
        raise ConfigError(f"node.id {node_id} is not in kraftlab.admin.listeners")
    return NodeConfig(
        process_roles=roles,
        listener=listener,
        kafka_listener=kafka_listener,
        rack=props.get("broker.rack"),
        admin_token_file=Path(props[TOKEN_FILE_KEY]) if props.get(TOKEN_FILE_KEY) else None,
        node_id=node_id,
        cluster_id=props["cluster.id"],
        voters=voters,
        admin_listeners=admin,
        metadata_log_dir=Path(props["metadata.log.dir"]),
        **tunables,
    )


def load(path: Path) -> NodeConfig:
    return from_properties(parse_properties(path.read_text()))


assert {f.name for f in fields(NodeConfig)} >= {name for name, _ in TUNABLES.values()}

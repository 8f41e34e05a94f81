"""Controller RPCs (KIP-631 broker lifecycle, KIP-497/903 AlterPartition, CreateTopics,
ElectLeaders, AllocateProducerIds, and kraftlab's ReportReplicaPosition for quorum mode) as frozen slotted dataclasses registered with quorum.codec,
so the node runtime can send them as they are.

Error codes travel as `Errors` (quorum.metadata.errors): the codec carries an enum as its value,
so they are encoded as (code, retriable) pairs and turned back into the enum on decode.
Every response has an `error` field; `Errors.NONE` means success.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum import codec
from quorum.metadata.errors import Errors
from quorum.metadata.records import Endpoint

# --- broker lifecycle (KIP-631) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    # KAFKA-15586: the epoch of the registration this broker shut down cleanly with; -1 after an
    # unclean shutdown (or when unknown).
    previous_broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error: Errors
    broker_epoch: int = -1  # the offset of the RegisterBroker record, filled in after commit
    heartbeat_interval_ms: int = 2000


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the broker's applied metadata offset
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error: Errors
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


# --- topics ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    name: str
    partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str], ...] = ()
    # CreateTopics validate_only: every check and the replica assignment, no records
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreateTopicResponse:
    error: Errors
    message: str = ""
    topic_id: str = ""


@dataclass(frozen=True, slots=True)
class DeleteTopicRequest:
    name: str


@dataclass(frozen=True, slots=True)
class DeleteTopicResponse:
    error: Errors
    message: str = ""


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    """IncrementalAlterConfigs for one topic: set (value) or delete (None) each named config."""

    topic: str
    configs: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    error: Errors
    message: str = ""


# --- AlterPartition (KIP-497, KIP-704, KIP-841, KIP-903) ----------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerState:
    """An ISR member with the broker epoch the leader saw in its fetches (KIP-903; -1: unknown,
    skips the epoch check)."""

    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int  # the partition leader sending it
    broker_epoch: int
    topic_id: str
    partition: int
    leader_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...]
    partition_epoch: int
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: Errors
    topic_id: str = ""
    partition: int = -1
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


# --- leader election (KIP-460) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    topic: str
    partition: int | None = None  # None: every partition of the topic
    election_type: str = "preferred"  # "preferred" | "unclean"


@dataclass(frozen=True, slots=True)
class PartitionElectionResult:
    topic: str
    partition: int
    error: Errors
    message: str = ""


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error: Errors
    results: tuple[PartitionElectionResult, ...] = ()
    message: str = ""


# --- replication.mode=quorum: fenced-epoch position reports (kraftlab) -------------------------


@dataclass(frozen=True, slots=True)
class ReportReplicaPositionRequest:
    """A replica of a quorum-mode partition that saw the partition fenced (leader -1 at
    `leader_epoch`) reports where its log ends: its vote in the controller's election
    (docs/replication.md). It sends it only from the fenced epoch, after which it accepts nothing
    from an earlier leader, so the position cannot grow behind the controller's back."""

    broker_id: int
    broker_epoch: int
    topic_id: str
    partition: int
    leader_epoch: int  # the fenced epoch the replica saw
    last_epoch: int  # the epoch of its last batch (-1: empty log)
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class ReportReplicaPositionResponse:
    error: Errors
    topic_id: str = ""
    partition: int = -1
    leader: int = -1  # the partition's leader after this report (-1: still none)
    leader_epoch: int = -1


# --- replication.mode=raft: leaders elected by the replicas (kraftlab) ------------------------


@dataclass(frozen=True, slots=True)
class RaftLeader:
    """One raft partition the reporting broker leads: the Raft epoch it was elected in and its
    in-sync voters (the leader and the voters that fetched from it within the fetch timeout)."""

    topic_id: str
    partition: int
    leader_epoch: int
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReportRaftLeadersRequest:
    """A broker tells the controller which raft partitions it leads (docs/replication.md): the
    controller records what the Raft groups decided, it never decides it."""

    broker_id: int
    broker_epoch: int
    leaders: tuple[RaftLeader, ...]


@dataclass(frozen=True, slots=True)
class RaftLeaderResult:
    topic_id: str
    partition: int
    error: Errors
    leader: int = -1  # the partition's leader in the image after this request
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReportRaftLeadersResponse:
    error: Errors
    results: tuple[RaftLeaderResult, ...] = ()


# --- producer ids ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResponse:
    error: Errors
    producer_id_start: int = -1
    producer_id_len: int = 0


ControllerRequest = (
    BrokerRegistrationRequest
    | BrokerHeartbeatRequest
    | CreateTopicRequest
    | DeleteTopicRequest
    | AlterConfigsRequest
    | AlterPartitionRequest
    | ElectLeadersRequest
    | AllocateProducerIdsRequest
    | ReportReplicaPositionRequest
    | ReportRaftLeadersRequest
)
ControllerResponse = (
    BrokerRegistrationResponse
    | BrokerHeartbeatResponse
    | CreateTopicResponse
    | DeleteTopicResponse
    | AlterConfigsResponse
    | AlterPartitionResponse
    | ElectLeadersResponse
    | AllocateProducerIdsResponse
    | ReportReplicaPositionResponse
    | ReportRaftLeadersResponse
)

for _cls in (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    BrokerState,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ElectLeadersRequest,
    PartitionElectionResult,
    ElectLeadersResponse,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
    RaftLeader,
    ReportRaftLeadersRequest,
    RaftLeaderResult,
    ReportRaftLeadersResponse,
):
    codec.register(f"controller.{_cls.__name__}")(_cls)

"""The active controller (KIP-631), sans-IO: turns broker, topic, AlterPartition and election
requests into metadata records, reading cluster state from the MetadataImage.

See controller.py for the driver contract and partition_change.py for the election rules.
"""

from quorum.controller.config import ControllerConfig
from quorum.controller.controller import ControllerResult, QuorumController
from quorum.controller.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerState,
    ControllerRequest,
    ControllerResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
    RaftLeader,
    RaftLeaderResult,
    ReportRaftLeadersRequest,
    ReportRaftLeadersResponse,
    ReportReplicaPositionRequest,
    ReportReplicaPositionResponse,
)
from quorum.controller.partition_change import ElectionRules, ElectionType, ReplicaLogState
from quorum.controller.service import ControllerService, Propose, Respond, ServiceOutput

__all__ = [
    "AlterConfigsRequest",
    "AlterConfigsResponse",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "BrokerState",
    "ControllerConfig",
    "ControllerRequest",
    "ControllerResponse",
    "ControllerResult",
    "ControllerService",
    "CreateTopicRequest",
    "CreateTopicResponse",
    "DeleteTopicRequest",
    "DeleteTopicResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectionRules",
    "ElectionType",
    "PartitionElectionResult",
    "Propose",
    "QuorumController",
    "RaftLeader",
    "RaftLeaderResult",
    "ReplicaLogState",
    "ReportRaftLeadersRequest",
    "ReportRaftLeadersResponse",
    "ReportReplicaPositionRequest",
    "ReportReplicaPositionResponse",
    "Respond",
    "ServiceOutput",
]

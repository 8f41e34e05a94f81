"""The docs/operations.md demo, driven through ControllerService with explicit time: topic `first`
(3 partitions, RF 3) on brokers 101-103; broker 102 dies (no heartbeats); within the session
timeout its partitions get new leaders and it leaves every ISR; a controller failover loses
nothing; 102 restarts, re-registers with a new epoch and is unfenced; once leaders add it back
(AlterPartition), a preferred election restores the preferred leaders."""

from __future__ import annotations

from quorum.controller import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerState,
    ControllerResponse,
    ControllerService,
    CreateTopicRequest,
    ElectLeadersRequest,
    Propose,
    Respond,
)
from quorum.controller.service import ServiceOutput
from quorum.metadata import Endpoint, Errors, MetadataImage, encode_record
from quorum.metadata.describe import describe_topic


class Cluster:
    def __init__(self) -> None:
        self.image = MetadataImage()
        self.now_ms = 0
        self.service = ControllerService(image=self.image, now_ms=0)
        self.answers: dict[object, ControllerResponse] = {}
        self._token = 0

    def _run(self, outputs: list[ServiceOutput]) -> None:
        while outputs:
            out = outputs.pop(0)
            match out:
                case Propose(records):
                    results = [
                        self.image.apply(self.image.applied_offset + 1, 1, encode_record(r))
                        for r in records
                    ]
                    outputs += self.service.committed(results)
                    outputs += self.service.pump(self.image, self.now_ms)
                case Respond(token, response):
                    self.answers[token] = response

    def call(self, request: object) -> ControllerResponse:
        self._token += 1
        self.service.submit(self._token, request)  # type: ignore[arg-type]
        self._run(self.service.pump(self.image, self.now_ms))
        return self.answers.pop(self._token)

    def advance_to(self, now_ms: int, alive: tuple[int, ...]) -> None:
        """Brokers in `alive` heartbeat every 2 s; the controller ticks at its deadlines."""
        while self.now_ms < now_ms:
            next_beat = (self.now_ms // 2000 + 1) * 2000
            self.now_ms = min(now_ms, next_beat, self.service.next_deadline_ms())
            self._run(self.service.pump(self.image, self.now_ms))
            if self.now_ms == next_beat:
                for b in alive:
                    self.heartbeat(b)

    def heartbeat(self, b: int) -> ControllerResponse:
        reg = self.image.broker(b)
        assert reg is not None
        return self.call(BrokerHeartbeatRequest(b, reg.broker_epoch, self.image.applied_offset))

    def register(self, b: int, incarnation: str) -> BrokerRegistrationResponse:
        r = self.call(BrokerRegistrationRequest(b, incarnation, (Endpoint("rpc", "h", b),)))
        assert isinstance(r, BrokerRegistrationResponse)
        return r

    def lines(self) -> list[str]:
        return describe_topic(self.image, "first")[1:]


def test_broker_failure_failover_restart_and_preferred_election() -> None:
    c = Cluster()
    for b in (101, 102, 103):
        assert c.register(b, f"{b}-a").error is Errors.NONE
    for b in (101, 102, 103):
        c.heartbeat(b)
    assert c.call(CreateTopicRequest("first", 3, 3)).error is Errors.NONE
    assert c.lines()[0].startswith(
        "\tTopic: first\tPartition: 0\tLeader: 101\tReplicas: 101,102,103\tIsr: 101,102,103"
    )

    # 102 dies at t=0 (its last heartbeat). By 9 s + 2 s it is fenced and out of every ISR.
    c.advance_to(11_000, alive=(101, 103))
    reg = c.image.broker(102)
    assert reg is not None and reg.fenced
    topic = c.image.topic("first")
    assert topic is not None
    for p in c.image.partitions(topic.topic_id):
        assert 102 not in p.isr and p.leader in (101, 103)
    assert c.image.partition(topic.topic_id, 1).leader == 103  # type: ignore[union-attr]

    # Controller failover: a new service over the same committed image loses nothing.
    before = c.image.snapshot()
    c.service = ControllerService(image=c.image, now_ms=c.now_ms)
    c.advance_to(20_000, alive=(101, 103))
    assert c.image.snapshot() == before  # nothing lost, nothing rewritten
    assert c.image.broker(101).fenced is False  # type: ignore[union-attr]

    # 102 restarts with a new incarnation: a new, larger broker epoch; unfenced once caught up.
    old_epoch = reg.broker_epoch
    r = c.register(102, "102-b")
    assert r.error is Errors.NONE and r.broker_epoch > old_epoch
    hb = c.heartbeat(102)
    assert hb.error is Errors.NONE and not hb.is_fenced  # type: ignore[union-attr]

    # The leaders add 102 back once it caught up (the replication layer's AlterPartition).
    for p in c.image.partitions(topic.topic_id):
        leader = c.image.broker(p.leader)
        assert leader is not None
        members = tuple(BrokerState(m, c.image.broker(m).broker_epoch) for m in p.replicas)  # type: ignore[union-attr]
        answer = c.call(
            AlterPartitionRequest(
                p.leader,
                leader.broker_epoch,
                p.topic_id,
                p.partition,
                p.leader_epoch,
                members,
                p.partition_epoch,
            )
        )
        assert answer.error is Errors.NONE
    assert c.call(ElectLeadersRequest("first", None, "preferred")).error is Errors.NONE
    assert [line.split("\t")[3] for line in c.lines()] == [
        "Leader: 101",
        "Leader: 102",
        "Leader: 103",
    ]

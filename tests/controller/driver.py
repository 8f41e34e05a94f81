"""A minimal in-test driver for the controller: one operation at a time, records applied to an
image at consecutive offsets right away (as if committed), then the response completed, exactly
as controller.py's driver contract says."""

from __future__ import annotations

from quorum.controller import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerState,
    ControllerConfig,
    ControllerRequest,
    ControllerResponse,
    ControllerResult,
    CreateTopicRequest,
    CreateTopicResponse,
    QuorumController,
)
from quorum.metadata import Endpoint, MetadataImage, Partition, Record, encode_record


class Driver:
    def __init__(self, config: ControllerConfig | None = None) -> None:
        self.image = MetadataImage()
        self.now_ms = 0
        self.controller = QuorumController(config, image=self.image, now_ms=0)
        self.written: list[Record] = []
        self._incarnations: dict[int, int] = {}

    def commit(self, result: ControllerResult) -> ControllerResponse | None:
        applied = []
        for record in result.records:
            offset = self.image.applied_offset + 1
            applied.append(self.image.apply(offset, 1, encode_record(record)))
            self.written.append(record)
        return result.complete(applied)

    def send(self, request: ControllerRequest) -> ControllerResponse | None:
        return self.commit(self.controller.handle(request, self.image, self.now_ms))

    def tick(self) -> list[Record]:
        before = len(self.written)
        self.commit(self.controller.tick(self.image, self.now_ms))
        return self.written[before:]

    def fail_over(self) -> None:
        """A new active controller over the same committed image (soft state lost)."""
        self.controller = QuorumController(
            self.controller.config, image=self.image, now_ms=self.now_ms
        )

    # --- brokers --------------------------------------------------------------------------------

    def register(
        self,
        broker_id: int,
        rack: str | None = None,
        new_incarnation: bool = False,
        previous_epoch: int = -1,
    ) -> BrokerRegistrationResponse:
        if new_incarnation or broker_id not in self._incarnations:
            self._incarnations[broker_id] = self._incarnations.get(broker_id, 0) + 1
        request = BrokerRegistrationRequest(
            broker_id,
            f"inc-{broker_id}-{self._incarnations[broker_id]}",
            (Endpoint("rpc", "127.0.0.1", 9000 + broker_id),),
            rack,
            previous_epoch,
        )
        response = self.send(request)
        assert isinstance(response, BrokerRegistrationResponse)
        return response

    def epoch(self, broker_id: int) -> int:
        b = self.image.broker(broker_id)
        assert b is not None
        return b.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
        epoch: int | None = None,
    ) -> BrokerHeartbeatResponse:
        b = self.image.broker(broker_id)
        request = BrokerHeartbeatRequest(
            broker_id,
            epoch if epoch is not None else (b.broker_epoch if b else -1),
            self.image.applied_offset if offset is None else offset,
            want_fence,
            want_shut_down,
        )
        response = self.send(request)
        assert isinstance(response, BrokerHeartbeatResponse)
        return response

    def start_brokers(self, *ids: int, racks: dict[int, str] | None = None) -> None:
        for b in ids:
            self.register(b, (racks or {}).get(b))
        for b in ids:
            assert not self.heartbeat(b).is_fenced

    # --- topics ---------------------------------------------------------------------------------

    def create(
        self, name: str, partitions: int = 1, rf: int = 3, **configs: str
    ) -> CreateTopicResponse:
        pairs = tuple((k.replace("_", "."), v) for k, v in configs.items())
        response = self.send(CreateTopicRequest(name, partitions, rf, pairs))
        assert isinstance(response, CreateTopicResponse)
        return response

    def part(self, topic: str, index: int = 0) -> Partition:
        t = self.image.topic(topic)
        assert t is not None
        p = self.image.partition(t.topic_id, index)
        assert p is not None
        return p

    def alter(
        self,
        topic: str,
        index: int,
        isr: tuple[int, ...],
        *,
        sender: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
        member_epochs: dict[int, int] | None = None,
        recovery: int | None = None,
    ) -> AlterPartitionResponse:
        p = self.part(topic, index)
        sender_id = p.leader if sender is None else sender
        b = self.image.broker(sender_id)
        request = AlterPartitionRequest(
            broker_id=sender_id,
            broker_epoch=b.broker_epoch if b else -1,
            topic_id=p.topic_id,
            partition=index,
            leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
            new_isr_with_epochs=tuple(
                BrokerState(m, (member_epochs or {}).get(m, self._epoch_or_unknown(m))) for m in isr
            ),
            partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
            leader_recovery_state=p.leader_recovery_state if recovery is None else recovery,
        )
        response = self.send(request)
        assert isinstance(response, AlterPartitionResponse)
        return response

    def _epoch_or_unknown(self, broker_id: int) -> int:
        b = self.image.broker(broker_id)
        return -1 if b is None else b.broker_epoch

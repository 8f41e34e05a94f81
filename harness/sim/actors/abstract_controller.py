"""The abstract metadata quorum of the data-plane runs (`metadata="abstract"`): one active
controller, the real ControllerService over a MetadataImage, whose proposals commit
COMMIT_DELAY_MS after they are made (one quorum commit round) instead of through Raft. It is an
actor of the World like any other (harness.sim.runs.world): controller RPCs arrive as
ControllerRpcRequests (harness.drive.controller_rpc) and are answered as ControllerRpcResponses;
it publishes the committed image's view of the partition to every broker as the image advances
and with every heartbeat answer (harness.sim.actors.controller).

Model: `crash`/`stop` is the quorum becoming unavailable (isolated leader, quorum lost): the
service is dropped and its waiting callers time out, proposals in flight are lost with it;
`start` is a new active controller: a fresh ControllerService over the same committed image
(fresh broker sessions, as in Kafka). A request's receipt time is its arrival (KAFKA-15019).

Invariants: the image applies records in offset order, one proposal's records at once, only
through a commit of the service that proposed them; every committed partition change is
reported once to `on_partition_change`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from harness.drive.controller_rpc import ControllerRpcRequest, ControllerRpcResponse
from harness.sim.actors.controller import partition_view
from harness.sim.actors.process import SimProcess
from quorum.controller import (
    BrokerHeartbeatRequest,
    ControllerConfig,
    ControllerService,
    Propose,
    Respond,
)
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Partition

CONTROLLER_ID = 0
COMMIT_DELAY_MS = 4  # one metadata-quorum commit round

PartitionChange = Callable[[Partition | None, Partition], None]


class AbstractController(SimProcess):
    """The one active controller (see the module docstring)."""

    def __init__(
        self,
        config: ControllerConfig,
        broker_ids: Sequence[int],
        on_partition_change: PartitionChange,
    ) -> None:
        self.node_id = CONTROLLER_ID
        self.config = config
        self.broker_ids = tuple(broker_ids)
        self.on_partition_change = on_partition_change
        self.image = MetadataImage()
        self.next_offset = 1
        self.service: ControllerService | None = None
        self.generation = 0  # one per process start: the "epoch" of the active controller
        # (due ms, the service that proposed, its records), in proposal order
        self.commits: list[tuple[int, ControllerService, tuple[Any, ...]]] = []
        self.init_process()

    @property
    def is_leader(self) -> bool:
        return self.up

    @property
    def epoch(self) -> int:
        return self.generation

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, now_ms: int, seed: int = 0) -> None:
        self.process_started()
        self.generation += 1
        self.service = ControllerService(self.config, image=self.image, now_ms=now_ms)
        self._pump(now_ms)

    def crash(self, rng: random.Random | None) -> None:
        self.stop()

    def stop(self) -> None:
        self.process_stopped()
        self.service = None  # the waiting callers time out (their responses never come)
        self.commits = []

    def shutdown(self, now_ms: int) -> None:
        pass  # nothing to flush: the image is the committed state

    # -- inputs ---------------------------------------------------------------------------------

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        if not isinstance(message, ControllerRpcRequest) or self.service is None:
            return
        token = ("rpc", message.origin, message.request_id)
        self.service.submit(token, message.request, now_ms)  # receipt time (KAFKA-15019)
        if isinstance(message.request, BrokerHeartbeatRequest):
            # The heartbeat answer carries the broker's metadata catch-up (the fetch path).
            self.outbox.append((message.origin, partition_view(self.image)))
        self._pump(now_ms)

    def admin_request(self, token: Any, request: Any, now_ms: int) -> bool:
        """A request of the run's admin client (topic creation); False if no controller."""
        if self.service is None:
            return False
        self.service.submit(token, request, now_ms)
        self._pump(now_ms)
        return True

    def tick(self, now_ms: int) -> None:
        while self.commits and self.commits[0][0] <= now_ms:
            _, service, records = self.commits.pop(0)
            self._commit(service, records, now_ms)
        self._pump(now_ms)

    def peer_unreachable(self, peer: int, now_ms: int) -> None:
        pass

    def next_deadline_ms(self) -> int | None:
        deadlines = [due for due, _, _ in self.commits[:1]]
        if self.service is not None and not self.service.busy:
            deadlines.append(self.service.next_deadline_ms())
        return min(deadlines) if deadlines else None

    # -- the service ----------------------------------------------------------------------------

    def _pump(self, now_ms: int) -> None:
        if self.service is not None:
            self._run(self.service.pump(self.image, now_ms), now_ms)

    def _run(self, outputs: list[Any], now_ms: int) -> None:
        for out in outputs:
            match out:
                case Propose(records=records):
                    assert self.service is not None
                    self.commits.append((now_ms + COMMIT_DELAY_MS, self.service, records))
                case Respond(token=token, response=response):
                    if isinstance(token, tuple) and token and token[0] == "rpc":
                        _, origin, request_id = token
                        self.outbox.append(
                            (origin, ControllerRpcResponse(request_id, response, self.node_id))
                        )

    def _commit(self, service: ControllerService, records: tuple[Any, ...], now_ms: int) -> None:
        if service is not self.service:
            return  # the quorum lost this proposal with its leader
        before = {(p.topic_id, p.partition): p for _, p in self.image.all_partitions()}
        results = []
        for record in records:
            results.append(self.image.apply_record(self.next_offset, 1, record))
            self.next_offset += 1
        for _, p in self.image.all_partitions():
            old = before.get((p.topic_id, p.partition))
            if old != p:
                self.on_partition_change(old, p)
        push = partition_view(self.image)
        for b in self.broker_ids:
            self.outbox.append((b, push))
        self._run(service.committed(results), now_ms)

"""How the data-plane runs' brokers learn metadata: pushes of the committed image's view of the
partition (`MetadataPush`), from the active controller.

The brokers of the data-plane runs are not Raft observers (the metadata run's are): the
controller that leads pushes its committed image's view of the data partition to every broker
each time its image advances, and answers every broker heartbeat with it (the observer fetch
path, abstracted). A broker cut off from the active controller therefore keeps acting on its
stale view: the zombie leader. `MetadataPublisher` is that behaviour as a NodePart of a Raft
voter (harness.sim.actors.raft_node); the abstract controller (harness.sim.actors.
abstract_controller) publishes the same view.

Invariant: a push carries the image's applied offset; a broker applies only pushes newer than
the last it applied (harness.sim.actors.broker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.sim.actors.raft_node import RaftNode
from partition.replica import MetadataUpdated
from quorum.controller.messages import BrokerState
from quorum.metadata.image import ApplyResult, MetadataImage
from quorum.raft.log import Entry

TOPIC = "t"  # the data-plane runs' one topic, of one partition


@dataclass(frozen=True, slots=True)
class MetadataPush:
    """The committed image's view of the partition, at `offset`."""

    offset: int
    update: MetadataUpdated | None


def partition_view(image: MetadataImage) -> MetadataPush:
    """The push of `image`: its partition 0 of TOPIC and the brokers a leader may be elected
    from (registered, unfenced), or no update while the topic does not exist."""
    topic = image.topic(TOPIC)
    part = None if topic is None else image.partition(topic.topic_id, 0)
    if part is None:
        return MetadataPush(image.applied_offset, None)
    eligible = tuple(BrokerState(b.broker_id, b.broker_epoch) for b in image.brokers()
                     if image.is_broker_usable(b.broker_id))
    return MetadataPush(image.applied_offset, MetadataUpdated(part, eligible))


class MetadataPublisher:
    """A voter's part: while it leads, push every advance of its image to every broker."""

    def __init__(self, node: RaftNode, broker_ids: Sequence[int]) -> None:
        self.node = node
        self.broker_ids = tuple(broker_ids)
        self.reset()

    def reset(self) -> None:
        self.pushed = -1  # the offset last pushed, in this process start

    def accepts(self, message: Any) -> bool:
        return False

    def handle(self, src: int, message: Any, now_ms: int) -> None:
        raise AssertionError("the publisher accepts no input")

    def on_applied(self, entry: Entry, result: ApplyResult | None) -> None:
        pass

    def step(self, now_ms: int) -> None:
        node = self.node
        if node.is_leader and node.image.applied_offset > self.pushed:
            self.pushed = node.image.applied_offset
            push = partition_view(node.image)
            for b in self.broker_ids:
                node.send(b, push)

    def next_deadline_ms(self) -> int | None:
        return None

    def answer_heartbeat(self, broker: int) -> None:
        """The heartbeat answer carries the broker's metadata catch-up (the fetch path)."""
        self.node.send(broker, partition_view(self.node.image))

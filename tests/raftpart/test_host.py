"""The one raft-partition host (harness/drive/raft_host.py) on the simulator's ports, where its
round matters: an fsync that takes time, produce requests that arrive while a core waits for
it, an input that arrives while a core's effects run.

- a replica left dirty while another replica's grouped fsync is in flight goes into the next
  fsync by itself (no later input needed): its acks=all write is answered;
- produce requests that wait for a core's fsync reach it as ONE call when it is free (group
  commit), after the inputs queued before them;
- a client callback that asks the same core again while its effects run waits in its queue.
"""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from harness.drive.raft_host import RaftPartitionHost
from harness.sim.actors.raft_host import SimRaftPorts
from partition.log import LogConfig, PartitionLog, Record, SimStorage, encode_batch
from partition.raft import RaftPartitionConfig
from partition.replica import ProduceRequest, ProduceResponse
from quorum.metadata.errors import Errors

TOPIC_ID = "host-topic"
T0_MS = 1_000


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


class Broker:
    """One broker: single-voter partitions on a disk whose grouped fsync takes `fsync_ms`."""

    node_id = 1

    def __init__(self, partitions: int, fsync_ms: int) -> None:
        self.answers: dict[int, ProduceResponse] = {}
        self.on_answer: Any = None
        self.ports = SimRaftPorts(self, None, fsync_ms=fsync_ms)
        self.host = self.ports.bind(RaftPartitionHost(1, self.ports, self.ports, self.ports,
                                                      self.ports))  # fmt: skip
        self.now = T0_MS
        self.ports.at(self.now)
        storage = SimStorage()
        for p in range(partitions):
            plog = PartitionLog.open(storage, "/data", "t", p, LogConfig(), topic_id=TOPIC_ID)
            self.host.add((TOPIC_ID, p), (1,), plog, seed=p, config=RaftPartitionConfig())
        self.run_to(self.now + 5_000)
        assert all(r.core.is_leader and r.core.high_watermark > 0
                   for r in self.host.replicas.values())  # fmt: skip

    # -- what SimRaftPorts needs of its broker
    def send(self, to: int, message: Any) -> None:
        raise AssertionError("single-voter partitions send nothing")

    def complete_produce(self, response: ProduceResponse) -> None:
        self.answers[response.request_id] = response
        if self.on_answer is not None:
            self.on_answer(response)

    def send_fetch_response(self, to: int, response: Any) -> None:
        pass

    # -- driving it as the broker actor does
    def run_to(self, end_ms: int) -> None:
        while (at := self.ports.next_deadline_ms()) is not None and at <= end_ms:
            self.now = max(self.now, at)
            self.ports.tick(self.now)
            self.host.end_round()
        self.now = end_ms

    def produce(self, partition: int, request_id: int, value: bytes = b"x") -> None:
        host = self.ports.at(self.now)
        request = ProduceRequest(TOPIC_ID, partition, request_id, encode_batch([Record(value)]),
                                 -1, 30_000)  # fmt: skip
        host.produce(host.replicas[(TOPIC_ID, partition)], request)
        host.end_round()


def test_a_replica_dirtied_during_an_fsync_goes_into_the_next_one_by_itself() -> None:
    b = Broker(partitions=2, fsync_ms=5)
    b.produce(0, request_id=1)
    assert b.ports.fsync_done_ms == b.now + 5  # partition 0's append: its fsync in flight
    b.run_to(b.now + 1)
    b.produce(1, request_id=2)  # appended, its fsync must wait for the one in flight
    r1 = b.host.replicas[(TOPIC_ID, 1)]
    assert r1.needs_flush and 2 not in b.answers
    b.run_to(b.now + 4)  # the first fsync completes: partition 1's starts, no input needed
    assert 1 in b.answers and b.ports.fsync_done_ms == b.now + 5
    b.run_to(b.now + 5)
    assert b.answers[2].error is Errors.NONE and not r1.needs_flush
    assert b.host.fsync_rounds >= 2 and r1.core.high_watermark == b.answers[2].last_offset + 1


def test_produce_requests_that_wait_for_an_fsync_reach_the_core_as_one_call() -> None:
    b = Broker(partitions=1, fsync_ms=5)
    b.produce(0, request_id=1)  # its fsync in flight for 5 ms
    calls = b.host.produce_calls
    for request_id in (2, 3, 4):
        b.run_to(b.now + 1)
        b.produce(0, request_id=request_id, value=f"v{request_id}".encode())
    assert b.host.produce_calls == calls  # they wait: the core has stages left (rule 1)
    b.run_to(b.now + 20)
    assert b.host.produce_calls == calls + 1  # one call, one append, one fsync for the three
    offsets = [(b.answers[i].base_offset, b.answers[i].last_offset) for i in (2, 3, 4)]
    assert offsets == [(o, o) for o in range(offsets[0][0], offsets[0][0] + 3)]


def test_a_callback_asking_the_same_core_again_waits_for_the_running_effects() -> None:
    b = Broker(partitions=1, fsync_ms=0)
    r = b.host.replicas[(TOPIC_ID, 0)]
    seen: list[bool] = []

    def again(response: ProduceResponse) -> None:
        if response.request_id == 1:
            seen.append(r.busy)
            b.host.input(r, ProduceRequest(TOPIC_ID, 0, 2, encode_batch([Record(b"y")]), -1,
                                           30_000))  # fmt: skip
            assert r.queued  # never re-entered: it waits for the running effects

    b.on_answer = again
    b.produce(0, request_id=1)
    assert seen == [True] and b.answers[2].error is Errors.NONE
    assert b.answers[2].base_offset == b.answers[1].last_offset + 1

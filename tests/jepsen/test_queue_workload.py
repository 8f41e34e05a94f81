"""The queue workload's pure parts and the client fixes it relies on (no processes).

- QueueOptions rejects settings Kafka rejects (idempotence without acks=all) and bad ranges;
- polls are recorded in the checker's shape, values decoded back to the integers sent;
- `Producer.abort` fails every unacknowledged record at once and stops the sender (a retired
  Jepsen process must not keep a producer retrying forever), even with no broker reachable.
"""

from __future__ import annotations

import asyncio

import pytest

from harness.client import Bootstrap, ClientError, ClusterClient, ConsumerRecord, Producer
from harness.client.connection import BrokerConnection
from harness.client.producer import ProducerConfig
from harness.jepsen.workload_queue import QueueOptions, QueueWorkload, _decode


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"acks": "1"}, "idempotence needs acks=all"),
    ({"acks": "2"}, "acks must be one of"),
    ({"min_insync_replicas": 4}, "min_insync_replicas"),
    ({"replication_mode": "paxos"}, "replication_mode"),  # raft is a mode now
    ({"partitions": 0}, "partitions"),
    ({"poll_wait_ms": 5000}, "poll_wait_ms"),
])
def test_options_reject_what_kafka_rejects(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QueueOptions(**kwargs)  # type: ignore[arg-type]


def test_options_build_the_topic_configs() -> None:
    o = QueueOptions(acks="1", idempotence=False, min_insync_replicas=1,
                     unclean_leader_election=True, replication_mode="quorum")
    assert o.topic_configs() == {"min.insync.replicas": "1",
                                 "unclean.leader.election.enable": "true",
                                 "replication.mode": "quorum"}
    w = QueueWorkload(QueueOptions(producers=2, consumers=3, partitions=2))
    assert w.concurrency == 5 and w.tps == ["jepsen-queue-0", "jepsen-queue-1"]
    assert [w.is_producer(i) for i in range(5)] == [True, True, False, False, False]


def test_polls_are_recorded_in_the_checker_shape() -> None:
    def rec(p: int, offset: int, value: bytes | None) -> ConsumerRecord:
        return ConsumerRecord("t", p, offset, None, value, (), 0, 1)

    value = QueueWorkload.poll_value([rec(0, 4, b"17"), rec(1, 0, b"x"), rec(0, 5, b"18")])
    assert value == {"t-0": [[4, 17], [5, 18]], "t-1": [[0, "x"]]}
    assert (_decode(None), _decode(b"007"), _decode(b"-1")) == (None, 7, "-1")


def test_producer_abort_fails_pending_records_and_stops_its_sender() -> None:
    async def main() -> None:
        # a port nothing listens on: the sender keeps retrying metadata until aborted
        client = ClusterClient(Bootstrap("c", ((101, "127.0.0.1", 9),)), request_timeout_ms=200)
        producer = await Producer.create(client, ProducerConfig(acks=1, linger_ms=0,
                                                                enable_idempotence=False))
        futures = [await producer.send("t", b"v", partition=0) for _ in range(3)]
        sender = next(iter(producer._senders.values()))
        deadline = asyncio.get_running_loop().time() + 5.0
        while not sender.recovering:  # poll: the sender failed to connect and is retrying
            assert asyncio.get_running_loop().time() < deadline, "the sender never tried"
            await asyncio.sleep(0.005)
        assert not any(f.done() for f in futures)
        producer.abort()
        for f in futures:
            with pytest.raises(ClientError) as err:
                await f
            assert err.value.error == "PRODUCER_ABORTED"
        task = sender.task
        assert task is not None
        await asyncio.wait([task], timeout=1.0)
        assert task.cancelled()
        with pytest.raises(ClientError):
            await producer.send("t", b"late", partition=0)
        client.close()

    asyncio.run(main())


def test_a_cancelled_shared_connect_does_not_cancel_the_other_waiters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workers need the same broker connection; the one that started the connect is
    cancelled by its own op timeout. The other must get a retriable ConnectionError, not a
    CancelledError nobody sent it (seen in a run: it killed a Jepsen worker)."""
    started = asyncio.Event()

    async def hangs(self: BrokerConnection, cluster_id: str, timeout_s: float = 0.0) -> None:
        started.set()
        await asyncio.Event().wait()  # a handshake that never completes (no wall-clock timeout)

    monkeypatch.setattr(BrokerConnection, "connect", hangs)

    async def main() -> None:
        client = ClusterClient(Bootstrap("c", ((101, "127.0.0.1", 9),)))
        starter = asyncio.create_task(client.connection(101))
        await started.wait()  # the shared connect is under way
        other = asyncio.create_task(client.connection(101))
        await asyncio.sleep(0)  # one loop step: `other` runs up to its wait on the shared connect
        starter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starter
        with pytest.raises(ConnectionError, match="abandoned"):
            await other
        assert not other.cancelled()
        client.close()

    asyncio.run(main())

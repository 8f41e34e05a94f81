"""A real ControllerNode, alone in its quorum (a voter set of one commits on its own fsync), in
one process: a native write's answer is completed inside the step that commits the record (no
future, no later loop iteration), and a timer that fires for a deadline that has since moved
later does not tick the core (`_on_timer`: a tick before a deadline does nothing)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from pathlib import Path
from typing import Any

from harness.runtime.config import Endpoint, NodeConfig
from harness.runtime.node import ControllerNode
from quorum.metadata import KvPut
from quorum.metadata.image import ApplyResult, Errors


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Sink:
    def __init__(self) -> None:
        self.results: list[Any] = []

    def done(self) -> bool:
        return bool(self.results)

    def set_result(self, result: ApplyResult, /) -> None:
        self.results.append(result)

    def set_exception(self, exception: BaseException, /) -> None:
        self.results.append(exception)


def single_voter(tmp_path: Path) -> NodeConfig:
    port = free_port()
    return NodeConfig(node_id=1, cluster_id="c1", voters={1: Endpoint("127.0.0.1", port)},
                      admin_listeners={1: Endpoint("127.0.0.1", free_port())},
                      metadata_log_dir=tmp_path, seed=7)  # fmt: skip


async def leading_node(tmp_path: Path) -> ControllerNode:
    node = ControllerNode(single_voter(tmp_path))
    await node.start()
    for _ in range(200):
        if node.is_leader and node.image.applied_offset >= 0:
            return node
        await asyncio.sleep(0.01)
    raise AssertionError("a voter set of one did not elect itself")


def test_a_write_is_answered_inside_the_step_that_commits_it(tmp_path: Path) -> None:
    async def main() -> None:
        node = await leading_node(tmp_path)
        sink = Sink()
        node.transport.hold()  # as the delivery of a client's frame
        node.submit_to(KvPut("k", "v"), sink)
        assert not sink.done()  # queued for the delivery's end, not proposed yet
        node.transport.release()  # proposes, appends, fsyncs, commits, applies: all in here
        [result] = sink.results
        assert isinstance(result, ApplyResult) and result.error == Errors.NONE
        assert node.image.get("k") == ("v", result.version)
        await node.stop(resign=False)

    asyncio.run(main())


def test_a_timer_for_a_deadline_that_moved_later_rearms_without_a_tick(tmp_path: Path) -> None:
    async def main() -> None:
        node = await leading_node(tmp_path)
        ticks: list[int] = []
        real_tick = node.core.tick

        def counting_tick(now_ms: int) -> Any:
            ticks.append(now_ms)
            return real_tick(now_ms)

        node.core.tick = counting_tick  # type: ignore[method-assign]
        assert node._timer.armed
        node._timer.cancel()
        deadline = node.core.next_deadline_ms()
        assert deadline > node.now_ms()
        node._on_timer()  # fired early: the deadline it was armed for has moved
        assert ticks == []
        assert node._timer.deadline_ms == deadline and node._timer.armed
        node._timer.cancel()  # from here on only this test fires the timer
        await asyncio.sleep((node.core.next_deadline_ms() - node.now_ms() + 2) / 1000)
        assert node.core.next_deadline_ms() <= node.now_ms()
        node._on_timer()  # now it is due: the core ticks
        assert len(ticks) == 1
        await node.stop(resign=False)

    asyncio.run(main())


class ChainedSink(Sink):
    """Submits a second write when the first is applied (as code reacting to an applied record
    does), from inside the step that applied it."""

    def __init__(self, node: ControllerNode, then: Sink) -> None:
        super().__init__()
        self.node = node
        self.then = then

    def set_result(self, result: ApplyResult, /) -> None:
        super().set_result(result)
        self.node.submit_to(KvPut("k2", "v2"), self.then)


def test_a_write_submitted_while_a_batch_commits_is_proposed_on_the_next_pass(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        node = await leading_node(tmp_path)
        second = Sink()
        first = ChainedSink(node, second)
        node.transport.hold()
        node.submit_to(KvPut("k1", "v1"), first)
        node.transport.release()
        assert first.done() and not second.done()  # queued inside the hook, after its batch
        await asyncio.sleep(0)  # the loop's next pass (not the next timer, up to 500 ms away)
        await asyncio.sleep(0)
        [result] = second.results
        assert isinstance(result, ApplyResult) and node.image.get("k2") == ("v2", result.version)
        await node.stop(resign=False)

    asyncio.run(main())


def test_a_write_not_applied_in_time_is_outcome_unknown_and_may_still_commit(tmp_path: Path) -> None:
    """`propose` gives up after controller.quorum.request.timeout.ms with OutcomeUnknownError
    (the record may still commit: the caller cannot know), and the record's later commit neither
    fails nor answers twice."""
    from harness.runtime.context import OutcomeUnknownError

    async def main() -> None:
        node = ControllerNode(dataclasses.replace(single_voter(tmp_path), request_timeout_ms=50))
        await node.start()
        for _ in range(200):
            if node.is_leader and node.image.applied_offset >= 0:
                break
            await asyncio.sleep(0.01)
        node.transport.hold()  # as inside a delivery: the proposal waits for the release
        try:
            await node.propose(KvPut("late", "v"))
        except OutcomeUnknownError as e:
            assert "not committed within 50 ms" in str(e)
        else:
            raise AssertionError("a write held past its timeout was answered")
        node.transport.release()  # now it is proposed, committed and applied
        assert node.image.get("late") is not None and node.image.get("late")[0] == "v"
        await node.stop(resign=False)

    asyncio.run(main())


def test_the_leaders_own_writes_apply_as_a_replay_of_the_log_does(tmp_path: Path) -> None:
    """The leader applies its own key/value proposals from the records it encoded (no decode);
    replaying the same log after a restart decodes every entry: both images must agree, value,
    version and error for error (a CAS that fails, a delete of a missing key, a record whose
    value the codec rejects: applied undecoded by the leader once, it diverged from the replay)."""
    from quorum.metadata import KvCas, KvDelete

    records = [KvPut("a", "1"), KvCas("a", "1", "2"), KvCas("a", "1", "3"), KvDelete("nope"),
               KvPut("b", {"nested": [1, 2]}), KvDelete("a"), KvCas("c", None, "new")]

    async def main() -> tuple[list[Any], dict[str, Any], int]:
        node = await leading_node(tmp_path)
        sinks = []
        node.transport.hold()
        for record in records:
            sink = Sink()
            node.submit_to(record, sink)
            sinks.append(sink)
        node.transport.release()
        results = [type(s.results[0]).__name__ if isinstance(s.results[0], BaseException)
                   else (s.results[0].error, s.results[0].version) for s in sinks]
        state = {k: node.image.get(k) for k in ("a", "b", "c", "nope")}
        applied = node.image.applied_offset
        await node.stop(resign=False)
        return results, state, applied

    async def replay(applied: int) -> dict[str, Any]:
        node = ControllerNode(single_voter(tmp_path))
        await node.start()
        for _ in range(500):
            if node.image.applied_offset >= applied:
                break
            await asyncio.sleep(0.01)
        state = {k: node.image.get(k) for k in ("a", "b", "c", "nope")}
        await node.stop(resign=False)
        return state

    results, live, applied = asyncio.run(main())
    errors = [r if isinstance(r, str) else r[0] for r in results]
    # The dict value is no KvValue: committed, it decodes on no replica, so it is consumed as an
    # undecodable entry everywhere, the leader included (its writer learns nothing definite).
    assert errors == [Errors.NONE, Errors.NONE, Errors.CAS_FAILED, Errors.KEY_NOT_FOUND,
                      "OutcomeUnknownError", Errors.NONE, Errors.NONE]
    assert live["a"] is None and live["b"] is None and live["c"] is not None
    assert live["c"][0] == "new"
    assert asyncio.run(replay(applied)) == live


def test_a_snapshot_is_taken_once_its_time_interval_passes_with_records_not_in_it(
        tmp_path: Path) -> None:
    """KIP-876 metadata.log.max.snapshot.interval.ms: with the record and byte thresholds far
    away, a snapshot still comes once the interval has passed and records were applied since
    the last one; at 0 the time trigger is off."""
    async def writes_until_snapshot(config: NodeConfig, bound: int) -> tuple[Any, int]:
        node = ControllerNode(config)
        await node.start()
        for _ in range(200):
            if node.is_leader and node.image.applied_offset >= 0:
                break
            await asyncio.sleep(0.01)
        written = 0
        while node.log.latest_snapshot() is None and written < bound:
            await node.propose(KvPut(f"k{written}", "v"))
            written += 1
            await asyncio.sleep(0.01)  # pacing the writes, not a synchronisation
        snapshot = node.log.latest_snapshot()
        await node.stop(resign=False)
        return snapshot, written

    timed = dataclasses.replace(single_voter(tmp_path / "timed"), snapshot_interval_ms=100)
    snapshot, written = asyncio.run(writes_until_snapshot(timed, 500))
    assert snapshot is not None and written < 500, written  # 100 ms of writes 10 ms apart
    assert written < timed.snapshot_interval_records

    off = dataclasses.replace(single_voter(tmp_path / "off"), snapshot_interval_ms=0)
    snapshot, written = asyncio.run(writes_until_snapshot(off, 30))
    assert snapshot is None and written == 30  # 300 ms of writes, no snapshot without the trigger

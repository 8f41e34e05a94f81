"""The failover bench's writer (harness/bench/failover.py `retry_put`) against scripted nodes: a
hung leader holds a request for the whole timeout, so the writer must not go back to it while
the other controllers answer, whatever they answer meanwhile."""

from __future__ import annotations

import pytest

from harness.admin.client import AdminError, OutcomeUnknown
from harness.bench.failover import REQUEST_TIMEOUT_S, retry_put
from harness.launcher.cluster import ClusterError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class HungNode:
    """SIGSTOPped: the PUT is sent, no answer comes back within the timeout."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.asked = 0

    def kv_put(self, key: str, value: str) -> dict[str, object]:
        self.asked += 1
        self.clock.now += REQUEST_TIMEOUT_S
        raise OutcomeUnknown("PUT", f"/kv/{key}", "127.0.0.1", 1, TimeoutError("timed out"))


class Follower:
    """Answers at once: NOT_CONTROLLER naming the old leader until `noticed_at`, then
    LEADER_NOT_AVAILABLE until `elected_at`; then the new leader (`leads`) takes the write and
    the other names it."""

    def __init__(self, clock: Clock, old_leader: int, new_leader: int, leads: bool,
                 noticed_at: float, elected_at: float) -> None:
        self.clock, self.old, self.new, self.leads = clock, old_leader, new_leader, leads
        self.noticed_at, self.elected_at = noticed_at, elected_at
        self.asked = 0

    def kv_put(self, key: str, value: str) -> dict[str, object]:
        self.asked += 1
        self.clock.now += 0.001
        if self.clock.now < self.noticed_at:
            raise AdminError(421, {"error": "NOT_CONTROLLER", "leader": self.old})
        if self.clock.now < self.elected_at:
            raise AdminError(503, {"error": "LEADER_NOT_AVAILABLE", "leader_id": None})
        if self.leads:
            return {"version": 1}
        raise AdminError(421, {"error": "NOT_CONTROLLER", "leader": self.new})


@pytest.mark.parametrize("elected_at", [0.25, 0.32, 0.45, 0.9])
def test_the_hung_leader_costs_one_timeout_not_two(elected_at: float) -> None:
    clock = Clock()
    hung = HungNode(clock)
    f2 = Follower(clock, 1, 3, False, noticed_at=0.28, elected_at=elected_at)
    f3 = Follower(clock, 1, 3, True, noticed_at=0.28, elected_at=elected_at)
    done_at, attempts, answer = retry_put([hung, f2, f3], [1, 2, 3], "k", 30.0, first=1,
                                          clock=clock, pause=clock.sleep)
    assert answer == {"version": 1}
    assert hung.asked == 1  # passed over after its timeout, though the others named it at first
    assert max(elected_at, REQUEST_TIMEOUT_S) <= done_at < max(elected_at, REQUEST_TIMEOUT_S) + 0.02
    assert attempts == 1 + f2.asked + f3.asked


def test_a_timed_out_node_is_asked_again_when_nobody_else_can_answer() -> None:
    clock = Clock()

    class Slow:
        """Alive but slower than the timeout at first, then answering: the only leader."""

        asked = 0

        def kv_put(self, key: str, value: str) -> dict[str, object]:
            self.asked += 1
            clock.now += REQUEST_TIMEOUT_S
            if self.asked == 1:
                raise OutcomeUnknown("PUT", "/kv/k", "127.0.0.1", 1, TimeoutError("timed out"))
            return {"version": 2}

    class Down:
        def kv_put(self, key: str, value: str) -> dict[str, object]:
            clock.now += 0.001
            raise ConnectionRefusedError("refused")

    slow = Slow()
    done_at, _, answer = retry_put([slow, Down(), Down()], [1, 2, 3], "k", 30.0,
                                   clock=clock, pause=clock.sleep)
    assert answer == {"version": 2} and slow.asked == 2
    assert done_at >= 1.0  # not before AVOID_TIMED_OUT_S had passed since its timeout


def test_no_answer_before_the_deadline_is_an_error() -> None:
    clock = Clock()
    with pytest.raises(ClusterError):
        retry_put([HungNode(clock)], [1], "k", 2.0, clock=clock, pause=clock.sleep)

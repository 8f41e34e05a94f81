"""The timeline (harness/ui/timeline.py): which events two successive view states make, in words,
for faults, elections, ISR changes, HW moves, truncations and anomalies; and nothing when
nothing a reader cares about changed."""

from __future__ import annotations

import copy
from typing import Any

from harness.ui.timeline import changes


def log(replica: int, role: str, leo: int, hw: int) -> dict[str, Any]:
    return {"id": replica, "role": role, "log_start": 0, "leo": leo, "hw": hw,
            "leader_epoch": 3, "fetched_to": None, "lag_offsets": None, "lag_ms": None,
            "entries": None}


def state(time_ms: int = 1000) -> dict[str, Any]:
    return {
        "time_ms": time_ms,
        "controllers": [
            {"id": c, "up": True, "paused": False, "role": "leader" if c == 1 else "follower",
             "epoch": 4, "leader_id": 1, "voted_id": 1 if c != 3 else None,
             "high_watermark": 50, "log_end_offset": 50} for c in (1, 2, 3)],
        "brokers": [{"id": b, "up": True, "paused": False, "registered": True, "fenced": False,
                     "epoch": 10 + b, "shutdown": False} for b in (101, 102, 103)],
        "partitions": [{
            "topic": "t", "partition": 0, "mode": "isr", "leader": 101, "leader_epoch": 3,
            "isr": [101, 102, 103], "elr": [], "replicas": [101, 102, 103],
            "committed_end": None,
            "logs": [log(101, "leader", 10, 10), log(102, "follower", 10, 10),
                     log(103, "follower", 10, 10)]}],
        "links": [],
        "anomalies": [],
    }


def texts(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["kind"], e["text"]) for e in changes(before, after)]


def test_no_previous_state_and_no_change_make_no_event() -> None:
    assert changes(None, state()) == []
    assert changes(state(), state(2000)) == []


def test_a_killed_follower_leaves_the_isr_and_comes_back() -> None:
    before = state()
    after = copy.deepcopy(before)
    after["brokers"][1].update(up=False, fenced=True)
    after["partitions"][0]["isr"] = [101, 103]
    after["partitions"][0]["logs"][1]["role"] = "down"
    assert texts(before, after) == [
        ("fault", "broker 102 went down"),
        ("broker", "broker 102 fenced"),
        ("isr", "t-0: ISR shrank to [101, 103] (102 out)"),
    ]
    back = copy.deepcopy(before)
    back["brokers"][1]["epoch"] = 140
    assert texts(after, back) == [
        ("fault", "broker 102 started"),
        ("broker", "broker 102 registered with broker epoch 140 (was 112)"),
        ("broker", "broker 102 unfenced"),
        ("isr", "t-0: ISR grew to [101, 102, 103] (102 in)"),
    ]


def test_elections_name_the_new_leader_epoch_and_votes() -> None:
    before = state()
    after = copy.deepcopy(before)
    for c in after["controllers"]:
        c.update(epoch=5, role="leader" if c["id"] == 2 else "follower", leader_id=2,
                 voted_id=2 if c["id"] in (2, 3) else None)
    after["controllers"][0].update(up=False, role="down")
    after["partitions"][0].update(leader=102, leader_epoch=4)
    assert texts(before, after) == [
        ("fault", "controller 1 went down"),
        ("election", "controller 2 is the active controller in epoch 5 (votes from 2, 3)"),
        ("election", "t-0: leader 102 in epoch 4 (was 101, epoch 3)"),
    ]


def test_hw_moves_of_the_leader_and_truncations_of_a_live_replica() -> None:
    before = state()
    after = copy.deepcopy(before)
    logs = after["partitions"][0]["logs"]
    logs[0].update(leo=12, hw=12)
    logs[1].update(hw=12, leo=12)  # a follower's HW is not the partition's: no event
    logs[2].update(leo=8, hw=8)
    assert texts(before, after) == [
        ("hw", "t-0: high watermark 10 -> 12 (leader 101)"),
        ("truncation", "t-0: broker 103 truncated its log from 10 to 8"),
    ]
    # A replica reopened from disk (recovering) that comes back shorter lost its unflushed tail;
    # one that is down shows its last state, which is no truncation.
    lost = copy.deepcopy(before)
    lost["partitions"][0]["logs"][2].update(role="recovering", leo=9, hw=9)
    assert texts(before, lost)[-1] == (
        "truncation", "t-0: broker 103's log came back from disk shorter, 10 -> 9 "
        "(unflushed tail lost)")
    down = copy.deepcopy(before)
    down["partitions"][0]["logs"][2].update(role="down", leo=0, hw=0)
    assert [k for k, _ in texts(before, down)] == []


def test_links_paused_nodes_and_new_anomalies() -> None:
    before = state()
    after = copy.deepcopy(before)
    after["links"] = [[101, 1], [102, 101]]
    after["brokers"][2]["paused"] = True
    after["anomalies"] = [{"kind": "loss", "text": "committed offset 9 lost", "offsets": [9]}]
    assert texts(before, after) == [
        ("fault", "broker 103 paused"),
        ("fault", "links cut: 1-101, 101-102"),
        ("anomaly", "committed offset 9 lost"),
    ]
    healed = copy.deepcopy(after)
    healed["links"] = [[1, 101]]
    healed["brokers"][2]["paused"] = False
    assert texts(after, healed) == [("fault", "broker 103 resumed"),
                                    ("fault", "links healed: 101-102")]

"""A 20-run fixture dataset whose aggregates are worked out by hand in test_compare_job.py.

Every faulted run has the same fault window: fault_start_ms=2000, fault_end_ms=heal_ms=4000,
so seconds 2 and 3 are "during the fault" and seconds >= 4 are "after heal".
"""

from __future__ import annotations

from typing import Any

from harness.results.schema import NemesisEvent, RunSummary, SecondCounts, Window
from harness.spark.conclude import Evidence

LCF = "leader-cut-from-followers-only"
TAIL = "unclean-crash-losing-unflushed-tail"
CKL = "cut-followers-then-kill-leader"


def sec(second: int, w_ok: int = 0, w_fail: int = 0, w_info: int = 0,
        r_ok: int = 0, r_fail: int = 0, r_info: int = 0) -> SecondCounts:
    return SecondCounts(second, w_ok + w_fail + w_info, w_ok, w_fail, w_info,
                        r_ok + r_fail + r_info, r_ok, r_fail, r_info)


def run(run_id: str, mode: str, acks: str, min_isr: int, nemesis: str, seed: int,
        seconds: list[SecondCounts], *, source: str = "sim", windows: tuple[int, ...] = (),
        **extra: Any) -> RunSummary:
    faulted = nemesis != "none"
    config: dict[str, Any] = dict(
        unclean_leader_election=False, eligible_leader_replicas=False,
        leader_epoch_enable=True, replication_factor=3, brokers=3)
    config.update(extra)
    spans = [Window(windows[i], windows[i + 1]) for i in range(0, len(windows), 2)]
    return RunSummary(
        run_id=run_id, source=source, seed=seed, replication_mode=mode, acks=acks,
        min_insync_replicas=min_isr, nemesis=nemesis,
        fault_duration_ms=2000 if faulted else 0, duration_ms=6000, wall_duration_ms=40,
        nemesis_timeline=(NemesisEvent(2000, 4000, "partition"),) if faulted else (),
        per_second=tuple(seconds), unavailability_windows=tuple(spans),
        fault_start_ms=2000 if faulted else None, fault_end_ms=4000 if faulted else None,
        heal_ms=4000 if faulted else None, **config)


def fixture_rows() -> list[RunSummary]:
    return [
        # G1: ISR acks=all min.isr=1 under LCF: 3 runs.
        run("g1-a", "isr", "all", 1, LCF, 1,
            [sec(0, 10), sec(1, 10), sec(2, 10, r_ok=5), sec(3, 10, r_ok=5), sec(4, 10),
             sec(5, 10)],
            acked_writes=60, lost_writes=6, recovery_time_ms=500, leader_elections=1),
        run("g1-b", "isr", "all", 1, LCF, 2,
            [sec(0, 10), sec(2, 4, 6, r_ok=2, r_fail=3), sec(3, 10, r_ok=5), sec(4, 10),
             sec(5, 10)],
            windows=(2000, 2600), acked_writes=100, lost_writes=0, recovery_time_ms=1000,
            leader_elections=2),
        run("g1-c", "isr", "all", 1, LCF, 3,
            [sec(0, 10), sec(2, 0, 10, r_info=5), sec(3, 0, 5, 5, r_fail=5), sec(4, 5, 5),
             sec(5, 10)],
            windows=(2000, 4000, 4100, 4300), acked_writes=40, lost_writes=4,
            recovery_time_ms=3000, leader_elections=3),
        # G2: ISR acks=all min.isr=2 under LCF: 2 runs, no loss.
        *[run(f"g2-{s}", "isr", "all", 2, LCF, s,
              [sec(0, 10), sec(2, 0, 10), sec(3, 5, 5), sec(4, 10)],
              windows=(2000, 3500), acked_writes=50, recovery_time_ms=200 * s,
              leader_elections=1)
          for s in (1, 2)],
        # G3: quorum acks=all (min.isr=1, as G1) under LCF: 2 runs, one stale read.
        run("g3-1", "quorum", "all", 1, LCF, 1, [sec(2, 8, 2), sec(3, 10), sec(4, 10)],
            acked_writes=80, recovery_time_ms=100, leader_elections=1),
        run("g3-2", "quorum", "all", 1, LCF, 2, [sec(2, 8, 2), sec(3, 10), sec(4, 10)],
            windows=(2000, 2300), acked_writes=80, stale_reads=1, recovery_time_ms=300,
            leader_elections=1),
        # G5: kill-2-of-3: ISR keeps writing, quorum does not and never recovers.
        run("g5-isr", "isr", "all", 1, "kill-2-of-3", 1, [sec(2, 10), sec(3, 10)],
            acked_writes=20, recovery_time_ms=0),
        run("g5-q", "quorum", "all", 1, "kill-2-of-3", 1, [sec(2, 0, 10), sec(3, 0, 0, 10)],
            windows=(2000, 4000), acked_writes=0, recovery_time_ms=None),
        # G6: the unflushed-tail crash: unclean election, min.isr=2 without and with ELR.
        run("g6-unclean", "isr", "all", 1, TAIL, 1, [sec(2, 10), sec(3, 10)],
            unclean_leader_election=True, acked_writes=100, lost_writes=10,
            leader_elections=1, unclean_elections=1, recovery_time_ms=50),
        run("g6-minisr2", "isr", "all", 2, TAIL, 1, [sec(2, 0, 10)], acked_writes=100,
            lost_writes=5, windows=(2000, 4000), recovery_time_ms=700),
        run("g6-elr", "isr", "all", 2, TAIL, 1, [sec(2, 0, 10)], eligible_leader_replicas=True,
            acked_writes=100, windows=(2000, 4000), recovery_time_ms=900),
        # G7: leader.epoch.enable=false under kill-leader: one run diverges.
        run("g7-1", "isr", "1", 1, "kill-leader", 1, [sec(2, 5)], leader_epoch_enable=False,
            acked_writes=10, lost_writes=1, divergent_offsets=3, recovery_time_ms=10),
        run("g7-2", "isr", "1", 1, "kill-leader", 2, [sec(2, 5)], leader_epoch_enable=False,
            acked_writes=10, recovery_time_ms=10),
        # G8: no fault at all.
        run("g8", "isr", "1", 1, "none", 1, [sec(0, 10), sec(1, 10), sec(2, 10)],
            acked_writes=30, metadata_linearizable=True),
        # G10: the cut-off leader killed, a follower elected uncleanly: min.isr=1 loses 10 of
        # 200 (all writes served during the fault), min.isr=2 refuses them and loses nothing.
        *[run(f"g10-{s}", "isr", "all", 1, CKL, s, [sec(2, 10), sec(3, 10)],
              unclean_leader_election=True, acked_writes=100, lost_writes=10 * (s == 1),
              leader_elections=1, unclean_elections=1, recovery_time_ms=100)
          for s in (1, 2)],
        run("g11", "isr", "all", 2, CKL, 1, [sec(2, 0, 10), sec(3, 0, 10)],
            unclean_leader_election=True, acked_writes=50, windows=(2000, 4000),
            leader_elections=1, unclean_elections=1, recovery_time_ms=300),
        # G12: the epoch-enabled twin of G7: no divergence.
        run("g12", "isr", "1", 1, "kill-leader", 1, [sec(2, 5)], acked_writes=10,
            recovery_time_ms=10),
        # G9: one real-process run (source jepsen) that must not mix with the simulated ones.
        run("j1", "isr", "all", 1, LCF, 7, [sec(2, 1, 1)], source="jepsen", acked_writes=4,
            metadata_linearizable=False, recovery_time_ms=1500),
    ]


# The fixture is tiny (one or two runs per group), so its tests ask the conclusion for less
# evidence than the matrix default (conclude.DEFAULT_EVIDENCE); the insufficient-data
# cases are refused under both (tests/spark/test_conclude_rules.py).
FIXTURE_EVIDENCE = Evidence(min_runs=1, min_acked=20, min_attempted=20)

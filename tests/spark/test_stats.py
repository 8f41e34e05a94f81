"""The study's statistics on hand-made data (no Spark): Wilson intervals, the seeded bootstrap,
and every verdict rule both ways (each can come out for either arm, equivalent, inconclusive, or
short of data)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.spark import stats as st
from harness.spark.arms import ARMS, COMPARISONS, EQUAL_SAFETY, Arm, Comparison, check_comparisons

AVAIL = st.METRIC_BY_COLUMN["avail_fault"]  # higher is better, margin 0.02
P99 = st.METRIC_BY_COLUMN["p99_ms_during"]  # lower is better, margin 10 ms


def test_wilson_matches_the_formula_and_its_edges():
    assert st.wilson(2, 3) == pytest.approx((0.2076596, 0.9385081), abs=1e-7)
    assert st.wilson(0, 20) == (0.0, pytest.approx(0.1611252, abs=1e-7))
    assert st.wilson(20, 20) == (pytest.approx(0.8388748, abs=1e-7), 1.0)
    assert st.wilson(0, 0) == (0.0, 1.0)


def test_bootstrap_is_seeded_by_the_cell_and_exact_for_constant_data():
    values = [0.1, 0.3, -0.2, 0.05, 0.4, 0.0, 0.2]
    seed = st.cell_seed("quorum-vs-isr-min2", "kill-leader", 5000, "avail_fault")
    first = st.bootstrap_mean(values, seed)
    assert st.bootstrap_mean(values, seed) == first  # same cell, same interval
    assert first[0] == pytest.approx(sum(values) / len(values))
    assert first[1] < first[0] < first[2]
    other = st.bootstrap_mean(values, st.cell_seed("another", "cell"))
    assert other[0] == first[0] and other[1:] != first[1:]
    assert st.bootstrap_mean([0.5] * 6, seed) == (0.5, 0.5, 0.5)
    assert all(math.isnan(x) for x in st.bootstrap_mean([], seed))


@pytest.mark.parametrize(("low", "high", "metric", "n", "verdict"), [
    (0.05, 0.12, AVAIL, 20, st.B_BETTER),       # b more available, past the 2 pp margin
    (-0.12, -0.05, AVAIL, 20, st.A_BETTER),     # a more available
    (-0.01, 0.015, AVAIL, 20, st.EQUIVALENT),   # within +-2 pp
    (0.01, 0.05, AVAIL, 20, st.INCONCLUSIVE),   # above zero, not clearly past the margin
    (0.05, 0.12, AVAIL, 4, st.INSUFFICIENT),    # fewer than MIN_SEEDS seeds
    (-40.0, -15.0, P99, 20, st.B_BETTER),       # b's p99 lower: lower is better
    (15.0, 40.0, P99, 20, st.A_BETTER),
    (-5.0, 9.0, P99, 20, st.EQUIVALENT),
    (-25.0, 5.0, P99, 20, st.INCONCLUSIVE),
])
def test_decide_goes_every_way(low, high, metric, n, verdict):
    assert st.decide(low, high, metric, n) == verdict


def pairs_frame(rows):
    return pd.DataFrame(rows)


def test_paired_cells_decide_per_cell_from_the_seed_differences():
    rows = []
    for seed in range(1, 11):
        # Cell 1: b serves ~10 pp more than a under every seed (noise +-1 pp).
        rows.append(dict(comparison="c", nemesis="kill-leader", seed=seed,
                         a_avail_fault=0.80 + 0.01 * (seed % 3), b_avail_fault=0.90 + 0.01 * (seed % 2)))
        # Cell 2: b and a alike (differences within +-1 pp).
        rows.append(dict(comparison="c", nemesis="pause-leader", seed=seed,
                         a_avail_fault=0.95, b_avail_fault=0.95 + (0.01 if seed % 2 else -0.01)))
        # Cell 3: a better by 20 pp.
        rows.append(dict(comparison="c", nemesis="bridge", seed=seed,
                         a_avail_fault=0.99, b_avail_fault=0.79))
        # Cell 4: wildly mixed: +50 pp or -40 pp.
        rows.append(dict(comparison="c", nemesis="flapping", seed=seed,
                         a_avail_fault=0.5, b_avail_fault=1.0 if seed % 2 else 0.1))
    table = st.paired_cells(pairs_frame(rows), ["nemesis"], [AVAIL])
    verdicts = dict(zip(table["nemesis"], table["verdict"], strict=True))
    assert verdicts == {"kill-leader": st.B_BETTER, "pause-leader": st.EQUIVALENT,
                        "bridge": st.A_BETTER, "flapping": st.INCONCLUSIVE}
    bridge = table[table["nemesis"] == "bridge"].iloc[0]
    assert (bridge["seeds"], bridge["diff"], bridge["diff_low"], bridge["diff_high"]) == (
        10, pytest.approx(-0.2), pytest.approx(-0.2), pytest.approx(-0.2))
    # Running it again gives the same intervals (seeded per cell).
    again = st.paired_cells(pairs_frame(rows), ["nemesis"], [AVAIL])
    pd.testing.assert_frame_equal(table, again)


def test_paired_cells_use_only_seeds_where_both_arms_have_the_metric():
    rows = [dict(comparison="c", nemesis="n", seed=s, a_p99_ms_during=50.0,
                 b_p99_ms_during=None if s > 3 else 20.0) for s in range(1, 8)]
    table = st.paired_cells(pairs_frame(rows), ["nemesis"], [P99])
    assert list(table["seeds"]) == [3]
    assert list(table["verdict"]) == [st.INSUFFICIENT]
    # Three seeds that all say 30 ms better are not a discovery: the smallest two-sided
    # sign-flip p-value of 3 seeds is 2/8. Six are (2/64, and the only test in the grid).
    three = st.paired_cells(pairs_frame(rows), ["nemesis"], [P99], min_seeds=3)
    assert (list(three["p"]), list(three["verdict"])) == ([0.25], [st.INCONCLUSIVE])
    rows = [dict(r, b_p99_ms_during=20.0) for r in rows[:6]]
    six = st.paired_cells(pairs_frame(rows), ["nemesis"], [P99])
    assert (list(six["p"]), list(six["q"]), list(six["verdict"])) == (
        [2 / 64], [2 / 64], [st.B_BETTER])


@pytest.mark.parametrize(("a", "b", "verdict"), [
    (st.Safety(20, 3, (2, 5, 9)), st.Safety(20, 0), "a-lost"),
    (st.Safety(20, 0), st.Safety(20, 1, (4,)), "b-lost"),
    (st.Safety(20, 2, (1, 2)), st.Safety(20, 1, (7,)), "both-lost"),
    (st.Safety(20, 0), st.Safety(20, 0), "neither-lost"),
])
def test_safety_verdict_goes_every_way(a, b, verdict):
    assert st.safety_verdict(a, b) == verdict


def test_arms_and_comparisons_are_consistent_and_raft_is_one_entry():
    check_comparisons()
    assert ARMS["raft"].matches({"replication_mode": "raft", "acks": "all",
                                 "unclean_leader_election": False, "leader_epoch_enable": True,
                                 "flush_policy": "fsync-before-ack"})
    assert not ARMS["raft"].matches({"replication_mode": "raft", "acks": "all",
                                     "unclean_leader_election": False,
                                     "leader_epoch_enable": True, "flush_policy": "no-fsync"})
    assert ARMS["isr-min2"].matches({"replication_mode": "isr", "min_insync_replicas": 2,
                                     "eligible_leader_replicas": False, "acks": "all",
                                     "unclean_leader_election": False,
                                     "leader_epoch_enable": True, "flush_policy": None})
    first = [c for c in COMPARISONS if c.kind == EQUAL_SAFETY]
    assert {(c.a, c.b) for c in first} >= {("isr-min2", "quorum"), ("isr-min2-elr", "quorum"),
                                           ("isr-min2", "raft"), ("isr-min2-elr", "raft")}
    with pytest.raises(ValueError, match="unknown arm 'paxos'"):
        check_comparisons(ARMS, (Comparison("isr-min2", "paxos", EQUAL_SAFETY, ""),))
    twin = {**ARMS, "twin": Arm("twin", "x", dict(ARMS["quorum"].settings),
                                ARMS["quorum"].flush_policies)}
    with pytest.raises(ValueError, match="the same settings"):
        check_comparisons(twin, (Comparison("quorum", "twin", EQUAL_SAFETY, ""),))


def test_every_arm_is_run_by_exactly_one_setting_of_the_study():
    from harness.sim.runs.study_matrix import STUDY_SETTINGS

    names = ("replication_mode", "acks", "min_insync_replicas", "unclean_leader_election",
             "eligible_leader_replicas", "leader_epoch_enable", "flush_policy")
    rows = [dict(zip(names, s, strict=True)) for s in STUDY_SETTINGS]
    for key, arm in ARMS.items():
        assert sum(arm.matches(r) for r in rows) == 1, key


def test_sign_flip_p_is_exact_over_every_sign_vector():
    # 4 seeds: of the 16 sign vectors, |mean| >= the data's (all positive) for ++++ and ----.
    assert st.sign_flip_p([1.0, 2.0, 3.0, 4.0], 1) == 2 / 16
    assert st.sign_flip_p([1.0, -1.0, 1.0, -1.0], 1) == 1.0  # mean 0: no evidence at all
    assert st.sign_flip_p([0.0] * 5, 1) == 1.0
    # beyond EXACT_FLIPS_MAX seeds the flips are drawn, seeded, and p is never 0
    many = [1.0] * 20
    p = st.sign_flip_p(many, 7)
    assert p == st.sign_flip_p(many, 7) and 0 < p <= 3 / (st.SIGN_FLIPS + 1)


def test_benjamini_hochberg_matches_the_step_up_rule():
    # m = 5: p*5/rank = .005, .025, .0333, .0375, .5; then the running minimum from the top.
    q = st.benjamini_hochberg([0.01, 0.001, 0.02, 0.03, 0.5])
    assert q == pytest.approx([0.025, 0.005, 0.1 / 3, 0.0375, 0.5])
    nan = st.benjamini_hochberg([math.nan, 0.04])
    assert math.isnan(nan[0]) and nan[1] == pytest.approx(0.04)  # NaN is not counted


def test_a_difference_that_does_not_survive_the_fdr_control_is_inconclusive():
    """One clear cell among many null ones: alone it is a discovery at its p; with 40 null
    cells beside it, p * m / rank rises above FDR and the verdict says inconclusive, not
    b-better. The interval is the same in both tables: only the q-value differs."""
    clear = [dict(comparison="c", nemesis="kill-leader", seed=s, a_avail_fault=0.8,
                  b_avail_fault=0.9 + 0.001 * s) for s in range(1, 7)]
    alone = st.paired_cells(pairs_frame(clear), ["nemesis"], [AVAIL])
    assert list(alone["verdict"]) == [st.B_BETTER]
    null = [dict(comparison="c", nemesis=f"null-{k}", seed=s, a_avail_fault=0.9,
                 b_avail_fault=0.9 + (0.05 if (s + k) % 2 else -0.05)) for k in range(40)
            for s in range(1, 7)]
    crowd = st.paired_cells(pairs_frame(clear + null), ["nemesis"], [AVAIL])
    row = crowd[crowd["nemesis"] == "kill-leader"].iloc[0]
    assert row["q"] > st.FDR and row["verdict"] == st.INCONCLUSIVE
    assert (row["diff_low"], row["diff_high"]) == (
        alone.iloc[0]["diff_low"], alone.iloc[0]["diff_high"])


def percentile_interval(values, seed):
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(st.RESAMPLES, data.size))].mean(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


@pytest.mark.parametrize("skewed", [[0.0] * 7 + [3000.0], [0, 0, 0, 0, 100, 200, 400, 3000.0]])
def test_bca_widens_the_interval_towards_a_skewed_tail(skewed):
    """A few seeds that lose seconds, the rest little: the percentile interval's high end
    stops short (it under-covers on the long side at few seeds); BCa's acceleration, the
    jackknife's skew, moves it out. The same resamples on both sides."""
    mean, low, high = st.bootstrap_mean(skewed, 3)
    p_low, p_high = percentile_interval(skewed, 3)
    assert mean == pytest.approx(sum(skewed) / len(skewed))
    assert high > p_high * 1.2 and low >= p_low
    assert low <= mean <= high <= max(skewed)


def test_bca_is_the_percentile_interval_without_skew_or_bias():
    symmetric = [-1.0, 1.0, -2.0, 2.0, -3.0, 3.0]
    assert st.bootstrap_mean(symmetric, 3)[1:] == pytest.approx(percentile_interval(symmetric, 3),
                                                                abs=0.05)

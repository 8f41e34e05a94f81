"""The Spark comparison job on local[2] over the hand-computed fixture (tests/spark/fixture_runs).

One SparkSession and one run of the job serve the whole module (JVM start-up is most of the
cost). Expected numbers are worked out from the fixture by hand in the comments.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results.schema import SchemaError, write_dataset
from harness.spark import conclude
from harness.spark.compare import Progress, analyze
from harness.spark.report import PLOTS
from harness.spark.session import build_session
from tests.spark.fixture_runs import CKL, FIXTURE_EVIDENCE, LCF, TAIL, fixture_rows

pytestmark = pytest.mark.integration  # needs Java (Spark)

Z = 1.959963984540054


def wilson(k: int, n: int) -> tuple[float, float]:
    p, z2 = k / n, Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.fixture(scope="module")
def spark():
    session = build_session("local[2]", app_name="kraftlab-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory):
    rows = fixture_rows()
    sim = [r for r in rows if r.source == "sim"]
    data = tmp_path_factory.mktemp("runs")
    write_dataset(sim[:9], data, part="slice-0")
    write_dataset(sim[9:], data, part="slice-1")
    # Two inputs: the simulated matrix, and a directory laid out as `kraftlab jepsen run
    # --out` writes it (DIR/summary/part-<run_id>.parquet beside the run's other files).
    jepsen = tmp_path_factory.mktemp("jepsen-run")
    (jepsen / "history.jsonl").write_text("{}\n")
    for r in rows:
        if r.source == "jepsen":
            write_dataset([r], jepsen / "summary", part=r.run_id)
    out = tmp_path_factory.mktemp("report")
    progress = Progress(quiet=True)
    res = analyze(spark, [data, jepsen], out, progress, evidence=FIXTURE_EVIDENCE)
    return SimpleNamespace(report=res.report, files=res.files, tables=res.tables,
                           sentences=res.sentences, progress=progress.seen,
                           verdicts=res.verdicts, findings=res.findings)


def one(frame: pd.DataFrame, **match) -> pd.Series:
    sel = frame
    for column, value in match.items():
        sel = sel[sel[column] == value]
    assert len(sel) == 1, f"{match}: {len(sel)} rows"
    return sel.iloc[0]


def group(result, mode="isr", acks="all", min_isr=1, nemesis=LCF, source="sim", **extra):
    keys = dict(source=source, replication_mode=mode, acks=acks, min_insync_replicas=min_isr,
                nemesis=nemesis, unclean_leader_election=False, eligible_leader_replicas=False,
                leader_epoch_enable=True)
    keys.update(extra)
    return one(result.tables["groups"], **keys)


def test_availability_pools_the_fault_and_heal_seconds(result):
    g1 = group(result)
    # writes in seconds 2-3: g1-a 20/20, g1-b 14/20, g1-c 0/20 (info is not success)
    assert (g1["w_ok_fault"], g1["w_att_fault"]) == (34, 60)
    assert g1["write_availability_fault"] == pytest.approx(34 / 60, abs=1e-12)
    assert g1["read_availability_fault"] == pytest.approx(17 / 30, abs=1e-12)
    assert g1["write_availability_heal"] == pytest.approx(55 / 60, abs=1e-12)
    assert g1["write_availability_all"] == pytest.approx(129 / 160, abs=1e-12)
    assert math.isnan(g1["read_availability_heal"])  # no reads after heal: not 0, unknown
    assert group(result, min_isr=2)["write_availability_fault"] == pytest.approx(0.25)
    g8 = group(result, acks="1", nemesis="none")
    assert math.isnan(g8["write_availability_fault"])
    assert g8["write_availability_all"] == 1.0


def test_loss_per_million_acknowledged(result):
    assert group(result)["lost_per_million"] == pytest.approx(50_000.0)  # 10 of 200
    assert group(result, min_isr=2)["lost_per_million"] == 0.0
    assert group(result, nemesis=TAIL, unclean_leader_election=True)["lost_per_million"] \
        == pytest.approx(100_000.0)
    assert math.isnan(group(result, mode="quorum", nemesis="kill-2-of-3")["lost_per_million"])
    durability = result.tables["durability"]
    # isr acks=all min.isr=1 over all nemeses: 10 + 0 + 10 + 10 lost of 200 + 20 + 100 + 200
    assert one(durability, source="sim", replication_mode="isr", acks="all",
               min_insync_replicas=1)["lost_per_million"] == pytest.approx(30e6 / 520)


def test_anomaly_fraction_and_wilson_interval(result):
    g1 = group(result)
    assert (g1["anomalous_runs"], g1["runs"], g1["seeds"]) == (2, 3, 3)
    assert g1["anomaly_fraction"] == pytest.approx(2 / 3)
    assert (g1["anomaly_wilson_low"], g1["anomaly_wilson_high"]) == pytest.approx(wilson(2, 3))
    assert (g1["anomaly_wilson_low"], g1["anomaly_wilson_high"]) == pytest.approx(
        (0.2076596, 0.9385081), abs=1e-7)
    g2 = group(result, min_isr=2)
    assert g2["anomaly_fraction"] == 0.0
    assert (g2["anomaly_wilson_low"], g2["anomaly_wilson_high"]) == pytest.approx(
        (0.0, Z * Z / (2 + Z * Z)))  # k=0: upper bound z^2/(n+z^2) = 0.657620
    q = group(result, mode="quorum")  # one stale read in two runs
    assert q["anomaly_fraction"] == 0.5
    jepsen = group(result, source="jepsen")  # metadata not linearizable counts as an anomaly
    assert (jepsen["runs"], jepsen["anomaly_fraction"]) == (1, 1.0)
    assert jepsen["anomaly_wilson_low"] == pytest.approx(0.2065493, abs=1e-7)


def test_unavailability_percentiles_and_recovery(result):
    g1 = group(result)
    # longest window per run: 0, 600, 2000 -> p50 600, p99 600 + 0.98 * 1400
    assert (g1["p50_unavailable_ms"], g1["p99_unavailable_ms"]) == (600.0, 1972.0)
    assert g1["recovery_p50_ms"] == 1000.0 and g1["recovery_max_ms"] == 3000
    q = group(result, mode="quorum")  # 0 and 300
    assert (q["p50_unavailable_ms"], q["p99_unavailable_ms"]) == (150.0, 297.0)
    killed = group(result, mode="quorum", nemesis="kill-2-of-3")
    assert killed["never_recovered"] == 1 and math.isnan(killed["recovery_p50_ms"])
    assert g1["leader_elections_mean"] == 2.0
    unclean = group(result, nemesis=TAIL, unclean_leader_election=True)
    assert unclean["unclean_elections"] == 1


def test_quorum_minus_isr_pairs(result):
    pairs = result.tables["pairs"]
    assert sorted(pairs["nemesis"]) == ["kill-2-of-3", LCF]
    assert set(pairs["source"]) == {"sim"}  # the jepsen run has no quorum counterpart
    lcf = one(pairs, nemesis=LCF)
    assert (lcf["quorum_runs"], lcf["isr_runs"]) == (2, 3)
    assert lcf["delta_write_availability_fault"] == pytest.approx(36 / 40 - 34 / 60)
    assert lcf["delta_lost_per_million"] == pytest.approx(-50_000.0)
    assert lcf["delta_anomaly_fraction"] == pytest.approx(0.5 - 2 / 3)
    assert lcf["delta_p50_unavailable_ms"] == -450.0
    killed = one(pairs, nemesis="kill-2-of-3")
    assert killed["delta_write_availability_fault"] == -1.0
    assert math.isnan(killed["delta_lost_per_million"])


def test_arms_are_paired_by_seed_within_a_cell(result):
    table = result.tables["comparisons"]
    # ISR min ISR 2 (g2, seeds 1-2) against quorum (g3, seeds 1-2) under LCF: availability
    # during the fault 5/20 -> 18/20 in both seeds: +0.65, the same for every resample.
    eq = table[(table["comparison"] == "quorum-vs-isr-min2") & (table["metric"] == "avail_fault")]
    row = one(eq, nemesis=LCF)
    assert (row["kind"], row["seeds"], row["mean_a"], row["mean_b"]) == (
        "equal-safety", 2, 0.25, 0.9)
    assert (row["diff"], row["diff_low"], row["diff_high"]) == pytest.approx((0.65, 0.65, 0.65))
    # ... and yet two seeds are no discovery: their sign-flip p-value is 2/4 at best
    assert (row["p"], row["verdict"]) == (0.5, "inconclusive")
    # Longest window without an acknowledged write: 1500 ms (both ISR seeds) against 0 and 300.
    win = one(table[(table["comparison"] == "quorum-vs-isr-min2")
                    & (table["metric"] == "max_unavailable_ms")], nemesis=LCF)
    assert (win["mean_a"], win["mean_b"], win["diff"]) == (1500.0, 150.0, -1350.0)
    # ISR min ISR 1 (g1, seeds 1-3) against quorum: only seeds 1 and 2 pair; kill-2-of-3 pairs
    # one seed, too few for a verdict.
    trade = table[(table["comparison"] == "isr-min1-vs-quorum") & (table["metric"] == "avail_fault")]
    assert one(trade, nemesis=LCF)["seeds"] == 2
    assert one(trade, nemesis="kill-2-of-3")["verdict"] == "insufficient"
    # The jepsen run pairs with nothing (no jepsen quorum run).
    assert set(table["source"]) == {"sim"}


def test_safety_per_cell_names_the_seeds_that_lost(result):
    safety = result.tables["safety"]
    lcf = one(safety[safety["comparison"] == "isr-min1-vs-quorum"], nemesis=LCF)
    # g1-a (seed 1) lost 6 of 60; g1-b (seed 2) none; quorum none.
    assert (lcf["a_runs"], lcf["a_lossy_runs"], lcf["a_lossy_seeds"]) == (2, 0, "")
    assert (lcf["b_runs"], lcf["b_lossy_runs"], lcf["b_lossy_seeds"], lcf["b_repro_run"]) == (
        2, 1, "1", "g1-a")
    assert lcf["verdict"] == "b-lost"
    assert (lcf["b_lossy_low"], lcf["b_lossy_high"]) == pytest.approx(wilson(1, 2))
    equal = one(safety[safety["comparison"] == "quorum-vs-isr-min2"], nemesis=LCF)
    assert equal["verdict"] == "neither-lost"
    assert equal["a_lossy_high"] == pytest.approx(wilson(0, 2)[1])


def test_report_html_leads_with_the_method_then_the_verdicts(result):
    page = (result.report.parent / "report.html").read_text()
    method = page.index("How to read this report")
    assert method < page.index("Verdicts at equal safety") < page.index(
        "The twelve reference scenarios") < page.index("Trade-offs (unequal safety)")
    # The equal-safety comparison the fixture pairs (ISR min ISR 2 against quorum, LCF).
    assert "quorum (majority of the replicas), acks=all vs ISR, acks=all, " \
           "min.insync.replicas=2" in page
    assert 'src="forest_quorum-vs-isr-min2.png"' in page
    assert (result.report.parent / "forest_quorum-vs-isr-min2.png").read_bytes()[:4] \
        == b"\x89PNG"
    # The trade-off's loss names its reproduction (g1-a, seed 1), without a command.
    assert "seed 1, 6 acknowledged writes lost" in page
    assert [v.comparison.key for v in result.verdicts][:1] == ["quorum-vs-isr-min2"]
    assert {f.ref for f in result.findings} >= {"2.4", "2.11"}
    assert "## Verdicts (equal safety first" in result.report.read_text()


def test_files_and_progress(result):
    out = result.report.parent
    for name in ("groups", "configs", "nemeses", "durability", "pairs"):
        assert (out / f"{name}.csv").stat().st_size > 0
        back = pq.read_table(out / f"{name}.parquet")
        assert back.num_rows == len(result.tables[name])
    for plot in PLOTS:
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pd.read_csv(out / "groups.csv")["runs"].sum() == 20
    assert result.progress == ["read runs", "aggregate", "pair quorum with ISR",
                               "pair arms by seed", "collect aggregates", "write tables", "plot",
                               "write compare.md", "write report.html"]


def test_conclusion_reflects_the_fixture(result):
    sim = result.sentences["sim"]
    assert sim[0] == (
        "When the ISR leader was cut off from its followers and then lost leadership to an "
        "out-of-sync follower (cut-followers-then-kill-leader, isolate-partition-leader, unclean "
        "election allowed), acks=all with min.insync.replicas=1 lost 50000.0 acknowledged writes "
        "per million (10 of 200, 2 runs); with min.insync.replicas=2 it lost 0.0 acknowledged "
        "writes per million (0 of 50, 1 run).")
    assert sim[1] == (
        "Reproduced: ISR with acks=all and min.insync.replicas=1 loses acknowledged writes when "
        "the leader is cut off from its followers and then loses leadership; with "
        "min.insync.replicas=2 it loses none.")
    assert sim[2] == (
        "When the cut-off leader instead crashed losing its unflushed tail "
        "(unclean-crash-losing-unflushed-tail, no unclean election), min.insync.replicas=1 has "
        "no data; min.insync.replicas=2 without ELR lost 50000.0 acknowledged writes per million "
        "(5 of 100, 1 run): with the leader's disk tail gone, min.insync.replicas=2 alone did not "
        "prevent the loss (KIP-966: that needs ELR).")
    assert sim[3] == (
        "Quorum mode with acks=all lost 0.0 acknowledged writes per million (0 of 160, 3 runs) "
        "across 2 nemeses; ISR with acks=all and min.insync.replicas=1 lost 45454.5 "
        "acknowledged writes per million (10 of 220, 4 runs) across 2 nemeses.")
    assert "Reproduced: quorum mode with acks=all loses no acknowledged write." in sim
    # G3: the fixture's quorum runs acknowledged 36 of 40 writes during the fault.
    assert ("Not reproduced: quorum mode stops accepting writes on a minority side (it "
            "acknowledged 36 writes there).") in sim
    assert "Reproduced: ISR mode stays writable with fewer live replicas than quorum mode " \
           "needs." in sim
    # unclean (min.isr=1) on: g6-unclean (TAIL) + G10 (CKL); off: G1 (LCF) + g5-isr
    # (kill-2-of-3). No fault was run with both settings, so the two sides are not compared
    # (pooled, they would say "Reproduced" from which faults each side saw, not the setting;
    # tests/spark/test_conclude_rules.py has matched cells).
    assert ("Over the faults run with both settings, ISR with acks=all, "
            "min.insync.replicas=1 and unclean.leader.election.enable=true has no data; with "
            "it false, has no data.") in sim
    assert ("Not reproduced: unclean election trades loss for availability (insufficient "
            "data: no cell (same other settings, replication factor, nemesis and fault "
            "duration) was run with both unclean election on and off).") in sim
    assert "Reproduced: ELR avoids loss in the last-replica case." in sim
    assert ("With leader.epoch.enable=false, 1 of 2 runs ended with replicas disagreeing below "
            "their high watermarks (3 offsets); the same settings and faults with it true: 0 of "
            "1 (0 offsets).") in sim
    assert "Reproduced: leader.epoch.enable=false shows the KIP-101 divergence." in sim
    assert "Across every run with leader epochs on (both modes), 0 of 17 ended divergent." in sim
    assert any(s.startswith("5 of 13 configuration-nemesis groups lost acknowledged writes; "
                            "the most was 100000.0 per million with isr acks=all "
                            "min.insync.replicas=1 unclean=true") for s in sim)
    assert sim[-1].startswith("Across 2 quorum/ISR pairs under a fault, quorum mode had lower "
                              "write availability during the fault in 1, higher in 1")
    jepsen = result.sentences["jepsen"]
    # One real run (G9) gives no verdict rule data on both sides: those rules are left out for
    # a non-sim source (conclude.with_data) instead of a page of "(no data)" verdicts; the sim
    # sentences above are the same with or without it.
    assert jepsen == [
        "No configuration lost an acknowledged write under any nemesis.",
        "No quorum/ISR pairs at equal replication factor and durability setting: no data for "
        "the pairwise comparison."]
    text = result.report.read_text()
    assert sim[0] in text and "## Quorum minus ISR at equal RF and durability (sim)" in text
    # Both inputs are named, the sources counted, and every table row says its source.
    assert "20 runs (jepsen: 1, sim: 19)" in text
    assert text.count("`") >= 4 and "jepsen-run" in text
    assert "| source | mode | acks |" in text and "| jepsen | isr | all | 1 |" in text


def test_verdicts_follow_the_numbers(result):
    # The same rules over doctored aggregates must change their verdicts.
    groups = result.tables["groups"].copy()
    sim = groups["source"] == "sim"
    min2 = sim & (groups["min_insync_replicas"] == 2) & (groups["nemesis"] == CKL)
    groups.loc[min2, "lost_writes"] = 20  # 20 of 50: more than min.isr=1's 10 of 200
    said = conclude.rule_min_isr(groups[sim], FIXTURE_EVIDENCE)
    assert said[1].startswith("Not reproduced: ") and said[1].endswith(
        "(min.insync.replicas=2 lost some too).")
    elr = groups["eligible_leader_replicas"] & sim
    groups.loc[elr, "lost_writes"] = 5
    assert conclude.rule_elr(groups[sim], FIXTURE_EVIDENCE)[-1] == (
        "Not reproduced: ELR avoids loss in the last-replica case (ELR did not reduce the loss).")
    on = sim & groups["leader_epoch_enable"] & (groups["nemesis"] == "kill-leader")
    groups.loc[on, ["divergent_runs", "divergent_offsets"]] = [1, 2]
    said = conclude.rule_kip101(groups[sim], FIXTURE_EVIDENCE)
    assert said[1] == ("Not reproduced: leader.epoch.enable=false shows the KIP-101 divergence "
                       "(runs diverged with epochs on too).")
    assert said[2] == ("Across every run with leader epochs on (both modes), 1 of 17 ended "
                       "divergent (under kill-leader: epoch-based truncation should rule this "
                       "out, so it is a finding).")
    quorum = sim & (groups["replication_mode"] == "quorum")
    groups.loc[quorum & (groups["nemesis"] == "kill-2-of-3"), "lost_writes"] = 1
    assert conclude.rule_quorum_loss(groups[sim], FIXTURE_EVIDENCE)[-1] == (
        "Not reproduced: quorum mode with acks=all loses no acknowledged write (it lost writes "
        "under kill-2-of-3).")
    empty = groups.iloc[0:0]
    assert conclude.rule_worst(empty) == ["No run acknowledged a write, so loss cannot be judged."]


def test_the_same_run_given_twice_is_refused(spark, tmp_path):
    # e.g. a matrix directory given again through a copy: its runs would weigh double.
    write_dataset(fixture_rows()[:2], tmp_path / "a")
    write_dataset(fixture_rows()[1:3], tmp_path / "b")
    with pytest.raises(SchemaError, match="duplicate run_id across the input: 'g1-b'$"):
        analyze(spark, [tmp_path / "a", tmp_path / "b"], tmp_path / "out")


def test_missing_column_is_a_schema_error(spark, tmp_path):
    pq.write_table(pa.table({"run_id": ["x"], "seed": [1]}), tmp_path / "part-x.parquet")
    with pytest.raises(SchemaError, match="input lacks columns"):
        analyze(spark, tmp_path, tmp_path / "out")


def test_rows_written_by_spark_read_back_equal(spark, tmp_path):
    # The path `sim matrix --engine spark` takes: records -> Spark DataFrame -> Parquet.
    from harness.results.schema import read_dataset, spark_schema

    rows = fixture_rows()
    frame = spark.createDataFrame([r.to_record() for r in rows], schema=spark_schema())
    frame.coalesce(1).write.parquet(str(tmp_path / "spark-runs"))
    assert sorted(read_dataset(tmp_path / "spark-runs"), key=lambda r: r.run_id) == \
        sorted(rows, key=lambda r: r.run_id)


def test_empty_dataset_gives_a_report_without_conclusions(spark, tmp_path):
    write_dataset([], tmp_path / "runs")
    res = analyze(spark, f"file://{tmp_path / 'runs'}", tmp_path / "out")  # a URI input too
    assert res.sentences == {}
    assert "0 runs (none)" in res.report.read_text()
    for plot in PLOTS:
        assert (tmp_path / "out" / plot).exists()


def test_rows_breaking_an_invariant_are_named(spark, tmp_path):
    # Written without the validator (as a Spark producer could): the job refuses, naming runs.
    from harness.results.schema import SCHEMA

    records = [r.to_record() for r in fixture_rows()[:3]]
    records[1]["lost_writes"] = records[1]["acked_writes"] + 1
    records[2]["acks"] = "-1"
    pq.write_table(pa.Table.from_pylist(records, schema=SCHEMA), tmp_path / "part-0.parquet")
    with pytest.raises(SchemaError) as info:
        analyze(spark, tmp_path, tmp_path / "out")
    assert "'g1-b' (lost_writes > acked_writes)" in str(info.value)
    assert "'g1-c' (acks)" in str(info.value)
    assert "g1-a" not in str(info.value)


def test_every_configuration_on_the_plot_is_labelled(result):
    from harness.spark.report import point_labels

    configs = result.tables["configs"].dropna(subset=["write_availability_fault"])
    labels = {label: (x, y, k) for label, x, y, k in point_labels(configs)}
    assert len(labels) == len(configs)
    # unclean, min.isr=1: g6-unclean and G10 served 60 of 60 writes during their faults, and
    # g6-unclean and g10-1 lost writes: 2 of 3 runs anomalous.
    assert labels["isr all/1 U"][:2] == (pytest.approx(60 / 60), pytest.approx(2 / 3))
    assert labels["isr all/2 U"][:2] == (0.0, 0.0)
    assert labels["isr all/2 ELR"][:2] == (0.0, 0.0)
    assert labels["isr 1/1 E-"][1] == 0.5
    assert labels["isr all/1 J"][:2] == (0.5, 1.0)  # the jepsen run: 1 of 2 served
    # Points at the same place get their labels on separate lines.
    same = [v[2] for k, v in labels.items() if v[:2] == (0.0, 0.0)]
    assert sorted(same) == list(range(len(same)))


def test_real_runs_of_one_schedule_pair_at_whole_seconds(spark, tmp_path):
    """`kraftlab compare`'s live queue runs: an isr and a quorum run (source jepsen) whose fault
    was held 5 s by the same schedule measure a few ms apart; the job rounds a real run's
    fault duration to whole seconds, so the two form one pair, at the matrix's 5 s cell. A sim
    row's duration stays exact."""
    from dataclasses import replace

    from harness.spark import aggregate as ag
    from tests.spark.fixture_runs import run, sec

    rows = [replace(run(f"j-{mode}", mode, "all", 2, "kill-leader", 1, [sec(2, 5)],
                        source="jepsen", acked_writes=5), fault_duration_ms=ms)
            for mode, ms in (("isr", 5043), ("quorum", 4987))]
    rows.append(replace(run("s-isr", "isr", "all", 2, "kill-leader", 1, [sec(2, 5)],
                            acked_writes=5), fault_duration_ms=5043))
    write_dataset(rows, tmp_path)
    runs = ag.run_level(spark.read.parquet(str(tmp_path)))
    durations = {r["run_id"]: r["fault_duration_ms"] for r in runs.collect()}
    assert durations == {"j-isr": 5000, "j-quorum": 5000, "s-isr": 5043}
    pairs = ag.quorum_vs_isr(ag.summarize(runs, ag.GROUP_KEYS)).collect()
    assert [(p["source"], p["fault_duration_ms"], p["quorum_runs"], p["isr_runs"])
            for p in pairs] == [("jepsen", 5000, 1, 1)]

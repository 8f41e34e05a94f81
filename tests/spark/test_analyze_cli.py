"""`kraftlab analyze` argument handling that needs no Spark: bad input fails fast with exit 3."""

from __future__ import annotations

import json

from harness.cli.main import main


def test_missing_input_is_invalid_request_before_spark_starts(tmp_path, capsys):
    code = main(["analyze", "--input", str(tmp_path / "absent"), "--out", str(tmp_path / "o")])
    assert code == 3
    error = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert error["error"] == "INVALID_REQUEST" and "does not exist" in error["message"]
    assert not (tmp_path / "o").exists()


def test_directory_without_parquet_is_invalid_request(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("no runs here")
    assert main(["analyze", "--input", str(tmp_path), "--out", str(tmp_path / "o")]) == 3
    assert "no .parquet files" in capsys.readouterr().err


def test_uris_are_left_to_spark_and_local_paths_are_checked(tmp_path):
    from harness.spark.compare import check_input, is_uri

    assert is_uri("hdfs:///kraftlab/runs") and is_uri("s3a://bucket/runs")
    assert is_uri("file:/tmp/runs") and not is_uri("/tmp/runs") and not is_uri("runs/a:b")
    check_input("hdfs:///nowhere")  # not checked locally: Spark reports it


def test_several_inputs_are_each_checked(tmp_path, capsys):
    from harness.results.schema import write_dataset
    from tests.spark.fixture_runs import fixture_rows

    write_dataset(fixture_rows()[:1], tmp_path / "sim")
    code = main(["analyze", "--input", str(tmp_path / "sim"), str(tmp_path / "jepsen-missing"),
                 "--out", str(tmp_path / "o")])
    assert code == 3
    error = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert error["message"] == f"input {tmp_path / 'jepsen-missing'} does not exist"


def test_input_option_collects_every_location():
    from harness.spark.compare import build_parser, input_list

    args = build_parser().parse_args(["--input", "runs/", "jepsen/a", "--input", "hdfs:///r",
                                      "--out", "o"])
    assert args.input == ["runs/", "jepsen/a", "hdfs:///r"]
    assert input_list(args.input) == ["runs/", "jepsen/a", "hdfs:///r"]
    assert input_list("runs/") == ["runs/"]

"""`kraftlab analyze` argument handling that needs no Spark: bad input fails fast with exit 3."""

from __future__ import annotations

import json

from harness.cli import main


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

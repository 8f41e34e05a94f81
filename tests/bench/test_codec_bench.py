"""`kraftlab bench codec` end to end (tiny loops: its figures are not checked, its shape is), and
`kraftlab bench --help`, whose kinds' summaries argparse %-formats."""

from __future__ import annotations

import json

import pytest

from harness.bench.codec import PER_COMMIT, commit_frames
from harness.cli.main import main


def test_bench_codec_reports_every_commit_frame_and_each_role(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "codec", "--loops", "5", "--repeats", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["frames"]) == set(commit_frames())
    assert set(result["per_commit_us"]) == set(PER_COMMIT) == {"leader", "follower", "client"}
    assert {f for ops in PER_COMMIT.values() for f, _, _ in ops} == set(commit_frames())


def test_bench_help_lists_the_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "codec" in out and "CPU % of each broker" in out

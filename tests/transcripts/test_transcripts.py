"""Runs every transcript under testdata/: testdata/raft/*.txt against RaftEnv, testdata/partition/
*.txt against PartitionEnv. A mismatch fails with a unified diff of expected and actual output.
KRAFTLAB_REWRITE_TRANSCRIPTS=1 writes the actual outputs into the files instead (like
datadriven's -rewrite); review the diff before committing it: the expected output is the
protocol's behaviour, not whatever the code did today."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.transcripts.datadriven import (
    Block,
    Command,
    TranscriptError,
    parse,
    render,
    run_transcript,
)
from tests.transcripts.partition_env import PartitionEnv
from tests.transcripts.raft_env import RaftEnv

TESTDATA = Path(__file__).parent / "testdata"
ENVS: dict[str, Callable[[], RaftEnv | PartitionEnv]] = {"raft": RaftEnv, "partition": PartitionEnv}
FILES = sorted(TESTDATA.glob("*/*.txt"))
REWRITE = os.environ.get("KRAFTLAB_REWRITE_TRANSCRIPTS") == "1"


def _run(path: Path) -> tuple[str, str]:
    env = ENVS[path.parent.name]()
    text = path.read_text()
    return text, run_transcript(text, env.handle)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_transcript(path: Path) -> None:
    expected, actual = _run(path)
    if actual == expected:
        return
    if REWRITE:
        path.write_text(actual)
        return
    name = path.relative_to(TESTDATA)
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True),
            fromfile=f"{name} (expected)", tofile=f"{name} (actual)",
        )
    )  # fmt: skip
    pytest.fail(
        f"transcript {name} differs from what the cores did (- expected, + actual); if the new "
        f"behaviour is right, rerun with KRAFTLAB_REWRITE_TRANSCRIPTS=1 and review the diff:\n{diff}",
        pytrace=False,
    )


def test_there_are_transcripts_for_both_drivers() -> None:
    assert {p.parent.name for p in FILES} == set(ENVS)
    assert len(FILES) >= 12


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_transcript_tells_its_story_and_checks_state(path: Path) -> None:
    """A header comment names the story and its source; some block prints state to compare."""
    chunks = parse(path.read_text())
    assert isinstance(chunks[0], str) and chunks[0].startswith("# "), "no header comment"
    blocks = [c for c in chunks if isinstance(c, Block)]
    assert any(b.command == "status" and b.expected for b in blocks), "no status block"


# --------------------------------------------------------------------- the format itself


def test_render_is_the_inverse_of_parse_including_blank_line_outputs() -> None:
    text = (
        "# header\n\nstatus\n----\nline 1\nline 2\n\nheal\n----\n\n"
        "msgs\n----\n----\nbefore\n\nafter\n----\n----\n"
    )
    chunks = parse(text)
    blocks = [c for c in chunks if isinstance(c, Block)]
    assert [(b.command, b.expected, b.line) for b in blocks] == [
        ("status", "line 1\nline 2", 3),
        ("heal", "", 8),
        ("msgs", "before\n\nafter", 11),
    ]
    assert render(chunks) == text


def test_a_wrong_expectation_is_reported_not_accepted() -> None:
    text = "replicas 1 2\n----\n2 becomes follower of 1 in epoch 7\n"
    actual = run_transcript(text, PartitionEnv().handle)
    assert actual != text
    assert "2 becomes follower of 1 in epoch 0" in actual


@pytest.mark.parametrize(
    "text",
    [
        "status\nno separator\n",
        "status\n----\n----\nunterminated\n",
    ],
)
def test_malformed_transcripts_are_errors(text: str) -> None:
    with pytest.raises(TranscriptError):
        parse(text)


@pytest.mark.parametrize(
    "line",
    [
        "no-such-command",
        "add-nodes 3 no_such_field=1",
        "campaign",
    ],
)
def test_bad_commands_raise_instead_of_being_rewritten(line: str) -> None:
    env = RaftEnv()
    if line != "no-such-command":
        env.handle(Command.parse("add-nodes 3"))
    with pytest.raises(TranscriptError):
        env.handle(Command.parse(line))

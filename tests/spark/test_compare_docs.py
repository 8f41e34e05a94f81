"""docs/compare.md's generated blocks (harness/study/docs.py) are what the code renders: the
presets and their run counts, the arms and comparisons, the study's matrix and curves, the faults,
the margins, the live runs, the simulation-against-real cells and tolerances."""

from __future__ import annotations

import argparse

import pytest

from harness.sim.actors.disk import FLUSH_POLICIES
from harness.sim.runs.matrix import DEFAULT_SETTINGS
from harness.study import docs
from harness.study.presets import PRESETS, preset_spec


def test_docs_compare_md_is_what_the_code_renders() -> None:
    changes = docs.diff()
    assert not changes, (
        "docs/compare.md differs from what the code renders; regenerate it with "
        f"`{docs.COMMAND}` (and commit the result):\n{changes}")


def test_every_block_is_in_the_page_once() -> None:
    lines = docs.DOC.read_text().splitlines()
    for name in docs.BLOCKS:
        assert lines.count(f"<!-- generated: {name} -->") == 1, name
    opened = [line for line in lines if line.startswith("<!-- generated: ")]
    assert len(opened) == lines.count("<!-- end generated -->") == len(docs.BLOCKS)


def test_render_replaces_only_the_blocks_and_names_unknown_ones() -> None:
    text = "before\n<!-- generated: a -->\nstale\n<!-- end generated -->\nafter\n"
    assert docs.render(text, {"a": lambda: "fresh\n"}) == text.replace("stale", "fresh")
    with pytest.raises(ValueError, match="unknown generated block 'a'"):
        docs.render(text, {"b": lambda: ""})
    with pytest.raises(ValueError, match="missing from the text: b"):
        docs.render(text, {"a": lambda: "", "b": lambda: ""})


def test_the_presets_table_counts_each_presets_runs() -> None:
    table = docs.presets_block()
    for name in PRESETS:
        runs = f"{len(preset_spec(name).configs()):,}"  # counted here, not by the renderer
        assert f"| `{name}` |" in table and table.count(f"| {runs} |") >= 1, name


def test_every_setting_and_flush_policy_has_its_words() -> None:
    assert set(docs.SETTING_CLAIMS) == set(DEFAULT_SETTINGS)
    assert set(docs.DURABILITY) == set(FLUSH_POLICIES)


def test_the_compare_help_states_the_counts_the_code_gives() -> None:
    from harness.study.compare import add_options

    parser = argparse.ArgumentParser()
    add_options(parser)
    preset = next(a for a in parser._actions if a.dest == "preset")
    for name in ("default", "tiny"):
        assert f"{len(preset_spec(name).configs()):,} runs" in (preset.help or ""), name


def test_check_mode_reports_a_drift_and_writes_nothing(tmp_path, capsys) -> None:
    page = tmp_path / "compare.md"
    stale = docs.DOC.read_text().replace("| `tiny` |", "| `tiny` | stale |", 1)
    page.write_text(stale)
    assert docs.main([str(page), "--check"]) == 1
    assert "stale" in capsys.readouterr().out and page.read_text() == stale
    assert docs.main([str(page)]) == 0
    assert page.read_text() == docs.DOC.read_text()
    assert docs.main([str(page), "--check"]) == 0

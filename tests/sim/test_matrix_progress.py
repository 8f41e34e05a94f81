"""Matrix progress: redrawn in place on a terminal, whole lines (and few) in a log."""

from __future__ import annotations

import io

from harness.sim.runs.matrix import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_whole_lines_and_the_last_one() -> None:
    log = io.StringIO()
    progress = Progress(3, stream=log, log_interval_s=3600)
    for _ in range(3):
        progress.add(1000)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    # The first run prints (nothing printed yet), the interval hides the second, the last prints.
    assert [line.split("]")[1].split()[0] for line in lines] == ["1/3", "3/3"]


def test_a_terminal_gets_one_line_redrawn() -> None:
    term = _Terminal()
    progress = Progress(2, stream=term)
    progress.add(1000)
    progress.add(1000)
    out = term.getvalue()
    assert out.startswith("\r[") and out.endswith("\n") and out.count("\n") == 1


def test_the_first_line_prints_on_a_freshly_booted_machine(monkeypatch) -> None:
    # time.monotonic() counts from boot on Linux: a machine up for 5 s is below the interval.
    import harness.sim.runs.matrix as matrix

    clock = iter([5.0, 5.1, 5.2, 5.3])
    monkeypatch.setattr(matrix.time, "monotonic", lambda: next(clock))
    log = io.StringIO()
    progress = Progress(3, stream=log, log_interval_s=15)
    progress.add(1000)
    assert log.getvalue().splitlines()[0].split("]")[1].split()[0] == "1/3"

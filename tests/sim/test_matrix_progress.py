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


def test_tasks_advance_many_runs_and_the_line_says_the_time_left(monkeypatch) -> None:
    # The Spark engine reports a task (many runs) at a time; 10 of 40 runs in 5 s: 2 runs/s,
    # so 30 runs left take 15 s.
    import harness.sim.runs.matrix as matrix

    clock = iter([100.0, 105.0, 105.0, 105.0, 105.0])
    monkeypatch.setattr(matrix.time, "monotonic", lambda: next(clock))
    log = io.StringIO()
    progress = Progress(40, stream=log, log_interval_s=15)
    progress.advance(10, 120_000)
    line = log.getvalue().splitlines()[0]
    assert "10/40 runs 2.0 runs/s 24 sim s/wall s ETA 0m15s" in line


def test_eta_in_hours_and_none_at_the_end() -> None:
    from harness.sim.runs.matrix import eta

    assert eta(110_080, 5.0) == " ETA 6h06m"
    assert eta(0, 5.0) == "" and eta(10, 0.0) == ""

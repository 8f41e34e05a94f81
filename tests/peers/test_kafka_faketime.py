"""The control file of a Kafka node's libfaketime clock (harness/peers/kafka/faketime.py): the
line a skew and a rate become, the rate's jump taken out, and the errors that say what is
missing. The JVM reading it is tests/peers/test_z_kafka_clock.py's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.peers.kafka import faketime


def test_a_skew_is_an_offset_in_seconds_with_the_rate_always_written() -> None:
    assert faketime.control_line(1500, 1.0, age_s=123.0) == "+1.500 x1"
    assert faketime.control_line(-250, 1.0, age_s=0.0) == "-0.250 x1"


def test_a_rate_takes_its_jump_over_the_process_age_out_of_the_offset() -> None:
    # libfaketime reads start + OFFSET + RATE x age: at the change the clock must read
    # start + age + skew, so OFFSET = skew - (RATE - 1) x age
    assert faketime.control_line(0, 2.0, age_s=30.0) == "-30.000 x2"
    assert faketime.control_line(0, 0.5, age_s=30.0) == "+15.000 x0.5"
    assert faketime.control_line(1000, 2.0, age_s=4.5) == "-3.500 x2"


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf")])
def test_a_rate_that_is_not_positive_and_finite_is_refused(rate: float) -> None:
    with pytest.raises(faketime.FaketimeError, match="positive and finite"):
        faketime.control_line(0, rate, age_s=1.0)


def test_prepare_resets_the_file_and_names_it_in_the_jvms_environment(tmp_path: Path) -> None:
    faketime.control_file(tmp_path).write_text("+9.000 x3\n")
    env = faketime.prepare(tmp_path)
    assert faketime.control_file(tmp_path).read_text() == "+0.000 x1\n"
    assert env["FAKETIME_TIMESTAMP_FILE"] == str(faketime.control_file(tmp_path))
    assert env["FAKETIME_NO_CACHE"] == "1" and Path(env["LD_PRELOAD"]).exists()
    assert "FAKETIME_DONT_FAKE_MONOTONIC" not in env  # both clocks move (module docstring)


def test_set_clock_writes_the_line_and_needs_a_node_started_with_it(tmp_path: Path) -> None:
    with pytest.raises(faketime.FaketimeError, match="not started with libfaketime"):
        faketime.set_clock(tmp_path, os.getpid(), 1000)
    faketime.prepare(tmp_path)
    assert faketime.set_clock(tmp_path, os.getpid(), 1000) == "+1.000 x1"
    assert faketime.control_file(tmp_path).read_text() == "+1.000 x1\n"
    age = faketime.process_age_s(os.getpid())
    line = faketime.set_clock(tmp_path, os.getpid(), 0, rate=2.0)
    offset = float(line.split()[0])
    assert line.endswith(" x2") and -age - 1.0 <= offset <= -age + 0.001  # this process's age


def test_a_missing_library_says_to_run_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faketime, "LIBRARY_GLOB", "/nonexistent/*/libfaketime.so.1")
    with pytest.raises(faketime.FaketimeError, match=r"run `bash \.ci/install`"):
        faketime.library()

"""Deferred work on an asyncio event loop, written once (serial.py): a callback run once on the
loop's next pass (`Soon`), work items run one at a time without re-entry (`Serial`), one
re-armable deadline (`Timer`, on the loop's clock `LoopTime` or a node's skewable clock), and
one-shot calls (`run_soon`, `run_later`). Each takes `on_error`, what an exception of the
deferred work means: the runtime passes its node's crash. The asyncio runtime (harness/runtime,
harness/net) schedules deferred work only through these; the sans-IO cores and harness/drive
never see them."""

from harness.loop.serial import (
    Cancellable,
    LoopTime,
    OnError,
    Serial,
    Soon,
    Timer,
    TimerClock,
    run_later,
    run_soon,
)

__all__ = [
    "Cancellable",
    "LoopTime",
    "OnError",
    "Serial",
    "Soon",
    "Timer",
    "TimerClock",
    "run_later",
    "run_soon",
]

"""A simulated process's clock: the kernel's time plus an offset the clock nemesis steps
(harness.sim.faults.shapes `clock`, `clock-jump-forward`, `clock-jump-back`), the simulator's
twin of the real node's clock (harness/runtime/clock.py).

The kernel keeps one true time (harness.sim.kernel.events.EventQueue); a process reads
`local(kernel_ms)` and its timer deadlines go back to kernel time through `kernel(deadline_ms)`.

Invariants (the same as the real clock's):
- `local` never goes backwards: after a jump back the reading holds at its highest value until
  the skewed time passes it again (Kafka's `Timer#update` keeps the larger time), so a jump back
  delays every timeout of the process by the jump and a jump forward makes them due at once;
- a deadline the process already considers due maps to the kernel's now, never to the past
  (the queue refuses events in the past);
- the skew is the machine's, not the process's: it survives a crash and a restart.
"""

from __future__ import annotations


class SkewedClock:
    __slots__ = ("held_ms", "kernel_now_ms", "offset_ms")

    def __init__(self) -> None:
        self.offset_ms = 0
        self.held_ms = 0  # the highest local reading given out
        self.kernel_now_ms = 0  # the kernel time of the last reading

    def local(self, kernel_ms: int) -> int:
        """The process's reading at kernel time `kernel_ms`."""
        self.kernel_now_ms = kernel_ms
        self.held_ms = max(self.held_ms, kernel_ms + self.offset_ms)
        return self.held_ms

    def kernel(self, deadline_ms: int | None) -> int | None:
        """The kernel time at which the local clock reaches `deadline_ms`."""
        if deadline_ms is None:
            return None
        if deadline_ms <= self.held_ms:
            return self.kernel_now_ms
        return deadline_ms - self.offset_ms

    def jump(self, delta_ms: int, kernel_ms: int) -> None:
        """Step the clock by `delta_ms` at kernel time `kernel_ms` (negative: back)."""
        self.local(kernel_ms)
        self.offset_ms += delta_ms

"""The device's own clock, the one timing mark of a training step.

On CPU a mark is `time.perf_counter()`. On CUDA a mark is an event recorded on the current
stream; events are only read after a synchronisation (child.timing.resolve_marks, once per
epoch), so timing adds no host-device synchronisation to the step, and read events go back to a pool
(creating and destroying events every step costs host time on launch-bound workloads).
"""

from __future__ import annotations

import time

from .accelerator import Accelerator


class Clock:
    """Marks on the device's clock; a mark is a float (CPU) or a pooled device event."""

    def __init__(self, accel: Accelerator):
        self.accel, self.cuda = accel, accel.is_cuda
        self.pool: list = []
        self.created = 0  # events made so far (the pool bounds it by the marks in flight)

    def mark(self):
        if self.cuda:
            event = self.pool.pop() if self.pool else self._new()
            event.record()
            return event
        return time.perf_counter()

    def _new(self):
        self.created += 1
        return self.accel.event()

    def seconds(self, start, end) -> float:
        """Elapsed seconds between two marks; for CUDA only valid after `synchronize()`."""
        if self.cuda:
            return self.accel.elapsed_s(start, end)
        return end - start

    def synchronize(self) -> None:
        self.accel.synchronize()

    def release(self, marks) -> None:
        """Give read marks back to the pool (after synchronize and seconds)."""
        if self.cuda:
            self.pool.extend({id(m): m for m in marks if m is not None}.values())

"""Phase timing on the device's own clock.

On CPU a mark is `time.perf_counter()`. On CUDA a mark is a CUDA event recorded on the
current stream; events are only read when `resolve()` is called (once per epoch), so timing
adds no host-device synchronisation to the step, and read events go back to a pool (creating
and destroying events every step costs host time on launch-bound workloads).

Marks are contiguous: a step starts at the previous step's end mark, so every second between
an epoch's first and last mark belongs to exactly one phase. On the GPU timeline the gap
between two marks is the time the device spent on that phase, or idled waiting for the host:
`data` on CUDA is the time the GPU was starved by the loader; `data_wait` (host perf_counter
around the loader, on every device) is how long the host itself waited for the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..device import Accelerator
from ..store.cell_result import STEP_PHASES as PHASES


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


@dataclass
class StepMarks:
    """Marks taken during one training step (sync_start is None outside DDP). `start` is the
    previous step's `end`; data_wait is the host's own seconds inside the loader."""

    start: object
    data: object
    h2d: object
    backward_end: object
    end: object
    sync_start: object = None
    data_wait: float = 0.0
    broadcast: tuple | None = None  # zero1: (local step end, optimizer step end) marks


@dataclass
class EpochTimes:
    """Per-step phase seconds of one epoch, resolved from marks."""

    steps: list[dict[str, float]] = field(default_factory=list)

    def total(self, phase: str, skip: int = 0) -> float:
        return sum(s[phase] for s in self.steps[skip:])

    def step_seconds(self, skip: int = 0) -> float:
        return sum(sum(s[p] for p in PHASES) for s in self.steps[skip:])


def resolve(clock: Clock, marks: list[StepMarks]) -> EpochTimes:
    """Turn one epoch's marks into phase seconds (one synchronisation for the whole epoch),
    then recycle the marks.

    compute = forward + backward + optimizer step, minus the exposed sync; sync = time from
    the last gradient bucket becoming ready to the end of backward, i.e. communication the
    step waited for (see `stbench.child.ddp`).
    """
    clock.synchronize()
    out = EpochTimes()
    for m in marks:
        sync = clock.seconds(m.sync_start, m.backward_end) if m.sync_start is not None else 0.0
        sync = max(sync, 0.0)
        if m.broadcast is not None:
            sync += max(clock.seconds(*m.broadcast), 0.0)
        out.steps.append(
            {
                "data": clock.seconds(m.start, m.data),
                "h2d": clock.seconds(m.data, m.h2d),
                "compute": clock.seconds(m.h2d, m.end) - sync,
                "sync": sync,
                "data_wait": m.data_wait,
            }
        )
    clock.release(
        m
        for s in marks
        for m in (s.start, s.data, s.h2d, s.backward_end, s.end, s.sync_start, *(s.broadcast or ()))
    )
    return out

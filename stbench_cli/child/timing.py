"""Phase timing on the device's own clock (device.Clock: a perf_counter on CPU, a pooled CUDA
event on the GPU, read only when `resolve()` is called, once per epoch, so timing adds no
host-device synchronisation to the step).

Marks are contiguous: a step starts at the previous step's end mark, so every second between
an epoch's first and last mark belongs to exactly one phase. On the GPU timeline the gap
between two marks is the time the device spent on that phase, or idled waiting for the host:
`data` on CUDA is the time the GPU was starved by the loader; `data_wait` (host perf_counter
around the loader, on every device) is how long the host itself waited for the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..device import Clock
from ..store.cell_result import STEP_PHASES as PHASES


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


def resolve_marks(clock: Clock, marks: list[StepMarks]) -> EpochTimes:
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

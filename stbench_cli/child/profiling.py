"""`stbench profile`, the child's side: torch.profiler around a short run.

The profiler waits through the warm-up steps and records the steady ones. It leaves, in the
cell's profile folder:
    trace.json     Chrome trace (chrome://tracing, https://ui.perfetto.dev)
    operators.csv  operators by self time on the device (CUDA) or the CPU
    kernels.csv    on CUDA: every kernel, copy and memset of the profiled steps by name, its
                   calls a step and device time (store.trace.kernel_table): the launches a
                   step makes, which the GPU predictions count on a CPU (child/anatomy.py)
    host.csv       per step: its top-level operators on the host's threads, the time inside
                   them and between them (store.trace.host_table): on a GPU, each operator's
                   host path, the cost the GPU predictions charge an operator (plan/predict.py)
    memory.csv     per step: allocator peak above the step's start (from the trace's memory
                   events), and on CUDA the step's max_memory_allocated; RSS at the step's end.
                   (The allocator's peak is reset after every step for that column, so the
                   run's peak_gpu_mb is the most of the steps' and of what followed: `peak_mb`.)
                   On CPU RSS climbs under the profiler (tens of MB a step for stnn's offload
                   at 60x168) while the allocator's total is flat: glibc keeps freed blocks
                   below its mmap threshold, and the profiler's records, allocated between
                   them, keep it from returning them. Unprofiled steps stay flat, and so do
                   profiled ones with MALLOC_MMAP_THRESHOLD_=131072.
"""

from __future__ import annotations

import json
from pathlib import Path

import psutil
from torch.profiler import profile, schedule

from ..device import Accelerator
from ..store.files import write_lines
from ..store.rows import OperatorLine, StepMemory
from ..store.trace import host_table, kernel_table, step_windows

TOP_OPERATORS = 25


class StepProfiler:
    def __init__(self, out: Path, accel: Accelerator, warmup: int, active: int):
        self.out, self.accel = out, accel
        self.out.mkdir(parents=True, exist_ok=True)
        self.steps: list[dict] = []
        self.done = False
        self.step_peak = 0  # bytes: the most any step's max_memory_allocated reached
        self.prof = profile(
            activities=accel.profiler_activities(),
            profile_memory=True,
            record_shapes=True,
            schedule=schedule(
                wait=max(warmup - 1, 0), warmup=min(warmup, 1), active=active, repeat=1
            ),
            on_trace_ready=self._ready,
        )
        self.prof.start()

    def hook(self, step: int) -> None:
        """After each training step."""
        row = {"step": step, "rss_mb": psutil.Process().memory_info().rss / 2**20}
        peak = self.accel.peak_bytes()  # None on CPU: no device allocator
        if peak is not None:
            row["cuda_max_allocated_mb"], self.step_peak = peak / 2**20, max(self.step_peak, peak)
            self.accel.reset_peak()  # the next step's own peak (the run's is kept: peak_mb)
        self.steps.append(row)
        if not self.done:
            self.prof.step()

    def peak_mb(self, after_last_step_mb: float | None) -> float | None:
        """The run's device peak: the most of every step's and of what the trainer measured
        after the last reset (the evaluation), which alone would miss every step but the last."""
        if after_last_step_mb is None:
            return None
        return max(after_last_step_mb, self.step_peak / 2**20)

    def _ready(self, prof) -> None:
        self.done = True
        prof.export_chrome_trace(str(self.out / "trace.json"))
        # the device's time first (0 for every operator on CPU), then the host's
        ops = sorted(
            prof.key_averages(),
            key=lambda e: (e.self_device_time_total, e.self_cpu_time_total),
            reverse=True,
        )
        kept = [e for e in ops if not e.key.startswith("ProfilerStep")][:TOP_OPERATORS]
        if kept:
            write_lines(
                self.out / "operators.csv",
                [
                    OperatorLine(
                        e.key,
                        e.count,
                        e.self_cpu_time_total / 1e3,
                        e.cpu_time_total / 1e3,
                        e.self_device_time_total / 1e3,
                        e.self_cpu_memory_usage / 2**20,
                    )
                    for e in kept
                ],
            )

    def finish(self) -> None:
        if not self.done:
            self.prof.stop()
        trace = self.out / "trace.json"
        events = json.loads(trace.read_text())["traceEvents"] if trace.exists() else []
        peaks = step_memory_peaks(events)
        kernels = kernel_table(events)
        if kernels:  # a GPU's timeline: its launches, kept where the trace is too big to keep
            write_lines(self.out / "kernels.csv", kernels)
        host = host_table(events)
        if host:  # the host's share of each step, kept likewise
            write_lines(self.out / "host.csv", host)
        if self.steps:
            write_lines(
                self.out / "memory.csv",
                [
                    StepMemory(
                        row["step"],
                        row["step"] in peaks,
                        peaks.get(row["step"]),
                        row["rss_mb"],
                        row.get("cuda_max_allocated_mb"),
                    )
                    for row in self.steps
                ],
            )


def step_memory_peaks(events: list[dict]) -> dict[int, float]:
    """Per profiled step (numbered like the trainer's global step): the highest allocator
    total inside the step above its value at the step's start, in MiB, over all devices (a
    trace's events)."""
    steps = step_windows(events)
    memory = sorted(
        (e["ts"], e["args"].get("Device Type", 0), e["args"]["Total Allocated"], e["args"]["Bytes"])
        for e in events
        if e.get("name") == "[memory]"
    )
    out = {}
    for start, end, number in steps:
        inside = [m for m in memory if start <= m[0] <= end]
        peak = 0.0
        for device in {m[1] for m in inside}:
            series = [m for m in inside if m[1] == device]
            base = series[0][2] - series[0][3]  # the total just before the step's first event
            peak = max(peak, max(m[2] for m in series) - base)
        out[number + 1] = peak / 2**20  # ProfilerStep#k runs the trainer's step k+1 (1-based)
    return out

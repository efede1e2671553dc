"""A warm process that measures configurations as short timed windows, one after another.

    python -m stbench.child.windows JOB.json ROWS.jsonl

JOB.json lists the windows in the order they run (each a `RunSpec`: one configuration of one
round; the parent rotates the order from round to round, A B C, C A B, ...), the window's floor
in seconds and in steps, and a deadline (a wall-clock time: no window starts that could not end
before it). Each window becomes one JSON line of ROWS.jsonl the moment it ends, so a process
that crashes or is killed keeps every window it finished.

What a fresh process per measurement paid each time is paid once here: the process (forked warm
from the server of runner/warm.py), CUDA's start, the workload's data and model, the untimed
warm-up pass and any compilation. A configuration's task and trainer are built at its first
window and kept (`Trainer`, the same loop and instrumented step a cell runs); a key of what a
fresh task needs (device, batch, loader workers, compilation, every other parameter) tells when
two configurations can share one. What changes inside a process is applied from scratch before
every window: intra-op threads, torch's fp32 math switches reset to their defaults and then set
(`Accelerator.default_math`, `use_precision`), autocast by the trainer's precision. A window
after one of another configuration then runs untimed steps (the switch's re-warm) before its
timed ones (one after a window of its own configuration, as each round's first is, needs
none), and is timed on the device's own clock from its first step's start mark to its last
step's end mark, with one synchronisation at its end. A configuration whose steps last long
is not re-warmed (plan/pairs.py's `rewarm_steps`: what a switch costs the first step is a few
tenths of a millisecond, not a step's worth).

What cannot change inside a process stays a process per cell (the planner never sends it
here): inter-op threads, core binding, a preloaded allocator, a multi-process world.

A window that raises (out of memory, a failure of the configuration) is a row with its status and
reason; its configuration's trainer is dropped, its later windows in this process are rows that
say so, and the other configurations go on.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

from ..contract import BuildContext, TrainerParams
from ..contract.kept import made_s
from ..device import Accelerator
from ..plan.pairs import rewarm_steps
from ..plan.spec import LIVE_LEVERS, RunSpec, WindowsJob
from ..store.cell_result import STEP_PHASES, Figures
from ..store.conditions import others_cores
from ..store.progress import PARENT_ENV, parent_gone, parent_pid
from . import cpu
from .cell import classify, last_line, leave

LIVE = frozenset(LIVE_LEVERS)
# Untimed steps after a switch (rewarm_steps): the first step after one ran up to 1.12x a steady
# short step (bf16 on cnn-strain and stnn; benchmarks/rewarm.py), the second as steady as any.
# A window after one of the same configuration has no switch to re-warm from: the steady steps
# rewarm.py holds the first against are such windows' steps.
# A configuration or loader made now runs a whole window's worth untimed (its first steps after
# the warm-up pass were measured up to 3x slower than its steady ones).
MAX_CYCLE = 8  # an epoch of at most this many steps is a cycle a window holds whole


def build_key(spec: RunSpec) -> str:
    """What a configuration's task and trainer are made of: two windows with one key share them."""
    fixed = {k: v for k, v in spec.params if k not in LIVE}
    return json.dumps([spec.workload, spec.device, spec.batch_size, fixed], default=str)


class Windows:
    """The process's configurations, built at first use, and its windows run one by one."""

    def __init__(self, job: WindowsJob):
        self.job = job
        self.trainers: dict[str, object] = {}
        self.streams: dict[tuple, object] = {}  # (build key, workers) -> its endless batches
        self.cycles: dict[tuple, int] = {}  # (build key, workers) -> steps a window is made of
        self.accels: dict[str, Accelerator] = {}
        self.failed: dict[str, tuple[str, str]] = {}  # build key -> (status, reason)
        self.ended = time.perf_counter()  # the end of the last window (or the process's start)
        # build key -> its last window's seconds, the switch included
        self.lasted: dict[str, float] = {}
        self.previous: tuple | None = None  # the configuration the last ok window measured
        self.step_s: dict[tuple, float] = {}  # a configuration -> its last window's mean step

    def fits(self, spec: RunSpec, deadline: float) -> bool:
        """Whether the window can end before `deadline` (its configuration's last window as the
        guess; a first window, its floor in seconds, and a compiled one's compilation too)."""
        key = build_key(spec)
        first = self.job.window_s
        if spec.param_dict.get("compile", "none") != "none":
            first += self.job.build_s
        guess = self.lasted.get(key, first)
        return time.time() + guess <= deadline

    def _accel(self, device: str) -> Accelerator:
        if device not in self.accels:
            accel = Accelerator(device)
            accel.select()  # a build without CUDA stops here with its own message
            self.accels[device] = accel
        return self.accels[device]

    def _trainer(self, spec: RunSpec, accel: Accelerator):
        """The configuration's trainer: made at its first window (the workload's task, the
        loaders, the untimed warm-up pass, compilation, the optimizer), kept for the rest."""
        import torch

        from ..plan import registry
        from .trainer import LoopConfig, Trainer

        key = build_key(spec)
        if key not in self.trainers:
            workload = registry.get(spec.workload)
            torch.manual_seed(spec.seed)
            ctx = BuildContext(spec.seed, 0, 1, str(accel.device))
            task = workload.build(spec.param_dict, ctx)
            cfg = LoopConfig.from_spec(spec, workload.target_ratio)
            trainer = Trainer(task, cfg, accel)
            print(f"stbench: built {spec.run_id}'s configuration", file=sys.stderr, flush=True)
            self.trainers[key] = trainer
        return self.trainers[key]

    def _stream(self, key: str, trainer, spec: RunSpec, workers: int, accel: Accelerator):
        """The configuration's batches, endless, epoch after epoch (the trainer's own loader, or
        one of `workers` processes over the same data: made at first use, then kept, its workers
        alive between windows), and the steps of a cycle a window holds whole."""
        from .loader import build_loaders, epochs

        built = trainer.cfg.knobs.workers  # its own loaders' (0 where the data is on the device)
        if trainer.task.data.placement == "device":
            workers = built  # batches sliced where the data lives: no workers
        if (key, workers) not in self.streams:
            sampler, loader = trainer.sampler, trainer.train_loader
            if workers != built:
                knobs = replace(trainer.cfg.knobs, workers=workers)
                data = trainer.task.data
                sampler, loader, _ = build_loaders(
                    data.train, data.val, data, knobs, spec.batch_size, spec.seed, accel, 0, 1
                )
            per_epoch = min(len(loader), trainer.cfg.knobs.max_steps or len(loader))
            self.streams[(key, workers)] = (b for _, b in epochs(sampler, loader, per_epoch))
            # an epoch of a few steps (stnn's two passes cut in proportion by max_steps) is a
            # cycle: a window spans whole ones, so that every window holds the same mix of steps
            self.cycles[(key, workers)] = per_epoch if per_epoch <= MAX_CYCLE else 1
        return self.streams[(key, workers)], self.cycles[(key, workers)]

    def run(self, spec: RunSpec) -> dict:
        """One window: the configuration applied, re-warmed, timed. Its row as a dict."""
        key = build_key(spec)
        self.previous, before = None, self.previous  # set again by a window that ends ok
        if key in self.failed:
            status, reason = self.failed[key]
            return self._row(spec, status, f"{reason} (in an earlier window of this process)")
        try:
            return self._window(spec, key, switched=before != _configuration(spec))
        except Exception as exc:  # the configuration's failure is its rows; the others go on
            traceback.print_exc()
            status, reason = classify(exc), last_line(exc)
            self.failed[key] = (status, reason)
        # out of the handler, where the exception and its frames (and the tensors they hold)
        # are gone: the configuration's trainer and loaders go too, and their memory with them
        self.trainers.pop(key, None)
        for stream in [k for k in self.streams if k[0] == key]:
            del self.streams[stream], self.cycles[stream]
        gc.collect()
        for accel in self.accels.values():
            accel.release_cached()
        return self._row(spec, status, reason)

    def _apply(self, spec: RunSpec, accel: Accelerator):
        """Everything a window sets, from scratch: threads, fp32 math, autocast (the trainer's
        precision)."""
        import torch

        knobs = TrainerParams.from_params(spec.param_dict)
        choice = cpu.thread_choice(knobs, 1)
        torch.set_num_threads(choice.threads)
        accel.default_math()
        return choice, accel.use_precision(knobs.precision), knobs

    def _window(self, spec: RunSpec, key: str, switched: bool) -> dict:
        import torch

        from .timing import resolve_marks

        accel = self._accel(spec.device)
        choice, math, knobs = self._apply(spec, accel)
        built = key not in self.trainers
        trainer = self._trainer(spec, accel)
        trainer.cfg = replace(
            trainer.cfg, knobs=replace(trainer.cfg.knobs, precision=knobs.precision)
        )
        streams = len(self.streams)
        batches, cycle = self._stream(key, trainer, spec, knobs.workers, accel)
        built = built or len(self.streams) > streams  # a new loader: its first batch, untimed
        clock = trainer.clock
        loss_sum = torch.zeros((), device=trainer.device)
        warm, start, t0 = [], clock.mark(), time.perf_counter()
        floor = self.job.window_s if built else 0.0
        rewarm = rewarm_steps(self.step_s.get(_configuration(spec))) * switched + int(built)
        while len(warm) < rewarm or time.perf_counter() - t0 < floor:
            warm.append(trainer._step(batches, start, loss_sum))  # untimed: the re-warm
            start = warm[-1].end
        resolve_marks(clock, warm)  # waits for the re-warm's steps; their marks go back to the pool
        if not warm:
            clock.release([start])  # the mark a re-warm would have begun from
        loss_sum.zero_()
        cpu_before = cpu_seconds()
        began = time.perf_counter()
        untimed = began - self.ended
        marks, start = [], clock.mark()
        while True:
            marks.append(trainer._step(batches, start, loss_sum))
            start = marks[-1].end
            elapsed = time.perf_counter() - began
            enough = len(marks) >= self.job.min_steps and elapsed >= self.job.window_s
            if enough and len(marks) % cycle == 0:
                break
        times = resolve_marks(clock, marks)  # the window's one synchronisation point
        # what other processes kept busy while it was timed (a cell's samples say it of a cell)
        (machine0, own0), (machine1, own1) = cpu_before, cpu_seconds()
        others = others_cores(machine0, machine1, own0, own1, time.perf_counter() - began)
        seconds = times.step_seconds()
        self.lasted[key] = time.perf_counter() - began + untimed
        self.previous = _configuration(spec)
        self.step_s[self.previous] = seconds / len(marks)
        self.ended = time.perf_counter()
        samples = len(marks) * spec.batch_size
        fps = trainer.flops_per_sample
        figures = Figures(
            wall_s=self.ended - began,
            train_s=seconds,
            samples_per_s=samples / seconds if seconds > 0 else None,
            steps_per_s=len(marks) / seconds if seconds > 0 else None,
            warmup_steps=len(warm),
            steps_done=len(marks),
            **{f"{p}_s": times.total(p) for p in STEP_PHASES},
            data_wait_s=times.total("data_wait"),
            final_train_loss=float(loss_sum.item()) / len(marks),
            flops_per_sample=fps,
            achieved_gflops=fps * samples / seconds / 1e9 if fps and seconds > 0 else None,
            device_name=accel.name(),
            threads=torch.get_num_threads(),
            precision=math.text,
            matmul_math=math.matmul,
            conv_math=math.conv,
            data_source=trainer.task.data.source,
            **choice.row(),
            interop_threads=torch.get_num_interop_threads(),
        )
        return self._row(spec, "ok", "", figures, untimed, others)

    def _row(self, spec, status, reason, figures=None, untimed=None, others=None) -> dict:
        if figures is None:
            self.ended = time.perf_counter()
        return {
            "run_id": spec.run_id,
            "status": status,
            "reason": reason,
            "figures": asdict(figures or Figures()),
            "untimed_s": untimed,
            "pid": os.getpid(),
            "made_s": made_s(),  # data sets made and kept so far: a later process reads them
            "others_cores": others,  # other processes' cores in use while the window was timed
        }


def cpu_seconds() -> tuple:
    """(the machine's psutil.cpu_times(), the CPU seconds of the study's own processes: this
    one, its children (its loader workers, and those it has waited for), and the parent that
    reads its rows as windows end), for store.conditions.others_cores. The parent's work
    overlaps the next window; counted as another process's, it marked two of a quiet tune's 60
    windows contended (0.30 and 0.32 of a core, the slack 0.25)."""
    import psutil

    me = psutil.Process()
    own = me.cpu_times()
    mine = own.user + own.system + own.children_user + own.children_system
    parent = parent_pid(os.environ.get(PARENT_ENV, ""))
    for pid in [c.pid for c in me.children(recursive=True)] + ([parent] if parent else []):
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:  # ended between the listing and the reading
            continue
        mine += times.user + times.system
    return psutil.cpu_times(), mine


def _configuration(spec: RunSpec) -> tuple:
    """What a window measures, its round aside: two windows alike in it need no switch."""
    return (spec.workload, spec.device, spec.batch_size, spec.params)


def main(argv: list[str]) -> int:
    job = WindowsJob.from_json(Path(argv[0]).read_text())
    out = Path(argv[1])
    windows = Windows(job)
    parent = os.environ.get(PARENT_ENV, "")
    with out.open("a") as rows:
        for spec in job.windows:
            if not windows.fits(spec, job.deadline):
                print(f"stbench: window {spec.run_id} would end past the deadline", file=sys.stderr)
                break
            if parent and parent_gone(parent):  # killed outright: no one reads these rows
                print(f"stbench: the parent ({parent}) is gone; ending", file=sys.stderr)
                break
            print(f"stbench: window {spec.run_id}", file=sys.stderr, flush=True)
            rows.write(json.dumps(windows.run(spec), default=float) + "\n")
            rows.flush()
    return 0


if __name__ == "__main__":
    leave(main(sys.argv[1:]))

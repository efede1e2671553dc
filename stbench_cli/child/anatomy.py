"""What a training step is made of, measured on this CPU, for a prediction of a GPU's step
(plan/predict.py): `python -m stbench.child.anatomy JOB.json OUT.json`, JOB naming a workload,
its parameters and two small batches; OUT gets one `Anatomy` as JSON.

One step is the trainer's: zero_grad, the workload's loss forward and backward, its gradient
clip, the optimizer's step. At two small batches (b1 < b2) it counts:

- **kernels a GPU would launch**: torch's operators as the dispatcher runs them (a
  TorchDispatchMode under autograd, so backward's operators count too), less those that launch
  nothing on a GPU (views, `empty`, `detach`: metadata only). The optimizer steps with
  `foreach` on, as it does by default on CUDA, and a foreach operator over n tensors counts
  ceil(n / 110) launches: 110 is the most tensors CUDA's multi_tensor_apply packs into one
  launch, so the count never exceeds the GPU's. A cuDNN or fused operator that launches
  several kernels counts once, a recurrent layer too (one oneDNN operator on the CPU; on the
  H200 cuDNN ran each LSTM layer's whole sequence in one persistent kernel, where its standard
  algorithm would launch a few a timestep): the count is a floor of the GPU's launches;
- **bytes**: the parameters, their gradients and the optimizer's state after the step (state
  bytes), the activations autograd saved for backward (each storage once, by
  saved_tensors_hooks), and the batch itself (inputs and targets: what crosses the host link
  each step when the data lives in host memory); the saved bytes and the batch's are linear in
  the batch (per sample and fixed parts, from the two batches); and **the most tensor bytes
  alive at once** in a step (what a GPU's caching allocator must hold at the step's peak, less
  its rounding): every storage an operator makes is counted from its making to its freeing
  (`_LiveBytes`), after each operator; the same operator's count at the two batches gives a
  line in the batch, and the lines' upper envelope gives the peak at any batch (the peak moves:
  at a small batch the optimizer's step may set it, at a large one the activations), on top of
  what the step holds before it (parameters, optimizer state, the data a workload keeps on the
  device) and its batch. A sparse tensor's storages are not counted (stnn's sparse relations:
  it predicts its memory itself);
- **the host's own time of a step**: what the step's own thread does between the operators it
  dispatches (Python, the optimizer's loop, autograd's engine between backward's nodes), the
  part of a step a GPU does not speed up, at b1 on one thread: torch's profiler (its CPU
  events, recorded in C++) times each top-level operator or region, and the gaps between them,
  each less the step's least gap (the profiler's own cost of an event, and the least work
  there is between two operators), add up to it; the median of HOST_STEPS steps, under the
  allocator policy the study's cells run with (`allocator=keep`: glibc's thresholds fixed,
  child/allocator.py). What runs inside an operator above its kernel (autograd's recording,
  the dispatcher) is not in it: the prediction's per-operator cost stands for that. It was a
  step's time less the time inside its operators, a difference of two timings: noise wherever
  kernels fill the step (dcrnn-pems 0 to 20 ms, stnn 0 to 0.14: benchmarks/host_time_spread.py);
  a dispatch mode timing the gaps itself counted its own way in and out of each operator too
  (15-37 us an operator here, where the profiler's gaps come to 4-13).

Where a workload's own sampler names kinds of batches whose steps differ (stnn's decoder and
dynamics passes), each figure is the mean over an epoch's steps, each kind weighted by its
batches an epoch.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import weakref
from dataclasses import asdict
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..plan.predict import Anatomy, upper_envelope

# operators that launch no kernel on a GPU: they make or describe a tensor, move no data
NO_KERNEL = frozenset(
    {
        "empty",
        "empty_strided",
        "empty_like",
        "detach",
        "alias",
        "lift_fresh",
        "set_",
        "resize_",
        "_record_function_enter_new",
        "_record_function_exit",
    }
)
FOREACH_TENSORS = 110  # the most tensors CUDA's multi_tensor_apply takes in one launch
HOST_STEPS = 7  # steps timed for the host's own time (after two untimed)


class _Launches(TorchDispatchMode):
    """Counts a step's operators and the launches they make."""

    def __init__(self):
        super().__init__()
        self.launches, self.operators = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if func.is_view or name in NO_KERNEL:
            return out
        self.operators += 1
        if name.startswith("_foreach") and isinstance(args[0], list | tuple):
            self.launches += math.ceil(len(args[0]) / FOREACH_TENSORS)
        else:
            self.launches += 1
        return out


class _LiveBytes(TorchDispatchMode):
    """The bytes of the tensor storages made inside it that are alive, after each operator
    (`trace`): a storage counts once from its making (a view or an in-place result shares it)
    until Python frees it (a weak reference's callback)."""

    def __init__(self):
        super().__init__()
        self.live, self.trace, self._seen = 0, [], set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                self._count(t.untyped_storage())
        self.trace.append(self.live)
        return out

    def _count(self, storage) -> None:
        key, size = storage.data_ptr(), storage.nbytes()
        if size == 0 or key in self._seen:
            return
        self._seen.add(key)
        self.live += size
        weakref.finalize(storage, self._free, key, size)

    def _free(self, key: int, size: int) -> None:
        self._seen.discard(key)
        self.live -= size


def _peak_lines(small: list[int], large: list[int], b1: int, b2: int) -> list[tuple]:
    """Lines (fixed, per sample) of a step's live bytes, an operator's each, from its traces at
    batches b1 < b2; where the two ran different operators, one line through their peaks."""
    if len(small) != len(large) or not small:
        small, large = [max(small, default=0)], [max(large, default=0)]
    lines = []
    for at1, at2 in zip(small, large):
        per = (at2 - at1) / (b2 - b1)
        lines.append((at1 - per * b1, per))
    return lines


def _kinds(task, batch: int, max_steps: int) -> list[tuple[float, tuple]]:
    """(share of an epoch's steps, a batch) of each kind of batch an epoch holds: one, or each
    pass a workload's own sampler names (stnn's decoder and dynamics batches, whose steps
    differ), weighted by its batches an epoch."""
    data = task.data.train
    if task.data.batch_sampler is None:
        return [(1.0, torch.utils.data.default_collate([data[i] for i in range(batch)]))]
    sampler = task.data.batch_sampler(batch, 0, max_steps)
    kinds = getattr(sampler, "first_of_each_pass", None)
    if kinds is None:  # the workload batches itself (index batching): its first batch
        return [(1.0, data[torch.arange(batch)])]
    found = kinds()
    counts = [c for c in getattr(sampler, "batches", []) if c] or [1] * len(found)
    if len(counts) != len(found):
        counts = [1] * len(found)
    return [(c / sum(counts), data[idx]) for c, idx in zip(counts, found)]


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


def _stepper(task, optimizer):
    module = task.model.module

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        task.model.loss(module, x, y, 0).backward()
        if task.optim.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(module.parameters(), task.optim.clip_grad_norm)
        optimizer.step()

    return step


def _instrumented(step, x, y) -> tuple[_Launches, int, list[int]]:
    """One step, counted three ways at once: its operators and launches (`_Launches`), the bytes
    of the activations autograd saves for backward (each storage once), and the bytes its own
    tensors hold after each operator (`_LiveBytes`: its gradients among them, zero_grad having
    freed the last step's)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        try:
            key = t.untyped_storage().data_ptr()
            seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        except (RuntimeError, NotImplementedError):  # a sparse tensor has no plain storage
            seen[id(t)] = _nbytes(t.values() if t.is_sparse else t)
        return t

    launches, live = _Launches(), _LiveBytes()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), launches, live:
        step(x, y)
    return launches, sum(seen.values()), live.trace


def _host_s(step, x, y) -> float:
    """A step's own host time: the gaps between its top-level operators and regions in torch's
    profiler, each less the least, summed; the median of HOST_STEPS steps after two untimed."""
    from torch.profiler import profile

    from ..device import Accelerator

    activities = Accelerator("cpu").profiler_activities()  # the host's operators
    step(x, y)
    step(x, y)
    figures = []
    for _ in range(HOST_STEPS):
        with profile(activities=activities) as traced:
            step(x, y)
        figures.append(_gaps_s(traced.profiler.kineto_results.events()))
    return statistics.median(figures)


def _gaps_s(events) -> float:
    """Seconds between the top-level ones of a profile's host events (store.trace.top_level),
    each gap less the least. Read from the raw events: torch's own tree of them (`events()`)
    took longer to build than the steps it describes (dcrnn-pems: 1.5 s a step)."""
    from ..store.trace import top_level

    top = top_level([(e.start_ns(), e.end_ns()) for e in events if e.device_type().name == "CPU"])
    gaps = [later[0] - last[1] for last, later in zip(top, top[1:])]
    least = min(gaps, default=0)
    return sum(g - least for g in gaps) * 1e-9


def measure(workload: str, params: dict, batches: tuple[int, int]) -> Anatomy:
    from ..contract import BuildContext
    from ..plan.registry import get
    from .allocator import keep_freed_memory

    # the heap policy the study's cells run with, before the workload allocates: under glibc's
    # moving thresholds the host's own time of stnn's dense 30x84 step came out 0.01 to 5.2 ms
    # from one process to the next (freed blocks unmapped in Python's time, or kept), and a
    # bound built on 5.2 ms exceeded the step the H100 measured
    if params.get("allocator", "keep") == "keep":
        keep_freed_memory()
    torch.manual_seed(0)
    task = get(workload).build(params, BuildContext(0, 0, 1, "cpu"))
    optimizer = (task.optim.factory or torch.optim.Adam)(task.model.module.parameters(), lr=1e-4)
    for group in optimizer.param_groups:
        group["foreach"] = True  # CUDA's default: few launches for the whole model
    step = _stepper(task, optimizer)
    max_steps = int(params.get("max_steps", 0) or 0)
    launches, operators, saved, sizes = [], [], [], []
    traces: list[list[list[int]]] = []  # each batch's live bytes, each kind's trace
    for b in batches:
        kinds = _kinds(task, b, max_steps)
        for _, (x, y) in kinds:
            step(x, y)  # optimizer state exists, first-use paths taken
        counted = [_instrumented(step, x, y) for _, (x, y) in kinds]
        launches.append(sum(w * c.launches for (w, _), (c, _, _) in zip(kinds, counted)))
        operators.append(sum(w * c.operators for (w, _), (c, _, _) in zip(kinds, counted)))
        saved.append(sum(w * bytes_ for (w, _), (_, bytes_, _) in zip(kinds, counted)))
        sizes.append(sum(w * (_nbytes(x) + _nbytes(y)) for w, (x, y) in kinds))
        traces.append([trace for _, _, trace in counted])
    state = sum(p.numel() * p.element_size() for p in task.model.module.parameters())
    state += sum(
        _nbytes(p.grad) for p in task.model.module.parameters() if p.grad is not None
    ) + sum(_nbytes(s) for s in optimizer.state.values())
    optimizer.zero_grad(set_to_none=True)  # what a step holds before it: no gradients yet
    resident = _nbytes([p for p in task.model.module.parameters()]) + _nbytes(
        list(optimizer.state.values())
    )
    if task.data.placement == "device":  # the dataset moves to the GPU whole
        resident += (task.data.mb or 0.0) * 2**20
    b1, b2 = batches
    lines = [line for small, large in zip(*traces) for line in _peak_lines(small, large, b1, b2)]
    torch.set_num_threads(1)
    host = 0.0
    for weight, (x, y) in _kinds(task, batches[0], max_steps):
        host += weight * _host_s(step, x, y)
    per_saved = (saved[1] - saved[0]) / (b2 - b1)
    per_batch = (sizes[1] - sizes[0]) / (b2 - b1)
    return Anatomy(
        workload,
        (b1, b2),
        max(launches),
        max(operators),
        float(state),
        saved[0] - per_saved * b1,
        per_saved,
        sizes[0] - per_batch * b1,
        per_batch,
        host,
        task.flops_per_sample,
        task.data.placement != "device",
        upper_envelope(lines, b1),
        float(resident),
    )


def main(job: Path, out: Path) -> None:
    asked = json.loads(job.read_text())
    found = measure(asked["workload"], asked["params"], tuple(asked["batches"]))
    out.write_text(json.dumps(asdict(found)))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))

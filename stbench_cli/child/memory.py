"""Where a rank's training memory goes: parameters, gradients and optimizer state counted from
the tensors this rank holds (a sharded tensor counts its local shard), and the peak of one
training step's forward and backward above the step's start, less the gradients the step
creates: the activation memory (on CUDA from the caching allocator's statistics; on CPU from
the profiler's memory events)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from ..device import Accelerator


def tensor_bytes(t: torch.Tensor) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t  # DTensor: this rank's shard
    return local.numel() * local.element_size()


def param_bytes(model: torch.nn.Module) -> int:
    return sum(tensor_bytes(p) for p in model.parameters())


def grad_bytes(model: torch.nn.Module) -> int:
    return sum(tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    return sum(
        tensor_bytes(v)
        for state in optimizer.state.values()
        for v in state.values()
        if torch.is_tensor(v)
    )


def _peak_above_start(trace: Path) -> float:
    """Highest CPU allocator total in a trace above its value before the first event, bytes."""
    events = sorted(
        (e["ts"], e["args"]["Total Allocated"], e["args"]["Bytes"])
        for e in json.loads(trace.read_text())["traceEvents"]
        if e.get("name") == "[memory]" and e["args"].get("Device Type", 0) == 0
    )
    if not events:
        return 0.0
    base = events[0][1] - events[0][2]
    return max(total for _, total, _ in events) - base


def activation_peak(step, model: torch.nn.Module, accel: Accelerator) -> tuple[float, str]:
    """(MiB, how it was measured) for `step()`, one forward + backward with no gradients held
    at its start. (It resets the device's peak: read the training peak before.)"""
    peak, source = accel.peak_during(step), "cuda allocator"
    if peak is None:  # no device allocator counts a peak (CPU): the profiler's memory events
        from torch.profiler import profile

        with profile(activities=accel.profiler_activities(), profile_memory=True) as prof:
            step()
        with tempfile.TemporaryDirectory() as tmp:
            prof.export_chrome_trace(str(Path(tmp) / "trace.json"))
            peak = _peak_above_start(Path(tmp) / "trace.json")
        source = "profiler memory events"
    return max(peak - grad_bytes(model), 0) / 2**20, source


def held_figures(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, accel: Accelerator, step=None
) -> dict:
    """A rank's memory figures after training, the max over ranks: parameters, gradients and
    optimizer state it holds (counted from the tensors), and with `step` (one more forward +
    backward) that step's activation peak."""
    from . import ddp

    held = [param_bytes(model), grad_bytes(model), optimizer_state_bytes(optimizer)]
    activation, source = 0.0, None
    if step is not None:
        # every gradient, whatever share of them a zero1 optimizer holds
        model.zero_grad(set_to_none=True)
        activation, source = activation_peak(step, model, accel)
        model.zero_grad(set_to_none=True)
    params, grads, state, activation = ddp.reduce(
        [v / 2**20 for v in held] + [activation], accel.torch
    )
    return dict(
        param_mb=params,
        grad_mb=grads,
        optim_state_mb=state,
        activation_peak_mb=activation if source else None,
        activation_source=source,
    )

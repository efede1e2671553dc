"""Data-parallel strategies, applied in one documented order (as torchtitan applies its
parallelisms), each a small function:

    1. activation checkpointing   the workload's own `checkpoint` parameter, applied when it
                                  builds its model (stbench.contract.checkpoint)
    2. placement                  the model moves to the cell's device
    3. data parallelism           ddp, zero1: DistributedDataParallel with the sync probe (ddp.py);
                                  fsdp: FSDP2 `fully_shard` on every child module that holds
                                  parameters, then on the root (parameters, gradients and
                                  optimizer state sharded over the ranks)
    4. compilation                the `compile` parameter: torch.compile of the parallelized model;
                                  its first forward + backward (which compiles) runs here and is
                                  timed as compile_s, so compiling never falls in a timed step
                                  (the first evaluation compiles the eval graph: in eval_s). A model
                                  that cannot compile runs eager, with the reason in the manifest
    5. the optimizer              zero1: ZeroRedundancyOptimizer shards its state over the ranks
                                  (by whole tensors: a model dominated by one tensor cannot be
                                  split evenly); ddp, fsdp: the workload's optimizer (under fsdp
                                  it only ever sees this rank's shards)

fsdp's all-gathers and reduce-scatters run inside forward and backward: its sync_s is not
separated (0) and its communication is part of compute. zero1's post-step parameter broadcast
is sync (ddp.SyncProbe.local_step_end marks where its local step ends).
"""

from __future__ import annotations

import functools
import math
import time

import torch

from ..contract import TrainerParams
from ..device import Accelerator
from . import ddp


def apply_fsdp(model: torch.nn.Module, accel: Accelerator, world_size: int) -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(accel.device.kind, (world_size,))
    for unit in _units(model):
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules fsdp shards one by one: each child that holds parameters; a container
    (ModuleList, ModuleDict: no forward of its own) contributes its children instead."""
    out = []
    for child in model.children():
        if not any(p.requires_grad for p in child.parameters()):
            continue
        if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            out += [m for m in child.children() if any(p.requires_grad for p in m.parameters())]
        else:
            out.append(child)
    return out


def parallelize(
    strategy: str,
    model: torch.nn.Module,
    accel: Accelerator,
    world_size: int,
    probe: ddp.SyncProbe,
    bucket_cap_mb: float = 25.0,
    log_every: int = 100,
    backend: str = "auto",
) -> torch.nn.Module:
    """Step 3: the model as this strategy trains it (placed on the device already); `backend`:
    the cell's, whose gradient all-reduce DDP's comm hook runs (mpi4py: MPI's)."""
    # a world of one (torchrun starts no process group): nothing to sync or shard
    if world_size == 1:
        return model
    if strategy == "fsdp":
        return apply_fsdp(model, accel, world_size)
    return ddp.wrap(model, accel, probe, bucket_cap_mb, log_every, backend)


def apply_compile(model: torch.nn.Module, mode: str, one_pass, accel: Accelerator) -> tuple:
    """Step 4: (the model to train, compile seconds or None, why compiling failed or "")."""
    if mode == "none":
        return model, None, ""
    compiled = torch.compile(model, mode=None if mode == "default" else mode)
    accel.synchronize()
    t0 = time.perf_counter()
    try:
        one_pass(compiled)
    except Exception as exc:  # an unsupported operator or backend: train eager, say why
        model.zero_grad(set_to_none=True)
        message = " ".join(str(exc).split())[:200]
        return (
            model,
            None,
            f"torch.compile(mode={mode}) failed, the cell ran eager: "
            f"{type(exc).__name__}: {message}",
        )
    model.zero_grad(set_to_none=True)
    accel.synchronize()
    return compiled, time.perf_counter() - t0, ""


def make_optimizer(
    strategy: str, factory, params, lr: float, probe: ddp.SyncProbe | None = None
) -> torch.optim.Optimizer:
    """Step 5: the workload's optimizer (factory: a class or a functools.partial of one). zero1's
    local step end is marked on `probe`, so that its parameter broadcast counts as sync."""
    factory = factory or torch.optim.Adam
    if strategy != "zero1":
        return factory(params, lr=lr)
    from torch.distributed.optim import ZeroRedundancyOptimizer

    cls, kwargs = (
        (factory.func, dict(factory.keywords))
        if isinstance(factory, functools.partial)
        else (factory, {})
    )
    zero = ZeroRedundancyOptimizer(params, optimizer_class=cls, lr=lr, **kwargs)
    if probe is not None:
        zero.optim.register_step_post_hook(probe.local_step_end)
    return zero


def local_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer whose state this rank holds (zero1 keeps its shard in `.optim`)."""
    return getattr(optimizer, "optim", optimizer)


def scaled_lr(knobs: TrainerParams, batch_size: int, world_size: int) -> float:
    """The learning rate for a global batch of batch_size x world_size: `lr` is meant for
    lr_base_batch (default: one process's batch), scaled by the ratio (linear) or its root."""
    ratio = batch_size * world_size / (knobs.lr_base_batch or batch_size)
    return knobs.lr * {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[knobs.lr_scaling]


def warm_up(
    loss_of, model: torch.nn.Module, batches: list, samples: int, count: bool
) -> float | None:
    """An untimed forward + backward of each batch before the clock starts: the loader's first
    and one of each other kind the workload's sampler names (loader.compile_batches; stnn's
    dynamics pass, with its offload buffers and copy stream, would otherwise first run inside a
    timed step, its first batch coming after every decoder batch). Library initialisation
    (cuDNN, cuBLAS handles, lazy kernel loading) happens here, not in epoch 1. With `count`,
    torch's operator counter gives the first batch's FLOPs per sample (dense matrix products,
    not sparse ones)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = (
        FlopCounterMode(display=False, custom_mapping=_dense_products_only()) if count else None
    )
    if counter:
        with counter:
            loss_of(batches[0]).backward()
    else:
        loss_of(batches[0]).backward()
    for batch in batches[1:]:
        loss_of(batch).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / samples if counter else None


def _dense_products_only() -> dict:
    """torch's counter's matrix-product formulas, giving 0 where an operand is sparse: they read
    only shapes, so a sparse CSR support (PeMS-BAY: 2.5% of its pairs) would count as its dense
    product, 40x the work (dcrnn-pems' FLOPs went from 3.9 M to 253 M per sample that way)."""
    from torch.utils.flop_counter import flop_registry

    def zero_if_sparse(formula):
        def count(*args, out_val=None, **kwargs):
            if any(isinstance(a, torch.Tensor) and a.layout != torch.strided for a in args):
                return 0
            return formula(*args, out_val=out_val, **kwargs)

        count._get_raw = True  # the counter hands it the tensors, not their shapes
        return count

    aten = torch.ops.aten
    return {
        op: zero_if_sparse(flop_registry[op])
        for op in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm)
    }

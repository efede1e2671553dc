"""A test-only workload that fails on demand, registered by an entry point (see conftest.py).

It exercises the engine's real failure paths (child exceptions, allocator failures, hangs)
without making a real workload misbehave on purpose. The faults of a world happen on its last
rank (the last node's), at training step FAULT_STEP, and once per cache folder, as a lost node
does not come back with the cell's next run (a resume then completes the study):

    exit    the rank calls os._exit(1) mid-step
    stuck   the rank blocks in a collective no other rank joins (a recv from rank 0), so rank 0
            blocks in the step's gradient all-reduce
    abort   the rank aborts (SIGABRT) at exit, after its training ended and it left the world (its
            process ends by os._exit, child/cell.py: here that call aborts, as a native thread
            crashing the interpreter's exit did)
    lost    the rank's node loses its torchrun agent (SIGKILL) mid-training; the rank, orphaned,
            trains on (2 s a step, so that its world is still training when it is ended); under
            --launcher dask the rank's Dask worker is killed (its nanny starts another)
"""

import os
import signal
import time

from stbench.contract import BuildContext, Data, Metric, Model, Param, Supervised, Task, Workload

FAULT_STEP = 3  # of 6 steps per epoch in a world of two (12 alone)
ONCE = ("exit", "stuck", "abort", "lost")


def _once(fault: str, ctx: BuildContext) -> bool:
    """True the first time this fault comes to this seed's cell in this cache folder."""
    mark = ctx.cache_dir / f"faulty-{fault}-{ctx.seed}.done"
    if mark.exists():
        return False
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.touch()
    return True


def _stuck() -> None:
    import torch
    import torch.distributed as dist

    dist.recv(torch.zeros(1), src=0)  # rank 0 never sends: blocked until the world is killed


def _lose_node() -> None:
    # the parent is this node's torchrun agent, or the Dask worker whose task started the rank
    if "TORCHELASTIC_RUN_ID" in os.environ or "DASK_SCHEDULER_ADDRESS" in os.environ:
        os.kill(os.getppid(), signal.SIGKILL)


def _loss(fault: str, ctx: BuildContext):
    import torch

    faulty = fault in ONCE and ctx.rank == ctx.world_size - 1 and _once(fault, ctx)
    if faulty and fault == "abort":
        os._exit = lambda code: os.abort()  # noqa: ARG005 (the cell's very last call)
    act = {"exit": lambda: os._exit(1), "stuck": _stuck, "lost": _lose_node}.get(fault)

    def loss(module, x, y, step: int):
        if faulty and act and step == FAULT_STEP:
            time.sleep(1.0)  # a real step's length: its beat (within 0.5 s) says where it is
            act()
        if faulty and fault == "lost" and step > FAULT_STEP:
            time.sleep(2.0)  # the orphan trains on, slowly: the parent ends its world mid-training
        return torch.nn.functional.mse_loss(module(x), y)

    return loss


def build(params: dict, ctx: BuildContext) -> Task:
    import torch
    from torch.utils.data import TensorDataset

    if params["fault"] == "raise":
        raise RuntimeError("injected failure in build")
    if params["fault"] == "oom":
        torch.empty(2**50, dtype=torch.uint8)  # the CPU allocator refuses this
    if params["fault"] == "hang":
        time.sleep(3600)
    g = torch.Generator().manual_seed(ctx.seed)
    x = torch.randn(256, 4, generator=g)
    y = x @ torch.tensor([[1.0], [2.0], [-1.0], [0.5]])
    torch.manual_seed(ctx.seed)
    loss = (
        _loss(params["fault"], ctx)
        if params["fault"] in ONCE
        else Supervised(torch.nn.functional.mse_loss)
    )
    return Task(
        data=Data(
            TensorDataset(x[:192], y[:192]),
            TensorDataset(x[192:], y[192:]),
            source="generated",
            mb=0.0,
        ),
        model=Model(torch.nn.Linear(4, 1), loss),
        metric=Metric("val_mse", sum=lambda p, t: ((p - t) ** 2).sum(), naive=float(y[192:].var())),
    )


WORKLOAD = Workload(
    name="faulty",
    summary="linear regression that can raise, run out of memory, hang, or lose a rank or a node",
    params=(
        Param("fault", str, "none", "what goes wrong", ("none", "raise", "oom", "hang", *ONCE)),
    ),
    presets={"default": {"batch_size": 16, "epochs": 1}, "smoke": {}},
    build=build,
    target_ratio=0.5,
    target_note="val MSE at half the validation variance",
)

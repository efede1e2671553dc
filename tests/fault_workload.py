"""A test-only workload that fails on demand, registered through STBENCH_WORKLOADS.

It exercises the engine's real failure paths (child exceptions, allocator failures, hangs)
without making a real workload misbehave on purpose.
"""

import time

from workloads.base import Param, Workload

WORKLOAD = Workload(
    name="faulty",
    summary="linear regression that can raise, run out of memory or hang",
    params=(Param("fault", str, "none", "what goes wrong", ("none", "raise", "oom", "hang")),),
    presets={"default": {"batch_size": 16, "epochs": 1}, "smoke": {}},
    builder="fault_workload:build",
)


def build(params, seed, rank=0, world_size=1):
    import torch
    from torch.utils.data import TensorDataset

    from workloads.task import Task

    if params["fault"] == "raise":
        raise RuntimeError("injected failure in build")
    if params["fault"] == "oom":
        torch.empty(2**50, dtype=torch.uint8)  # the CPU allocator refuses this
    if params["fault"] == "hang":
        time.sleep(3600)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 4, generator=g)
    y = x @ torch.tensor([[1.0], [2.0], [-1.0], [0.5]])
    torch.manual_seed(seed)
    return Task(train=TensorDataset(x[:192], y[:192]), val=TensorDataset(x[192:], y[192:]),
                model=torch.nn.Linear(4, 1), loss_fn=torch.nn.functional.mse_loss, metric_name="val_mse",
                metric_sum=lambda p, t: ((p - t) ** 2).sum(), naive_metric=float(y[192:].var()),
                data_source="generated", data_mb=0.0)

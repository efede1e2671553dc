"""A test-only workload that fails on demand, registered by an entry point (see conftest.py).

It exercises the engine's real failure paths (child exceptions, allocator failures, hangs)
without making a real workload misbehave on purpose.
"""

import time

from stbench.contract import BuildContext, Data, Metric, Model, Param, Supervised, Task, Workload


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
    return Task(
        data=Data(TensorDataset(x[:192], y[:192]), TensorDataset(x[192:], y[192:]), source="generated", mb=0.0),
        model=Model(torch.nn.Linear(4, 1), Supervised(torch.nn.functional.mse_loss)),
        metric=Metric("val_mse", sum=lambda p, t: ((p - t) ** 2).sum(), naive=float(y[192:].var())),
    )


WORKLOAD = Workload(
    name="faulty",
    summary="linear regression that can raise, run out of memory or hang",
    params=(Param("fault", str, "none", "what goes wrong", ("none", "raise", "oom", "hang")),),
    presets={"default": {"batch_size": 16, "epochs": 1}, "smoke": {}},
    build=build,
    target_ratio=0.5,
    target_note="val MSE at half the validation variance",
)

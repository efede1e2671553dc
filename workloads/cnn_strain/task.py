"""Model and task for `cnn-strain`."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from stbench.contract import (
    BuildContext,
    Data,
    Metric,
    Model,
    Supervised,
    Task,
    run_blocks,
    segments,
    tensor_mb,
)

from . import data


def make_model() -> nn.Sequential:
    """The study's tuned network: 153,441 parameters."""
    return nn.Sequential(
        nn.Conv1d(3, 15, 5),
        nn.ReLU(),
        nn.MaxPool1d(3),
        nn.Conv1d(15, 38, 5),
        nn.ReLU(),
        nn.MaxPool1d(3),
        nn.Flatten(),
        nn.Linear(760, 197),
        nn.ReLU(),
        nn.Linear(197, 2),
    )


class Blocks(nn.Module):
    """The network run as its three repeated blocks (two conv blocks and the head), so that
    activation checkpointing can keep only their inputs (the same parameters, the same math)."""

    BOUNDS = ((0, 3), (3, 6), (6, 10))

    def __init__(self, net: nn.Sequential, mode: str):
        super().__init__()
        # the blocks are the registered modules (what fsdp shards and all-gathers one by one)
        self.parts = nn.ModuleList(net[a:b] for a, b in self.BOUNDS)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        blocks = [lambda v, part=part: ((part(v),), None) for part in self.parts]
        (x,), _ = run_blocks(blocks, (x,), self.mode)
        return x


def _sq_err_sum(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((pred - target) ** 2).mean(dim=1).sum()


def make_task(params: dict, ctx: BuildContext) -> Task:
    seed = ctx.seed
    if params["data"] == "generated":
        # Every rank generates the same set from the same seed; DDP shards it by index.
        x, y = data.cached(ctx.cache_dir, params["n_samples"], seed, params["noise"])
        source = f"generated:n={params['n_samples']}"
    else:
        x, y = data.load(params["data"])
        source = params["data"]
    n_val = max(1, int(round(len(x) * params["val_fraction"])))
    if len(x) - n_val < 1:
        raise ValueError(
            f"{len(x)} samples leave nothing to train on with val_fraction={params['val_fraction']}"
        )
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[n_val:], order[:n_val]
    # Min-max normalize the labels with training statistics only.
    lo, hi = y[tr].min(axis=0), y[tr].max(axis=0)
    y = (y - lo) / np.where(hi > lo, hi - lo, 1.0)
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y.astype(np.float32))
    train = TensorDataset(x_t[tr], y_t[tr])
    val = TensorDataset(x_t[va], y_t[va])
    naive = float(((y_t[va] - y_t[tr].mean(dim=0)) ** 2).mean())  # predict the training mean
    torch.manual_seed(seed)
    mode = params["checkpoint"]
    net = make_model() if mode == "none" else Blocks(make_model(), mode)
    return Task(
        data=Data(train=train, val=val, source=source, mb=tensor_mb(*train.tensors, *val.tensors)),
        model=Model(net, Supervised(nn.functional.mse_loss)),
        metric=Metric("val_mse", _sq_err_sum, naive),
        extras=lambda: {"checkpoint_segments": segments(len(Blocks.BOUNDS), mode)},
    )

"""Task for `dcrnn-pems`: data mode, model, masked MAE (torch: the cell's process only)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import torch

from stbench.contract import BuildContext, Data, Metric, Model, Optim, Task, tensor_mb

from . import graph
from .model import DCRNN, TinyDCRNN
from .source import STEP_MINUTES, historical_average_mae, load_series
from .windows import IndexWindows, materialize

PLACEMENT = {"base": "host", "index": "host", "gpu-index": "device", "sharded-index": "sharded"}


def masked_mae(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """DCRNN's loss: zeros are missing readings and do not count."""
    mask = (target != 0).float()
    return ((pred - target).abs() * mask).sum() / mask.sum().clamp_min(1.0)


def _predict(model, x, y, mean, std, step=0):
    """The model works in z-scores; loss and metrics in mph, as DCRNN computes them. y feeds
    scheduled sampling in training only."""
    return model(x, (y - mean) / std, step) * std + mean


def _loss(model, x, y, step, mean, std):
    return masked_mae(_predict(model, x, y, mean, std, step), y)


def _windows(
    speeds: np.ndarray,
    params: dict,
    ctx: BuildContext,
    n_train: int,
    n_val: int,
    mean: float,
    std: float,
):
    """(train, val) windows in the cell's batching mode."""
    t = speeds.shape[0]
    speed = torch.from_numpy(np.ascontiguousarray(speeds, dtype=np.float32))
    tod = torch.from_numpy(
        ((np.arange(t) * STEP_MINUTES) % (24 * 60) / (24 * 60.0)).astype(np.float32)
    )
    windows = partial(
        IndexWindows, mean=mean, std=std, in_steps=params["in_steps"], horizon=params["horizon"]
    )
    span = params["in_steps"] + params["horizon"] - 1
    if params["batching"] == "sharded-index":
        # This rank keeps only its contiguous part of the training windows and the rows they
        # touch (its range plus the window overlap); every rank gets the same number of windows.
        per_rank = n_train // ctx.world_size
        lo = ctx.rank * per_rank
        train = windows(
            speed[lo : lo + per_rank + span].clone(),
            tod[lo : lo + per_rank + span].clone(),
            count=per_rank,
        )
        val = windows(
            speed[n_train : n_train + n_val + span].clone(),
            tod[n_train : n_train + n_val + span].clone(),
            count=n_val,
        )
        return train, val
    train = windows(speed, tod, first=0, count=n_train)
    val = windows(speed, tod, first=n_train, count=n_val)
    if params["batching"] == "base":
        return materialize(train), materialize(val)
    return train, val


def make_task(params: dict, ctx: BuildContext) -> Task:
    speeds, adj = load_series(params, ctx.seed)
    t = speeds.shape[0]
    n_windows = t - params["in_steps"] - params["horizon"] + 1
    n_train, n_val = int(round(n_windows * 0.7)), int(round(n_windows * 0.1))
    train_rows = speeds[: n_train + params["in_steps"]]
    observed = train_rows[train_rows != 0]
    mean, std = float(observed.mean()), float(observed.std())  # training statistics
    train, val = _windows(speeds, params, ctx, n_train, n_val, mean, std)
    supports = graph.random_walk_supports(adj)
    torch.manual_seed(ctx.seed)
    if params["model"] == "tiny":
        model = TinyDCRNN(
            supports, 2, params["units"], params["k"], params["horizon"], params["checkpoint"]
        )
    else:
        model = DCRNN(
            supports,
            2,
            params["units"],
            params["layers"],
            params["k"],
            params["horizon"],
            params["cl_decay_steps"],
            params["checkpoint"],
        )
    return Task(
        data=Data(
            train,
            val,
            source=f"{Path(params['data']).name}:{speeds.shape[1]} sensors x {t} steps",
            mb=_data_mb(train, val),
            placement=PLACEMENT[params["batching"]],
        ),
        model=Model(
            model, partial(_loss, mean=mean, std=std), partial(_predict, mean=mean, std=std)
        ),
        metric=Metric(
            "val_masked_mae",
            sum=lambda p, y: ((p - y).abs() * (y != 0)).sum(),
            naive=historical_average_mae(speeds, n_train, n_val, params),
            count=lambda y: (y != 0).sum(),
        ),  # a device tensor: no sync per batch
        optim=Optim(
            partial(torch.optim.Adam, eps=params["adam_eps"]), clip_grad_norm=params["clip"] or None
        ),
        extras=lambda: {"checkpoint_segments": model.checkpoint_segments(params["in_steps"])},
    )


def _data_mb(*datasets) -> float:
    """Bytes the data occupies (each distinct tensor counted once)."""
    seen = {t.data_ptr(): t for d in datasets for t in d.tensors}
    return tensor_mb(*seen.values())

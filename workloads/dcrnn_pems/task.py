"""Task for `dcrnn-pems`: data mode, model, masked MAE (torch: the cell's process only)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch

from stbench.contract import BuildContext, Data, Metric, Model, Optim, Task, tensor_mb

from . import graph
from .model import DCRNN, TinyDCRNN
from .source import STEP_MINUTES, historical_average_mae, load_adj, load_series
from .windows import IndexWindows, materialize

PLACEMENT = {
    "base": "host",
    "index": "host",
    "gpu-index": "device",
    "sharded-index": "sharded",
    "dask-index": "sharded",  # each rank's own part of the windows, fetched from its worker
}


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


@dataclass(frozen=True)
class Windows:
    """A cell's data, however its batching mode made it: the windows, the graph, the training
    statistics and baseline, and what the data occupies per rank."""

    train: object
    val: object
    adj: np.ndarray
    mean: float
    std: float
    naive: float
    source: str
    mb: float
    extras: dict


def _in_this_process(params: dict, ctx: BuildContext) -> Windows:
    """base, index, gpu-index, sharded-index: the series loaded by the rank itself."""
    speeds, adj = load_series(params, ctx.seed, ctx.cache_dir)
    t = speeds.shape[0]
    n_windows = t - params["in_steps"] - params["horizon"] + 1
    n_train, n_val = int(round(n_windows * 0.7)), int(round(n_windows * 0.1))
    train_rows = speeds[: n_train + params["in_steps"]]
    observed = train_rows[train_rows != 0]
    mean, std = float(observed.mean()), float(observed.std())  # training statistics
    train, val = _windows(speeds, params, ctx, n_train, n_val, mean, std)
    naive = historical_average_mae(speeds, n_train, n_val, params)
    source = f"{Path(params['data']).name}:{speeds.shape[1]} sensors x {t} steps"
    return Windows(train, val, adj, mean, std, naive, source, _data_mb(train, val), {})


def _on_dask(params: dict, ctx: BuildContext) -> Windows:
    """dask-index: the series persisted across a Dask cluster's workers (dask_series.py); the
    rank's training windows are its contiguous part, as sharded-index cuts them."""
    from .dask_series import DaskWindows, Series

    series = Series(params, ctx.seed, ctx.world_size, ctx.rank)
    st = series.stats
    per_rank = st["n_train"] // ctx.world_size
    windows = partial(DaskWindows, series, st["mean"], st["std"], params)
    source = f"{Path(params['data']).name}:{st['sensors']} sensors x {st['steps']} steps"
    return Windows(
        windows(ctx.rank * per_rank, per_rank),
        windows(st["n_train"], st["n_val"]),
        load_adj(params, ctx.seed),
        st["mean"],
        st["std"],
        st["naive"],
        source,
        series.mb(series.worker),  # this rank's part, as its worker holds it
        {"dask_cluster_mb": series.mb()},
    )


def make_task(params: dict, ctx: BuildContext) -> Task:
    w = (_on_dask if params["batching"] == "dask-index" else _in_this_process)(params, ctx)
    supports = graph.random_walk_supports(w.adj)
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
    mean, std = w.mean, w.std
    return Task(
        data=Data(
            w.train, w.val, source=w.source, mb=w.mb, placement=PLACEMENT[params["batching"]]
        ),
        model=Model(
            model, partial(_loss, mean=mean, std=std), partial(_predict, mean=mean, std=std)
        ),
        metric=Metric(
            "val_masked_mae",
            sum=lambda p, y: ((p - y).abs() * (y != 0)).sum(),
            naive=w.naive,
            count=lambda y: (y != 0).sum(),
        ),  # a device tensor: no sync per batch
        optim=Optim(
            partial(torch.optim.Adam, eps=params["adam_eps"]), clip_grad_norm=params["clip"] or None
        ),
        extras=lambda: {
            "checkpoint_segments": model.checkpoint_segments(params["in_steps"]),
            **w.extras,
        },
    )


def _data_mb(*datasets) -> float:
    """Bytes the data occupies (each distinct tensor counted once)."""
    seen = {t.data_ptr(): t for d in datasets for t in d.tensors}
    return tensor_mb(*seen.values())

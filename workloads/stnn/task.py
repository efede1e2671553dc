"""Task for `stnn`: field, relations, pairs of the two passes, forecast (torch)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import psutil
import torch

from stbench.contract import BuildContext, Data, Metric, Model, Optim, Task, tensor_mb

from . import data, grid, relations, sizing
from .model import STNN
from .optim import RowSparseAdam
from .pairs import ForecastSet, PairData, TwoPassSampler
from .sizing import load_field


def _flops_per_sample(s: dict, params: dict, n_dec: int, n_dyn: int) -> float:
    """Forward + backward FLOPs per pair, averaged over both passes, counting the products the
    mode actually computes (dense: all n columns of a relation row; sparse: the edges)."""
    nz, r = params["nz"], s["r"]
    columns = s["width"] if params["relations"] == "sparse" else r * s["n"]
    dec = 2 * nz * 1 * 3
    dyn = (2 * columns * nz + 2 * r * nz * nz + 2 * nz) * 3
    return (dec * n_dec + dyn * n_dyn) / (n_dec + n_dyn)


def _loss(model, x, y, step):
    """Training: the model returns the loss of the pass the batch belongs to."""
    return model(x, y)


def _with_host_copy(x, y, device):
    """The batch on the device, and its (pinned) host copy beside it for what the host reads."""
    return (x.to(device, non_blocking=True), x), y.to(device, non_blocking=True)


def _predict(model, x, y, mean, std):
    """Evaluation: the forecast, in the data's units."""
    return model(x, y) * std + mean


def _ocean_series(params: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(months x ocean cells, ocean mask): the whole field is dropped once its ocean cells are
    copied out (at the 0.25-degree globe it is 1.7 GB beside the 1.5 GB series)."""
    field = load_field(params, seed)
    return field.series(), field.ocean


def _model(
    params: dict, edges, t_train: int, seed: int, device: str
) -> tuple[STNN, torch.nn.Module]:
    """(the STNN, its relations backend), initialised from `seed`; dense relations are made on
    `device`, the training device (the trainer moves the rest)."""
    torch.manual_seed(seed)
    sparse_grad = params["factor_grad"] == "sparse"
    rel = relations.make(
        params["relations"], edges, params["mode"], params["chunk"], sparse_grad, device
    )
    model = STNN(
        rel,
        edges.n,
        t_train,
        params["nz"],
        1,
        params["nhid"],
        params["nlayers"],
        params["activation"],
        params["lambd"],
        params["l1"],
        sparse_grad,
    )
    return model, rel


def make_task(params: dict, ctx: BuildContext) -> Task:
    state = sizing.resolve_state(params, ctx.device, psutil.virtual_memory().total)
    series, ocean = _ocean_series(params, ctx.seed)  # (time, n)
    t_train = series.shape[0] - params["test_steps"]
    train, held_out = series[:t_train], series[t_train:]  # views of the one array
    mean, std = float(train.mean()), float(train.std()) or 1.0
    # before train is normalized
    persistence = float(np.sqrt(np.mean((held_out - series[t_train - 1]) ** 2)))
    # in place, the same float32 operations as (train - mean) / std without two copies
    train -= mean
    train /= std
    wrap = params["data"] == "generated" and data.is_global(*data.parse_grid(params["grid"]))
    edges = grid.grid_edges(ocean, params["neighbours"], wrap_lon=wrap)
    model, rel = _model(params, edges, t_train, ctx.seed, ctx.device)
    pairs = PairData(torch.from_numpy(train).unsqueeze(-1), edges.n)
    truth = torch.from_numpy(held_out).unsqueeze(-1)
    s = {"n": edges.n, "r": edges.r, "width": int(np.diff(edges.rowptr()).max())}
    return Task(
        data=Data(
            pairs,
            ForecastSet(truth),
            source=f"{Path(params['data']).name}:{edges.n} ocean cells x {len(series)} months",
            mb=tensor_mb(pairs.series, truth),
            batch_sampler=partial(TwoPassSampler, pairs.n_dec, pairs.n_dyn),
            transfer=_with_host_copy,
        ),
        model=Model(model, _loss, partial(_predict, mean=mean, std=std)),
        metric=Metric(
            "test_rmse",
            sum=lambda p, y: ((p - y) ** 2).sum(),
            naive=persistence,
            count=lambda y: float(y.numel()),
            finish=lambda total, count: float(np.sqrt(total / max(count, 1))),
        ),
        optim=Optim(partial(RowSparseAdam, betas=(0.0, 0.999), state=state)),
        flops_per_sample=_flops_per_sample(s, params, pairs.n_dec, pairs.n_dyn),
        extras=lambda: {
            **(rel.stats() if hasattr(rel, "stats") else {}),
            "state_bits": 16.0 if state == "bf16" else 32.0,
        },
    )

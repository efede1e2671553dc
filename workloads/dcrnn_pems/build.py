"""Task for `dcrnn-pems`: graph, speeds, data mode, model, masked MAE."""

from __future__ import annotations

from functools import partial
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from ..task import Task, tensor_mb
from . import data, graph
from .model import DCRNN, TinyDCRNN

SIZES = {"bay": (325, 52_116), "la": (207, 34_272), "2k7": (2_700, 52_116), "11k": (11_000, 52_116)}


def load_graph(params: dict, seed: int) -> tuple[list[str], np.ndarray]:
    name = params["graph"]
    if name == "auto":
        name = params["size"] if params["size"] in ("bay", "la") else "generated"
    if name in ("bay", "la"):
        with resources.files(__package__).joinpath(f"adj_{name}.npz").open("rb") as f, np.load(f) as z:
            return [str(i) for i in z["ids"]], z["adj"].astype(np.float32)
    if name == "generated":
        n = SIZES[params["size"]][0]
        return [str(i) for i in range(n)], graph.generated_graph(n, seed)
    return graph.load_adj_pickle(name)


def load_series(params: dict, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(speeds (time, sensors), adjacency) for the configured data and graph."""
    if params["data"].endswith(".json"):
        return data.load_chickenpox(params["data"])
    ids, adj = load_graph(params, seed)
    if params["data"] == "generated":
        steps = params["steps"] or SIZES[params["size"]][1]
        return data.generate_speeds(adj, steps, seed), adj
    speeds, _ = data.read_speed_h5(params["data"], ids)
    return speeds, adj


def check(params: dict) -> None:
    """Parent-side check of the graph and speed files a cell would read."""
    if params["data"].endswith(".json"):
        if not Path(params["data"]).is_file():
            raise ValueError(f"data file {params['data']} does not exist")
        return
    if params["data"] == "generated":
        if params["graph"] not in ("auto", "bay", "la", "generated"):
            graph.load_adj_pickle(params["graph"])  # a user's pickle: refused or corrupt fails now
        return  # packaged and generated graphs need no check (generating one here would do it twice)
    ids, _ = load_graph(params, 0)
    data.read_speed_h5(params["data"], ids, stop=1)  # the layout and sensor ids, not the whole table


def masked_mae(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """DCRNN's loss: zeros are missing readings and do not count."""
    mask = (target != 0).float()
    return ((pred - target).abs() * mask).sum() / mask.sum().clamp_min(1.0)


def _forward(model, x, y, step, mean, std):
    """The model works in z-scores; loss and metrics in mph, as DCRNN computes them."""
    return model(x, (y - mean) / std, step) * std + mean


def build(params: dict, seed: int, rank: int = 0, world_size: int = 1) -> Task:
    speeds, adj = load_series(params, seed)
    t = speeds.shape[0]
    n_windows = t - params["in_steps"] - params["horizon"] + 1
    n_train, n_val = int(round(n_windows * 0.7)), int(round(n_windows * 0.1))
    train_rows = speeds[: n_train + params["in_steps"]]
    observed = train_rows[train_rows != 0]
    mean, std = float(observed.mean()), float(observed.std())  # training statistics
    speed = torch.from_numpy(np.ascontiguousarray(speeds, dtype=np.float32))
    tod = torch.from_numpy(((np.arange(t) * data.STEP_MINUTES) % (24 * 60) / (24 * 60.0)).astype(np.float32))
    windows = partial(data.IndexWindows, mean=mean, std=std, in_steps=params["in_steps"], horizon=params["horizon"])
    span = params["in_steps"] + params["horizon"] - 1
    if params["batching"] == "sharded-index":
        # This rank keeps only its contiguous part of the training windows and the rows they
        # touch (its range plus the window overlap); every rank gets the same number of windows.
        per_rank = n_train // world_size
        lo = rank * per_rank
        train = windows(speed[lo:lo + per_rank + span].clone(), tod[lo:lo + per_rank + span].clone(), count=per_rank)
        val = windows(speed[n_train:n_train + n_val + span].clone(), tod[n_train:n_train + n_val + span].clone(),
                      count=n_val)
    else:
        train = windows(speed, tod, first=0, count=n_train)
        val = windows(speed, tod, first=n_train, count=n_val)
        if params["batching"] == "base":
            train, val = data.materialize(train), data.materialize(val)
    del speed, tod
    supports = graph.random_walk_supports(adj)
    torch.manual_seed(seed)
    if params["model"] == "tiny":
        model = TinyDCRNN(supports, 2, params["units"], params["k"], params["horizon"])
    else:
        model = DCRNN(supports, 2, params["units"], params["layers"], params["k"], params["horizon"], params["cl_decay_steps"])
    naive = historical_average_mae(speeds, n_train, n_val, params)
    return Task(
        train=train, val=val, model=model, loss_fn=masked_mae, metric_name="val_masked_mae",
        metric_sum=lambda p, y: ((p - y).abs() * (y != 0)).sum(),
        metric_count=lambda y: float((y != 0).sum()),
        naive_metric=naive, data_source=f"{params['data']}:{speeds.shape[1]} sensors x {t} steps",
        data_mb=_data_mb(train, val),
        optimizer=partial(torch.optim.Adam, eps=params["adam_eps"]),
        forward=partial(_forward, mean=mean, std=std),
        clip_grad_norm=params["clip"] or None,
        data_on_device=params["batching"] == "gpu-index",
        sharded=params["batching"] == "sharded-index",
    )


def historical_average_mae(speeds: np.ndarray, n_train: int, n_val: int, params: dict) -> float:
    """Masked MAE over the validation windows of the per-sensor, per-time-of-week mean of the
    training speeds: the historical-average baseline DCRNN compares against."""
    steps_per_week = 7 * 24 * 60 // data.STEP_MINUTES
    train = speeds[: n_train + params["in_steps"]]
    slot = np.arange(train.shape[0]) % steps_per_week
    sums, counts = np.zeros((steps_per_week, speeds.shape[1])), np.zeros((steps_per_week, speeds.shape[1]))
    np.add.at(sums, slot, train)
    np.add.at(counts, slot, train != 0)
    avg = np.where(counts > 0, sums / np.maximum(counts, 1), train[train != 0].mean())
    rows = np.arange(n_train + params["in_steps"], n_train + n_val + params["in_steps"] + params["horizon"] - 1)
    truth, pred = speeds[rows], avg[rows % steps_per_week]
    mask = truth != 0
    return float(np.abs(pred - truth)[mask].mean())


def _data_mb(*datasets) -> float:
    """Bytes the data occupies (each distinct tensor counted once)."""
    seen = {t.data_ptr(): t for d in datasets for t in d.tensors}
    return tensor_mb(*seen.values())

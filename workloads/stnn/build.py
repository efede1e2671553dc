"""Task for `stnn`: field, relations, pairs of the two passes, forecast, memory prediction."""

from __future__ import annotations

from functools import lru_cache, partial

import numpy as np

from . import data, grid

F32, I64 = 4, 8


_FILE_KEYS = ("data", "variable", "box", "start", "end", "coarsen")


def load_field(params: dict, seed: int) -> data.Field:
    if params["data"] == "generated":
        return data.generate(params["grid"], params["months"], seed, params["land"])
    return data.open_sst(*(params[k] for k in _FILE_KEYS))


def layout(params: dict, seed: int = 0) -> tuple[int, np.ndarray]:
    """(months, ocean mask) without reading the values. The parent asks for it per cell
    (data check, skip decisions), so it is cached: a file is opened once per selection."""
    if params["data"] == "generated":
        return params["months"], _generated_mask(params["grid"], params["land"], seed)
    return _file_layout(tuple(params[k] for k in _FILE_KEYS))


@lru_cache(maxsize=16)
def _generated_mask(grid_text: str, land: float, seed: int) -> np.ndarray:
    return ~data.land_mask(*data.parse_grid(grid_text), land, seed)


@lru_cache(maxsize=16)
def _file_layout(selection: tuple) -> tuple[int, np.ndarray]:
    field = data.open_sst(*selection, load=False)
    return field.values.shape[0], field.ocean


def unsupported(backend: str, mode: str) -> str | None:
    """Why a relations backend cannot carry a mode (the one place this is decided)."""
    if mode == "stnn-d" and backend == "sparse":
        return "relations=sparse does not apply to mode=stnn-d: its learned relations are dense n x n"
    if mode == "stnn-d" and backend == "offload":
        return "relations=offload supports stnn and stnn-r (stnn-d learns a dense n x n on the device)"
    return None


def check(params: dict) -> None:
    """Parent-side: the grid or file, the selection and the split (reads no values)."""
    months, _ = layout(params)
    if params["test_steps"] >= months - 2:
        raise ValueError(f"test_steps={params['test_steps']} leaves fewer than 2 training months of {months}")


def sizes(params: dict, seed: int = 0) -> dict:
    months, ocean = layout(params, seed)
    n = int(ocean.sum())
    r = grid.relation_count(params["neighbours"])
    per_cell = {"4": 4, "8": 8, "dir4": 4}[params["neighbours"]]
    return {"n": n, "r": r, "edges": n * (1 + per_cell), "width": 1 + per_cell,
            "t_train": months - params["test_steps"], "months": months, "cells": ocean.size}


def predict_bytes(params: dict, batch_size: int, seed: int = 0) -> dict:
    """Predicted peak bytes of a training cell by where they live: "device" (the training
    device: everything on CPU) and "host" (what offload keeps in host memory). The terms are
    the tensors the code allocates; interpreter and library overhead is not included (the
    cell records its RSS before building, so the two can be compared)."""
    s = sizes(params, seed)
    n, r, t, nz, b = s["n"], s["r"], s["t_train"], params["nz"], batch_size
    backend, mode = params["relations"], params["mode"]
    w_bytes = n * r * n * F32
    factors = t * n * nz * F32
    dev = {
        "factors + Adam state": 2 * factors + t * n * I64,
        "series": 2 * s["months"] * s["cells"] * F32,  # the field and its ocean series
        "pair permutations": 2 * t * n * I64,
        "edges": s["edges"] * (4 * I64 + 2 * F32) + n * s["width"] * (I64 + 1),
    }
    host = {}
    if backend in ("dense", "offload"):
        dev["factor gradient (dense)"] = factors
        dev["gathered z_t and its gradient"] = 2 * b * n * nz * F32
        dev["gathered relation rows"] = b * r * n * F32 * (2 if mode != "stnn" else 1)
    else:
        dev["edge gathers of a batch"] = 3 * b * s["width"] * (nz * F32 + 3 * I64)
    if backend == "dense":
        # stnn keeps W; stnn-r/-d rebuild it each step (mask or weights, the scatter, the
        # concatenation, and W's gradient in backward)
        dev["relations W"] = w_bytes if mode == "stnn" else w_bytes * 4 + n * (r - 1) * n * (1 if mode == "stnn-r" else F32)
    elif backend == "offload":
        host["relations W (host)"] = w_bytes
        host["staging buffers"] = 2 * params["chunk"] * r * n * F32
    return {"device": dev, "host": host, "device_bytes": sum(dev.values()), "host_bytes": sum(host.values()), **s}


def skip(params: dict, batch_size: int, device: str, memory: dict) -> str | None:
    """Why a cell cannot run here (a combination that does not exist, or relations that will
    not fit the memory this machine has), with the predicted bytes."""
    reason = unsupported(params["relations"], params["mode"])
    if reason:
        return reason
    p = predict_bytes(params, batch_size)
    gib = lambda v: f"{v / 2**30:.1f} GiB"
    if device.startswith("cuda"):
        if memory.get("device_bytes") and p["device_bytes"] > memory["device_bytes"]:
            return (f"predicted {gib(p['device_bytes'])} on the GPU for {params['relations']} relations at n={p['n']} "
                    f"exceeds its {gib(memory['device_bytes'])}")
        if p["host_bytes"] > memory["host_bytes"]:
            return f"predicted {gib(p['host_bytes'])} of host memory exceeds the {gib(memory['host_bytes'])} RAM"
        return None
    total = p["device_bytes"] + p["host_bytes"]
    if total > memory["host_bytes"]:
        return (f"predicted {gib(total)} for {params['relations']} relations at n={p['n']} "
                f"exceeds the {gib(memory['host_bytes'])} RAM")
    return None


def _flops_per_sample(s: dict, params: dict, n_dec: int, n_dyn: int) -> float:
    """Forward + backward FLOPs per pair, averaged over both passes, counting the products the
    mode actually computes (dense: all n columns of a relation row; sparse: the edges)."""
    nz, r = params["nz"], s["r"]
    columns = s["width"] if params["relations"] == "sparse" else r * s["n"]
    dec = 2 * nz * 1 * 3
    dyn = (2 * columns * nz + 2 * r * nz * nz + 2 * nz) * 3
    return (dec * n_dec + dyn * n_dyn) / (n_dec + n_dyn)


def build(params: dict, seed: int, rank: int = 0, world_size: int = 1):
    import torch

    from ..task import Task, tensor_mb
    from . import relations
    from .model import STNN
    from .optim import RowSparseAdam
    from .pairs import ForecastSet, PairData, TwoPassSampler

    field = load_field(params, seed)
    series = field.series()  # (time, n)
    t_train = series.shape[0] - params["test_steps"]
    train = series[:t_train]
    mean, std = float(train.mean()), float(train.std()) or 1.0
    wrap = params["data"] == "generated" and data.parse_grid(params["grid"]) == data.GLOBAL_GRID
    edges = grid.grid_edges(field.ocean, params["neighbours"], wrap_lon=wrap)
    del field
    torch.manual_seed(seed)
    rel = relations.make(params["relations"], edges, params["mode"], params["chunk"])
    model = STNN(rel, edges.n, t_train, params["nz"], 1, params["nhid"], params["nlayers"], params["activation"],
                 params["lambd"], params["l1"])
    pairs = PairData(torch.from_numpy((train - mean) / std).unsqueeze(-1), edges.n)
    truth = torch.from_numpy(series[t_train:].copy()).unsqueeze(-1)
    persistence = float(np.sqrt(np.mean((series[t_train:] - series[t_train - 1]) ** 2)))
    s = {"n": edges.n, "r": edges.r, "width": int(np.diff(edges.rowptr()).max())}
    return Task(
        train=pairs, val=ForecastSet(truth), model=model, loss_fn=lambda loss, y: loss,
        metric_name="test_rmse", metric_sum=lambda p, y: ((p - y) ** 2).sum(),
        metric_count=lambda y: float(y.numel()), metric_finish=lambda total, count: float(np.sqrt(total / max(count, 1))),
        naive_metric=persistence, data_source=f"{params['data']}:{edges.n} ocean cells x {series.shape[0]} months",
        data_mb=tensor_mb(pairs.series, truth),
        optimizer=partial(RowSparseAdam, betas=(0.0, 0.999)),
        forward=partial(_forward, mean=mean, std=std),
        batch_sampler=partial(TwoPassSampler, pairs.n_dec, pairs.n_dyn),
        flops_per_sample=_flops_per_sample(s, params, pairs.n_dec, pairs.n_dyn),
        stats=getattr(rel, "stats", None),
    )


def _forward(model, x, y, step, mean, std):
    """Training returns the pass's loss; the forecast is returned in the data's units."""
    out = model(x, y)
    return out if model.training else out * std + mean

"""The parent-side view of an stnn cell, without torch: the data's layout, which relation
backends carry which mode, predicted memory and the skip decision."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from stbench.contract import is_cuda

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


def _pinned(nbytes: int) -> int:
    """What CUDA's caching host allocator reserves for a pinned block: the next power of two."""
    return 1 << (max(nbytes, 1) - 1).bit_length()


def predict_bytes(params: dict, batch_size: int, device: str = "cpu", seed: int = 0) -> dict:
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
        # dense gathers the batch's z_t at once and gets its gradient; offload gathers one
        # chunk at a time into one reused buffer, which backward reuses for the gradient
        dev["gathered z_t and its gradient"] = (2 * b if backend == "dense" else min(params["chunk"], b)) * n * nz * F32
        dev["gathered relation rows"] = b * r * n * F32 * (2 if mode != "stnn" else 1)
    else:
        dev["edge gathers of a batch"] = 3 * b * s["width"] * (nz * F32 + 3 * I64)
    if backend == "dense":
        # stnn keeps W; stnn-r/-d rebuild it each step (mask or weights, the scatter, the
        # concatenation, and W's gradient in backward)
        dev["relations W"] = w_bytes if mode == "stnn" else w_bytes * 4 + n * (r - 1) * n * (1 if mode == "stnn-r" else F32)
    elif backend == "offload":
        host["relations W (host)"] = w_bytes
        staging = params["chunk"] * r * n * F32  # two of them, pinned on CUDA
        host["staging buffers"] = 2 * (_pinned(staging) if is_cuda(device) else staging)
    return {"device": dev, "host": host, "device_bytes": sum(dev.values()), "host_bytes": sum(host.values()), **s}


def skip(params: dict, batch_size: int, device: str, memory: dict) -> str | None:
    """Why a cell cannot run here (a combination that does not exist, or relations that will
    not fit the memory this machine has), with the predicted bytes."""
    reason = unsupported(params["relations"], params["mode"])
    if reason:
        return reason
    p = predict_bytes(params, batch_size, device)
    gib = lambda v: f"{v / 2**30:.1f} GiB"
    if is_cuda(device):
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

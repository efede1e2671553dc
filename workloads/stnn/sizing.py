"""The parent-side view of an stnn cell, without torch: the data's layout, which relation
backends carry which mode, predicted memory and the skip decision."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import psutil

from stbench.contract import cuda_library_bytes, is_cuda

from . import data, grid

F32, I64 = 4, 8
STATES = ("fp32", "bf16")  # RowSparseAdam's layouts of the second moment (optim.py)
AUTO_SHARE = 0.9  # state=auto keeps fp32 while its prediction stays under this share of the RAM


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
        return (
            "relations=sparse does not apply to mode=stnn-d: its learned relations are dense n x n"
        )
    if mode == "stnn-d" and backend == "offload":
        return (
            "relations=offload supports stnn and stnn-r (stnn-d learns a dense n x n on the device)"
        )
    return None


def check(params: dict) -> None:
    """Parent-side: the grid or file, the selection and the split (reads no values)."""
    months, _ = layout(params)
    if params["test_steps"] >= months - 2:
        raise ValueError(
            f"test_steps={params['test_steps']} leaves fewer than 2 training months of {months}"
        )


def sizes(params: dict, seed: int = 0) -> dict:
    months, ocean = layout(params, seed)
    n = int(ocean.sum())
    r = grid.relation_count(params["neighbours"])
    per_cell = {"4": 4, "8": 8, "dir4": 4}[params["neighbours"]]
    return {
        "n": n,
        "r": r,
        "edges": n * (1 + per_cell),
        "width": 1 + per_cell,
        "t_train": months - params["test_steps"],
        "months": months,
        "cells": ocean.size,
    }


def _pinned(nbytes: int) -> int:
    """What CUDA's caching host allocator reserves for a pinned block: the next power of two."""
    return 1 << (max(nbytes, 1) - 1).bit_length()


def index_bytes(count: int) -> int:
    """Bytes of an index that numbers `count` items: int32 while they fit (pairs.py)."""
    return 4 if count < 2**31 else I64


def _state_bytes(params: dict, rows: int) -> dict:
    """The factors and RowSparseAdam's state for them (optim.py): fp32 keeps v in fp32 and an
    int32 step counter per row, bf16 keeps u in bf16 and no counter."""
    nz = params["nz"]
    if params["state"] == "bf16":
        return {"factors": rows * nz * F32, "Adam second moment (bf16)": rows * nz * 2}
    return {
        "factors": rows * nz * F32,
        "Adam second moment": rows * nz * F32,
        "Adam step counters": rows * 4,
    }


def _data_bytes(s: dict) -> tuple[dict, dict]:
    """(training, building) host bytes of the data. Training keeps the ocean series (the train
    months normalized in place, the held-out ones as read) and one pass's pair order. Building
    peaks while the series is copied out of the whole field, before the model exists; the
    field is freed before numpy's std makes its one temporary, of the training months."""
    t, n = s["t_train"], s["n"]
    train = {
        "ocean series": s["months"] * n * F32,
        "pair order (one pass)": t * n * index_bytes((2 * t - 1) * n),
    }
    build = {
        "field, while its series is extracted": s["months"] * s["cells"] * F32,
        "ocean series": s["months"] * n * F32,
    }
    return train, build


def _gradient_bytes(params: dict, factors: int) -> dict:
    """The factors' dense gradients a step holds (`factors`: the factors' bytes): one where the
    relations are dense or offloaded or factor_grad=dense, with an fp32 copy under a bf16 state."""
    out = {}
    dense_grad = params["factor_grad"] == "dense"
    if params["relations"] in ("dense", "offload") or dense_grad:
        out["factor gradient (dense)"] = factors
        if params["state"] == "bf16":
            out["Adam step's fp32 copy of u (dense gradient)"] = factors
    # a dynamics step's two paths into the factors each return one before autograd adds them
    if dense_grad:
        out["second dense factor gradient (factor_grad=dense)"] = factors
    return out


def _relation_bytes(params: dict, s: dict, b: int, device: str) -> tuple[dict, dict]:
    """(device, host) bytes of a step's relation terms: what each backend gathers, and where W
    lives (on the device, rebuilt each step by stnn-r/-d; in host memory with offload)."""
    n, r, nz = s["n"], s["r"], params["nz"]
    backend, mode = params["relations"], params["mode"]
    w_bytes = n * r * n * F32
    dev, host = {}, {}
    if backend in ("dense", "offload"):
        # dense gathers the batch's z_t at once and gets its gradient; offload gathers one
        # chunk at a time into one reused buffer, which backward reuses for the gradient
        dev["gathered z_t and its gradient"] = (
            (2 * b if backend == "dense" else min(params["chunk"], b)) * n * nz * F32
        )
        dev["gathered relation rows"] = b * r * n * F32 * (2 if mode != "stnn" else 1)
    else:
        # a step's gathers are small; the forecast's over every edge are not (0.5 GB at the globe)
        forecast = s["edges"] * (2 * nz * F32 + 2 * I64) + 2 * n * r * nz * F32
        dev["edge products (a batch, or the forecast)"] = max(
            3 * b * s["width"] * (nz * F32 + 3 * I64), forecast
        )
    if backend == "dense":
        # stnn keeps W; stnn-r/-d rebuild it each step (mask or weights, the scatter, the
        # concatenation, and W's gradient in backward)
        dev["relations W"] = (
            w_bytes
            if mode == "stnn"
            else w_bytes * 4 + n * (r - 1) * n * (1 if mode == "stnn-r" else F32)
        )
    elif backend == "offload":
        host["relations W (host)"] = w_bytes
        staging = params["chunk"] * r * n * F32  # two of them, pinned on CUDA
        host["staging buffers"] = 2 * (_pinned(staging) if is_cuda(device) else staging)
    return dev, host


def predict_bytes(
    params: dict,
    batch_size: int,
    device: str = "cpu",
    seed: int = 0,
    capability: tuple[int, int] | None = None,
) -> dict:
    """Predicted peak bytes of a training cell by where they live: "device" (the model, its
    optimizer state and a step's temporaries, on the training device) and "host" (the data and
    the pair order, and what offload keeps in host memory; on CPU both are the same RAM). The
    data is built before the model exists ("build", host): host_bytes is the larger of the two
    host peaks. The terms are the tensors the code allocates; interpreter and library overhead
    is not included (the cell records its RSS before building, so the two can be compared).
    state=auto is predicted as the layout it resolves to on this host (the row's predicted_mb).
    On CUDA the device terms include cuBLAS's workspaces for a GPU of `capability`: the caching
    allocator holds them, so they are in the peak a cell measures (contract.memory)."""
    if params["state"] == "auto":
        params = {**params, "state": resolve_state(params, device, psutil.virtual_memory().total)}
    s = sizes(params, seed)
    n, t = s["n"], s["t_train"]
    dev = {
        **_state_bytes(params, t * n),
        "edges": s["edges"] * (4 * I64 + 2 * F32) + n * s["width"] * (I64 + 1),
        **_gradient_bytes(params, t * n * params["nz"] * F32),
    }
    host, build = _data_bytes(s)
    relations_dev, relations_host = _relation_bytes(params, s, batch_size, device)
    dev.update(relations_dev)
    host.update(relations_host)
    if is_cuda(device):
        dev["cuBLAS workspaces"] = cuda_library_bytes(capability)
    device_bytes = sum(dev.values())
    # on CPU the build's peak shares the RAM with nothing of the model yet
    host_bytes = max(
        sum(host.values()), sum(build.values()) - (0 if is_cuda(device) else device_bytes)
    )
    return {
        "device": dev,
        "host": host,
        "build": build,
        "device_bytes": device_bytes,
        "host_bytes": host_bytes,
        **s,
    }


def resolve_state(params: dict, device: str, host_bytes: float) -> str:
    """The optimizer-state layout a cell runs: `auto` is torch's exact fp32 Adam unless that
    layout's batch-independent prediction would not fit the host (a CPU cell), then bf16. The
    parent (skip) and the child (the task) take the same decision from the same figures; on a
    GPU auto stays fp32 (an 80 GB H100 holds the 0.25-degree globe's fp32 state)."""
    if params["state"] != "auto":
        return params["state"]
    if is_cuda(device):
        return "fp32"
    p = predict_bytes({**params, "state": "fp32"}, 0, device)
    return "fp32" if p["device_bytes"] + p["host_bytes"] <= AUTO_SHARE * host_bytes else "bf16"


def skip(params: dict, batch_size: int, device: str, memory: dict) -> str | None:
    """Why a cell cannot run here (a combination that does not exist, or relations that will
    not fit the memory this machine has), with the predicted bytes."""
    reason = unsupported(params["relations"], params["mode"])
    if reason:
        return reason
    params = {**params, "state": resolve_state(params, device, memory["host_bytes"])}
    p = predict_bytes(params, batch_size, device)

    def gib(v: float) -> str:
        return f"{v / 2**30:.1f} GiB"

    if is_cuda(device):
        if memory.get("device_bytes") and p["device_bytes"] > memory["device_bytes"]:
            return (
                f"predicted {gib(p['device_bytes'])} on the GPU for {params['relations']} "
                f"relations at n={p['n']} exceeds its {gib(memory['device_bytes'])}"
            )
        if p["host_bytes"] > memory["host_bytes"]:
            return (
                f"predicted {gib(p['host_bytes'])} of host memory exceeds the "
                f"{gib(memory['host_bytes'])} RAM"
            )
        return None
    total = p["device_bytes"] + p["host_bytes"]
    if total > memory["host_bytes"]:
        return (
            f"predicted {gib(total)} for {params['relations']} relations at n={p['n']} "
            f"exceeds the {gib(memory['host_bytes'])} RAM"
        )
    return None

"""A workload as the engine sees it: parameters, presets and the functions it calls.

Torch-free at import: `stbench list`, planning and parameter checks never load torch. A
workload package defines `WORKLOAD = Workload(...)` with real callables; its `build`
imports torch (and anything heavy) inside the function, so only the cell's process pays.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .params import COMMON_PARAMS, Param


def default_cache_dir() -> Path:
    return Path(os.environ.get("STBENCH_CACHE", Path.home() / ".cache" / "stbench"))


@dataclass(frozen=True)
class BuildContext:
    """What a workload gets from the engine when it builds a cell's task."""

    seed: int = 0
    rank: int = 0  # this process's rank in a data-parallel world
    world_size: int = 1
    device: str = "cpu"  # the training device ("cpu", "cuda:0", ...)
    # for generated data kept between cells
    cache_dir: Path = field(default_factory=default_cache_dir)


BATCH = "batch_size"  # the engine's own axis, a size axis a workload may declare


@dataclass(frozen=True)
class SizeAxis:
    """The axis along which a workload's problem grows: what `stbench gpu-vs-cpu` sweeps to
    find the size from which a GPU pays. `param` is one of the workload's parameters (or the
    batch, BATCH); `values` run from small to large, `smoke` are two a CPU trains in seconds;
    `fixed` are the parameters every cell of the sweep takes (the generated data a size needs,
    stnn's sparse relations); `count(value)` says how many `unit`s a value is (a grid box as
    its series), by default the value itself as a number."""

    param: str
    unit: str  # what a value counts: "series", "grid cells", "sensors", "curves a batch"
    values: tuple[Any, ...]
    smoke: tuple[Any, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    count: Callable[[Any], float] | None = None

    def counted(self, value: Any) -> float:
        """How many units a value of the axis is."""
        return float(self.count(value) if self.count else value)


@dataclass(frozen=True)
class Workload:
    """A registered workload.

    Presets map a name to parameter overrides and may also set `batch_size` and `epochs`,
    the engine's own axes. The optional functions run in the parent (no torch):
      check(params)                                  ValueError if the data is unusable
      skip(params, batch_size, device, memory)       why a cell cannot run here, or None;
                                                     memory = {"host_bytes", "device_bytes" or None}
      predict(params, batch_size, device, capability=None)
                                                     {"device_bytes", "host_bytes", ...} of a cell;
                                                     on CUDA device_bytes include the libraries'
                                                     allocations (memory.cuda_library_bytes) for a
                                                     GPU of `capability` (None in the parent)
      prepare(source, out, **selection, yes, max_gb, progress)
                                                     cache real data locally
                                                     (`stbench data prepare`)
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    presets: Mapping[str, Mapping[str, Any]]
    build: Callable[
        [dict, BuildContext], Any
    ]  # (params, ctx) -> contract.Task, in the cell's process
    check: Callable[[dict], None] | None = None
    skip: Callable[[dict, int, str, dict], str | None] | None = None
    predict: Callable[..., dict] | None = None
    prepare: Callable[..., Path] | None = None
    strategies: tuple[str, ...] = ("single", "ddp")
    data_sources: tuple[str, ...] = ()
    default_preset: str = "default"
    # Time to quality: the default target (`--set target=0`) is this fraction of the naive
    # baseline, a value the default preset reaches within its budget (stated with its reason)
    target_ratio: float | None = None
    target_note: str = ""
    # The library that runs most of the FLOPs on CUDA: "matmul" (cuBLAS) or "cudnn" (convolutions,
    # RNNs). torch runs cuDNN's fp32 at TF32 by default and cuBLAS's strictly, so it decides the
    # peak a precision=default cell's peak_fraction divides by (runner/peak_math.py).
    flops_in: str = "matmul"
    # What `stbench gpu-vs-cpu` sweeps (None: a workload without one names --sizes itself)
    size: SizeAxis | None = None
    # Modules its build imports that take a second or more (its data readers: they load inside
    # functions): the warm server of a command about this workload imports them once, before it
    # forks any cell, where each process would otherwise import them again (runner/warm.py). One
    # this machine lacks is left to the build, which names the extra it needs.
    preload: tuple[str, ...] = ()

    @property
    def all_params(self) -> dict[str, Param]:
        merged = {p.name: p for p in COMMON_PARAMS}
        merged.update({p.name: p for p in self.params})  # a workload may override a common default
        return merged

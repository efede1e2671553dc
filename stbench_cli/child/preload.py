"""What the warm server (runner/warm.py) imports once, before it forks each cell: everything a
cell's process imports before its first step. Importing is all it does: no operator runs here (a
fork would inherit a started thread pool) and nothing asks CUDA anything (CUDA is initialised in
the cell, after the fork; the server refuses to serve where torch initialised it).
"""

from __future__ import annotations

import gc
import importlib
import pkgutil

import torch
import torch._dynamo  # noqa: F401  the FLOP counter's dispatch mode imports it at its first op
import torch.utils.flop_counter  # noqa: F401

from ..device import cuda_initialized
from ..plan import registry
from . import cell, trainer, windows  # noqa: F401


def _workloads() -> None:
    """Every registered workload's package and its modules (they import torch-side code at
    module level; their heavy third-party readers, xarray or h5py, load inside functions)."""
    for w in registry.all_workloads():
        module = importlib.import_module(w.build.__module__)
        package = module
        if not hasattr(module, "__path__") and "." in module.__name__:
            package = importlib.import_module(module.__name__.rsplit(".", 1)[0])
        for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
            importlib.import_module(f"{package.__name__}.{info.name}")


_workloads()
if cuda_initialized():  # a forked cell could not use CUDA: stop the server serving any
    raise SystemExit("stbench's warm server: CUDA was initialised while importing")
# What was imported lives as long as the server: the cells' collections (a cell collects before
# it leaves its world) skip it, as Python's gc documentation advises for a process that forks
# without exec; torch._dynamo alone made each collection take 0.15 s.
gc.freeze()

"""The explicit workload registry: name -> module that defines `WORKLOAD`.

Adding a workload is one module (or small package) plus one line here. Users may add
their own without editing the package: STBENCH_WORKLOADS="name=module,other=module2".
"""

from __future__ import annotations

import importlib
import os

from .base import Workload

REGISTRY: dict[str, str] = {
    "cnn-strain": "workloads.cnn_strain",
    "lstm-era5": "workloads.lstm_era5",
    "dcrnn-pems": "workloads.dcrnn_pems",
    "stnn": "workloads.stnn",
}


def _registry() -> dict[str, str]:
    merged = dict(REGISTRY)
    for item in filter(None, os.environ.get("STBENCH_WORKLOADS", "").split(",")):
        name, _, module = item.partition("=")
        merged[name.strip()] = module.strip()
    return merged


def names() -> list[str]:
    return sorted(_registry())


def get(name: str) -> Workload:
    """The workload called `name`; KeyError naming the valid ones otherwise."""
    registry = _registry()
    if name not in registry:
        raise KeyError(f"unknown workload {name!r}; valid: {', '.join(sorted(registry))}")
    return importlib.import_module(registry[name]).WORKLOAD

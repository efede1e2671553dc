"""The contract between a workload and the engine. No torch import at module level:
`stbench list`, matrix expansion and parameter checking must work without it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


_PARSERS: dict[type, Callable[[str], Any]] = {int: int, float: float, str: str, bool: _parse_bool}


@dataclass(frozen=True)
class Param:
    """One workload parameter: every one of them can become a matrix axis with --set."""

    name: str
    kind: type  # int, float, str or bool
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None  # None: any value of `kind`
    minimum: float | None = None

    def parse(self, text: str) -> Any:
        """Type and check one value; ValueError with a message naming what is valid."""
        try:
            value = _PARSERS[self.kind](text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a valid {self.kind.__name__}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        if self.choices is not None and value not in self.choices:
            valid = ", ".join(str(c) for c in self.choices)
            raise ValueError(f"{self.name}={value!r} is not allowed; valid: {valid}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.name}={value!r} must be >= {self.minimum}")
        return value


# Parameters the engine's trainer reads for every workload (optimizer, timing, loading).
COMMON_PARAMS: tuple[Param, ...] = (
    Param("lr", float, 1e-3, "learning rate for one process (see lr_scaling)", minimum=0.0),
    Param("lr_scaling", str, "none", "scale lr with the DDP world size", ("none", "linear", "sqrt")),
    Param("lr_warmup_steps", int, 0, "linear lr warm-up over this many optimizer steps", minimum=0),
    Param("warmup_steps", int, 5, "first steps excluded from steady-state throughput", minimum=0),
    Param("workers", int, 0, "DataLoader worker processes", minimum=0),
    Param("loader", str, "vectorized", "vectorized: one indexed slice per batch; per-item: default collate", ("vectorized", "per-item")),
    Param("threads", int, 0, "torch intra-op threads per process (0: torch's default)", minimum=0),
    Param("max_steps", int, 0, "cap on training steps per epoch (0: the whole epoch), for scale studies", minimum=0),
    Param("max_eval_batches", int, 0, "cap on validation batches per epoch (0: all), for scale studies", minimum=0),
)


@dataclass(frozen=True)
class Workload:
    """A registered workload: its parameters, presets and a lazily imported builder.

    `builder` is "module:function"; the function takes (params: dict, seed, rank, world_size)
    and returns a `workloads.task.Task`. Presets map a name to parameter overrides and may
    also set `batch_size` and `epochs`, the engine's own axes.
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    presets: Mapping[str, Mapping[str, Any]]
    builder: str
    checker: str | None = None  # "module:function" taking params; ValueError if the data is unusable
    preparer: str | None = None  # "module:function" behind `stbench data WORKLOAD --prepare`
    # "module:function" taking (params, batch_size, device, memory) -> a skip reason or None,
    # where memory = {"host_bytes": RAM, "device_bytes": the GPU's memory or None}
    skipper: str | None = None
    # "module:function" taking (params, batch_size) -> {"device_bytes", "host_bytes", ...}
    predictor: str | None = None
    strategies: tuple[str, ...] = ("single", "ddp")
    data_sources: tuple[str, ...] = ()
    default_preset: str = "default"
    common: tuple[Param, ...] = field(default=COMMON_PARAMS, repr=False)

    @property
    def all_params(self) -> dict[str, Param]:
        merged = {p.name: p for p in self.common}
        merged.update({p.name: p for p in self.params})  # a workload may override a common default
        return merged

    def build(self, params: dict, seed: int, rank: int = 0, world_size: int = 1):
        return _call(self.builder, params, seed, rank, world_size)

    def prepare(self, **options):
        if not self.preparer:
            raise ValueError(f"{self.name} has no data to prepare")
        return _call(self.preparer, **options)

    def skip(self, params: dict, batch_size: int, device: str, memory: dict) -> str | None:
        """Why this workload cannot run a cell here (e.g. predicted memory), or None."""
        return _call(self.skipper, params, batch_size, device, memory) if self.skipper else None

    def predict(self, params: dict, batch_size: int) -> dict | None:
        """Predicted memory of a cell, if the workload models it."""
        return _call(self.predictor, params, batch_size) if self.predictor else None

    def check(self, params: dict) -> None:
        """Cheap up-front check of the data a cell would use (runs in the parent)."""
        if self.checker:
            _call(self.checker, params)


def _call(target: str, *args, **kwargs):
    """Import "module:function" lazily (workload modules import torch) and call it."""
    module_name, func = target.split(":")
    return getattr(importlib.import_module(module_name), func)(*args, **kwargs)

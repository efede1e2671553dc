"""What a workload's build function hands the trainer, grouped by concern.

Torch-free at import (the fields hold torch objects, but this module never imports torch).
    Data    the datasets, where batches are cut, the epoch order, bytes and source
    Model   the module, its training loss and its prediction for the metric
    Metric  the quality measure, its naive baseline
    Optim   the optimizer and gradient clipping
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PLACEMENTS = ("host", "device", "sharded")


def tensor_mb(*tensors) -> float:
    """Bytes the given tensors occupy, in MiB."""
    return sum(t.element_size() * t.nelement() for t in tensors) / 2**20


@dataclass(frozen=True)
class ReadCost:
    """What reading a chunked or remote source cost the build, counted by the filesystem that
    fetched it: bytes fetched (as stored: compressed, metadata included), bytes of values the
    task kept, object reads (one request each), seconds spent reading, and seconds from
    opening the source until the first training batch could be cut."""

    bytes_read: int
    bytes_used: int
    requests: int
    read_s: float
    first_batch_s: float

    def figures(self) -> dict:
        """The row's read-cost columns (store.cell_result.Figures)."""
        return dict(
            bytes_read=self.bytes_read,
            bytes_used=self.bytes_used,
            read_amplification=self.bytes_read / self.bytes_used if self.bytes_used else None,
            read_requests=self.requests,
            first_batch_s=self.first_batch_s,
            read_mb_per_s=self.bytes_read / 1e6 / self.read_s if self.read_s > 0 else None,
        )


@dataclass(frozen=True)
class Data:
    """train/val are Datasets indexable by an int (one item) or a list of ints (a batch).

    placement: `host` (a DataLoader cuts batches on the host, they are copied to the device),
    `device` (the datasets have `.to(device)`; batches are cut where the data lives: no copies,
    no h2d), `sharded` (train already holds only this rank's part: no DistributedSampler split).
    batch_sampler: (batch_size, seed, max_steps) -> a sampler of whole batches with
    `set_epoch()`, for a workload whose epoch is not one shuffled pass (single process).
    transfer: (x, y, device) -> (x, y) as the model receives them; None: both moved with
    `.to(device, non_blocking=True)`. A model that needs a host copy of its batch (indices it
    reads host memory by) keeps it here, instead of copying it back from the device in the step.
    read: () -> what reading a chunked or remote source cost over the run (called after
    training, so that a source read while training counts); None for in-memory data.
    """

    train: Any
    val: Any
    source: str  # what was read or generated: the row's data_source
    mb: float  # MiB the data occupies: the row's data_mb
    placement: str = "host"
    batch_sampler: Callable | None = None
    transfer: Callable | None = None
    read: Callable[[], ReadCost] | None = None

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement {self.placement!r} is not one of {', '.join(PLACEMENTS)}")


def _call(module, x, y):
    return module(x)


@dataclass(frozen=True)
class Model:
    """loss(module, x, y, step) -> the 0-d training loss of a batch (step: the global
    optimizer step, for schedules such as scheduled sampling); predict(module, x, y) -> what
    the metric scores, in evaluation mode (default: module(x))."""

    module: Any
    loss: Callable
    predict: Callable = _call


class Supervised:
    """The common loss: loss_fn(module(x), y)."""

    def __init__(self, loss_fn: Callable):
        self.loss_fn = loss_fn

    def __call__(self, module, x, y, step: int):
        return self.loss_fn(module(x), y)


def _mean(total: float, count: float) -> float:
    return total / max(count, 1)


@dataclass(frozen=True)
class Metric:
    """sum(pred, y) -> a 0-d tensor, the summed error of a batch (summed on the device with no
    sync per batch); the epoch's value is finish(total, count), count summing count(y) (a number
    or a 0-d tensor, kept on the device; default len(y)). naive: the same metric for the
    workload's naive predictor: the number to beat."""

    name: str
    sum: Callable
    naive: float
    count: Callable | None = None
    finish: Callable[[float, float], float] = _mean


@dataclass(frozen=True)
class Optim:
    """factory(params, lr) -> an optimizer (None: torch.optim.Adam); gradient-norm clip."""

    factory: Callable | None = None
    clip_grad_norm: float | None = None


@dataclass(frozen=True)
class Task:
    """One built workload. flops_per_sample: forward + backward FLOPs per sample where torch's
    counter cannot see the model's main operators (None: the trainer counts them). extras:
    () -> workload-specific figures, written to the row as `x.<name>` columns."""

    data: Data
    model: Model
    metric: Metric
    optim: Optim = field(default_factory=Optim)
    flops_per_sample: float | None = None
    extras: Callable[[], dict] | None = None

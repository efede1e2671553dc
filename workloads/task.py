"""What a workload's builder hands the trainer (imports torch; only the engine's child uses it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.utils.data import Dataset


def tensor_mb(*tensors: torch.Tensor) -> float:
    """Bytes the given tensors occupy, in MiB."""
    return sum(t.element_size() * t.nelement() for t in tensors) / 2**20


@dataclass(frozen=True)
class Task:
    """Data, model and quality measure of one built workload.

    `metric_sum(pred, target)` returns the summed error of a batch (a 0-d tensor, so the
    trainer can add it up on the device without a sync per batch); the epoch's metric is
    `metric_finish(total, count)`. `naive_metric` is the same metric for the workload's naive
    predictor on the same validation data: the number the model has to beat.
    """

    train: Dataset
    val: Dataset
    model: nn.Module
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    metric_name: str
    metric_sum: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    naive_metric: float
    data_source: str
    data_mb: float
    metric_finish: Callable[[float, int], float] = lambda total, count: total / max(count, 1)
    optimizer: Callable[..., torch.optim.Optimizer] = torch.optim.Adam
    # How the model is called: (model, x, y, step) -> prediction. Seq2seq models that feed the
    # truth back during training (scheduled sampling) need y and the global step.
    forward: Callable = lambda model, x, y, step: model(x)
    metric_count: Callable[[torch.Tensor], float] | None = None  # valid targets in a batch (masked metrics)
    clip_grad_norm: float | None = None
    data_on_device: bool = False  # the datasets have .to(device): batches are cut on the device
    sharded: bool = False  # train holds only this rank's part: no further DistributedSampler split
    # Forward + backward FLOPs per sample where torch's counter cannot see the model's main
    # operators (the fused LSTM kernel); None lets the trainer count them.
    flops_per_sample: float | None = None
    # (batch_size, seed, max_steps) -> a sampler of whole batches with set_epoch(), for
    # workloads whose epoch is not one shuffled pass (STNN's decoder pass, then dynamics pass)
    batch_sampler: Callable | None = None
    # () -> extra figures for the run row at the end (relation streaming: stream_s, stream_mb)
    stats: Callable[[], dict] | None = None

"""DataLoaders for a cell: the train sampler and loader, and the rank's validation loader."""

from __future__ import annotations

import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, SequentialSampler, Subset

from ..contract import TrainerParams
from ..device import Accelerator


def make_loader(
    dataset, knobs: TrainerParams, sampler, pin: bool, batch_size: int, batched: bool = False
) -> DataLoader:
    """`vectorized` hands the dataset a whole list of indices (one tensor gather per batch);
    `per-item` indexes sample by sample and collates in Python, as most hand-written loops do.
    `batched`: the sampler already yields whole batches (a workload's own epoch order)."""
    drop_last = isinstance(sampler, DistributedSampler)  # constant train batches: honest throughput
    common = dict(
        num_workers=knobs.workers,
        pin_memory=pin,
        persistent_workers=knobs.workers > 0,
        prefetch_factor=knobs.prefetch if knobs.workers > 0 else None,
    )
    if batched:
        return DataLoader(dataset, sampler=sampler, batch_size=None, **common)
    if knobs.loader == "vectorized":
        return DataLoader(
            dataset, sampler=BatchSampler(sampler, batch_size, drop_last), batch_size=None, **common
        )
    return DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, **common
    )


class DeviceBatches:
    """Whole batches of indices as tensors on the data's device, for device-resident data.

    A batch of indices built from a Python list on a GPU is a blocking host-to-device copy
    every step; here an epoch's order is copied once (from pinned memory, asynchronously) and
    each batch is a slice of it on the device."""

    def __init__(self, order, batch_size: int, accel: Accelerator, drop_last: bool):
        self.order, self.batch_size, self.accel, self.drop_last = (
            order,
            batch_size,
            accel,
            drop_last,
        )

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.order, "set_epoch"):
            self.order.set_epoch(epoch)

    def __len__(self) -> int:
        n = len(self.order)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        order = torch.as_tensor(list(self.order), dtype=torch.long)
        order = self.accel.pin(order).to(self.accel.torch, non_blocking=True)
        for b in range(len(self)):
            yield order[b * self.batch_size : (b + 1) * self.batch_size]


def build_loaders(
    train,
    val,
    data,
    knobs: TrainerParams,
    batch_size: int,
    seed: int,
    accel: Accelerator,
    rank: int,
    world_size: int,
) -> tuple:
    """(sampler with set_epoch, train loader, validation loader of this rank's share)."""
    if data.placement == "device":
        return _device_loaders(train, val, batch_size, seed, accel, rank, world_size)
    pin = accel.pins
    if data.batch_sampler is not None:  # the workload orders its own epoch (single process)
        sampler = data.batch_sampler(batch_size, seed, knobs.max_steps)
        train_loader = make_loader(train, knobs, sampler, pin, batch_size, batched=True)
    else:
        shards = (1, 0) if data.placement == "sharded" else (world_size, rank)
        sampler = DistributedSampler(train, *shards, shuffle=True, seed=seed, drop_last=True)
        train_loader = make_loader(train, knobs, sampler, pin, batch_size)
    val_part = Subset(val, range(rank, len(val), world_size))
    return (
        sampler,
        train_loader,
        make_loader(val_part, knobs, SequentialSampler(val_part), pin, batch_size),
    )


def _device_loaders(
    train, val, batch_size: int, seed: int, accel: Accelerator, rank: int, world_size: int
) -> tuple:
    order = DistributedSampler(train, world_size, rank, shuffle=True, seed=seed, drop_last=True)
    sampler = DeviceBatches(order, batch_size, accel, drop_last=True)
    val_batches = DeviceBatches(
        range(rank, len(val), world_size), batch_size, accel, drop_last=False
    )
    return (
        sampler,
        DataLoader(train, sampler=sampler, batch_size=None),
        DataLoader(val, sampler=val_batches, batch_size=None),
    )


def compile_batches(sampler, loader: DataLoader) -> list:
    """Batches, besides the loader's first, that the warm-up and the compile pass must also run:
    one of each kind a workload's own sampler names (`first_of_each_pass`, e.g. stnn's decoder
    and dynamics passes, whose graphs differ), so that no pass first runs, and no graph
    compiles, inside a timed step."""
    kinds = getattr(sampler, "first_of_each_pass", None)
    return [loader.dataset[idx] for idx in kinds()[1:]] if kinds else []


def eval_limit(knobs: TrainerParams, batch_size: int) -> int:
    """Validation batches per evaluation (0: all): max_eval_batches, or max_eval_samples in
    batches of this cell's size (cells of different batch sizes then judge their
    quality on the same samples), the smaller where both are set."""
    by_samples = -(-knobs.max_eval_samples // batch_size) if knobs.max_eval_samples else 0
    limits = [n for n in (knobs.max_eval_batches, by_samples) if n]
    return min(limits) if limits else 0


def epochs(sampler, loader, per_epoch: int):
    """(epoch, batch) epoch after epoch, without end: each epoch's order from its sampler's
    seed, `per_epoch` batches of it. An epoch's iterator starts when its first batch is asked
    for (inside a step's data phase: the step waits for it)."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        it = iter(loader)
        for _ in range(per_epoch):
            yield epoch, next(it)
        epoch += 1

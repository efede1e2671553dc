"""DataLoaders for a cell: the train sampler and loader, and the rank's validation loader."""

from __future__ import annotations

from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, SequentialSampler, Subset

from ..contract import TrainerParams


def make_loader(dataset, knobs: TrainerParams, sampler, pin: bool, batch_size: int, batched: bool = False) -> DataLoader:
    """`vectorized` hands the dataset a whole list of indices (one tensor gather per batch);
    `per-item` indexes sample by sample and collates in Python, as most hand-written loops do.
    `batched`: the sampler already yields whole batches (a workload's own epoch order)."""
    drop_last = isinstance(sampler, DistributedSampler)  # constant train batches: honest throughput
    common = dict(num_workers=knobs.workers, pin_memory=pin, persistent_workers=knobs.workers > 0)
    if batched:
        return DataLoader(dataset, sampler=sampler, batch_size=None, **common)
    if knobs.loader == "vectorized":
        return DataLoader(dataset, sampler=BatchSampler(sampler, batch_size, drop_last), batch_size=None, **common)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last, **common)


def build_loaders(train, val, data, knobs: TrainerParams, batch_size: int, seed: int, pin: bool, rank: int,
                  world_size: int) -> tuple:
    """(sampler with set_epoch, train loader, validation loader of this rank's share)."""
    if data.batch_sampler is not None:  # the workload orders its own epoch (single process)
        sampler = data.batch_sampler(batch_size, seed, knobs.max_steps)
        train_loader = make_loader(train, knobs, sampler, pin, batch_size, batched=True)
    else:
        shards = (1, 0) if data.placement == "sharded" else (world_size, rank)
        sampler = DistributedSampler(train, *shards, shuffle=True, seed=seed, drop_last=True)
        train_loader = make_loader(train, knobs, sampler, pin, batch_size)
    val_part = Subset(val, range(rank, len(val), world_size))
    return sampler, train_loader, make_loader(val_part, knobs, SequentialSampler(val_part), pin, batch_size)

"""The (t, i) pairs of STNN's two passes and the held-out months, as datasets."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from .sizing import index_bytes


class PairData(Dataset):
    """Index k < n_dec is the decoder pair (t, i) = divmod(k, n) with its observation; the
    rest are the dynamics pairs t -> t+1, whose y is (B, 0): nothing observed to fit."""

    def __init__(self, series: torch.Tensor, n: int):
        self.series, self.n = series.contiguous(), n  # (t_train, n, nd), normalized
        t_train = series.shape[0]
        self.n_dec, self.n_dyn = t_train * n, (t_train - 1) * n

    def __len__(self) -> int:
        return self.n_dec + self.n_dyn

    def __getitem__(self, idx):
        idx = torch.as_tensor(idx).long()  # the sampler's int32 order, widened per batch only
        if idx[0] < self.n_dec:
            t, i = idx // self.n, idx % self.n
            return torch.stack([t, i], 1), self.series[t, i]
        k = idx - self.n_dec
        return torch.stack([k // self.n, k % self.n], 1), self.series.new_empty(len(k), 0)


class TwoPassSampler:
    """Each epoch: every decoder pair in shuffled batches, then every dynamics pair (the
    original's two passes). Incomplete last batches are dropped, so every step is a full batch.

    With max_steps (a scale study's short epoch) both passes are cut in proportion, so the
    measured steps mix decoder and dynamics batches as a whole epoch does.

    A pass's order is one permutation of its t*n pairs (1.4 GB at the 0.25-degree globe), so
    it is int32 wherever the pair numbers fit (randperm draws the same order in either dtype)
    and only one pass's order is alive at a time."""

    def __init__(self, n_dec: int, n_dyn: int, batch_size: int, seed: int, max_steps: int = 0):
        if batch_size > n_dyn:
            raise ValueError(f"batch size {batch_size} exceeds the {n_dyn} dynamics pairs")
        self.n_dec, self.n_dyn, self.batch_size, self.seed, self.epoch = (
            n_dec,
            n_dyn,
            batch_size,
            seed,
            0,
        )
        self.batches = [n_dec // batch_size, n_dyn // batch_size]
        total = sum(self.batches)
        if 0 < max_steps < total:
            dec = min(max(round(max_steps * self.batches[0] / total), 0), max_steps - 1)
            self.batches = [dec, max_steps - dec]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return sum(self.batches)

    def first_of_each_pass(self) -> list[torch.Tensor]:
        """A batch of the decoder pass and one of the dynamics pass: their graphs differ, so the
        untimed warm-up runs both (the dynamics pass, offload's staging buffers and copy stream
        would otherwise first run in a timed step) and a compiled model compiles both, before
        the clock starts."""
        return [
            torch.arange(offset, offset + self.batch_size)
            for offset, batches in ((0, self.batches[0]), (self.n_dec, self.batches[1]))
            if batches
        ]

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        dtype = torch.int32 if index_bytes(self.n_dec + self.n_dyn) == 4 else torch.int64
        for offset, count, batches in (
            (0, self.n_dec, self.batches[0]),
            (self.n_dec, self.n_dyn, self.batches[1]),
        ):
            perm = None  # the last pass's order is freed before this one's is drawn
            perm = torch.randperm(count, generator=g, dtype=dtype)
            if offset:
                perm += offset
            for b in range(batches):
                # a copy: a batch kept by the loader must not keep the whole order alive
                yield perm[b * self.batch_size : (b + 1) * self.batch_size].clone()


class ForecastSet(Dataset):
    """Item k: forecast step k + 1 and the observed month it is scored against."""

    def __init__(self, truth: torch.Tensor):
        self.truth = truth  # (horizon, n, nd), the data's units

    def __len__(self) -> int:
        return len(self.truth)

    def __getitem__(self, idx):
        idx = torch.as_tensor(idx)
        return idx + 1, self.truth[idx]

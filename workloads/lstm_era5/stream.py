"""`read=stream`: lstm-era5's training windows read from the store batch by batch, for the
data-loading study (what a source's layout costs while training, where the loader's workers and
prefetch can hide it or not), instead of the whole selection read before training.

Each batch reads the hours its windows cover at its series' grid points, one orthogonal zarr
read (zarr fetches the chunks holding them, concurrently): on ARCO's layout one whole-globe
chunk per hour, on a time-major copy a few chunks of many hours. A DataLoader worker opens its
own store (after the fork) and counts its reads into counters shared with the cell's process.
The z-score uses the statistics of the first week of training hours (read before training);
the test hours are read before training, as with `read=memory`.
"""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import torch
from torch.utils.data import Dataset

from stbench.contract import BuildContext, ReadCost

from . import data, remote, split

BYTES, READS, READ_S, USED, FIRST = range(5)  # the shared counters


class StoreWindows(Dataset):
    """The windows `task.Windows` cuts, read from the store when asked for: index k is series
    k // per_series, start k % per_series, as there; an int gives one item, a list a batch."""

    def __init__(
        self,
        source: str,
        hours: tuple[int, int],
        ilat: list,
        ilon: list,
        window: int,
        mean: float,
        std: float,
        opened: float,
    ):
        self.source, (self.i0, self.i1), self.window = source, hours, window
        self.ilat, self.ilon, self.mean, self.std, self.opened = ilat, ilon, mean, std, opened
        self.per_series = self.i1 - self.i0 - window
        if self.per_series < 1:
            raise ValueError(
                f"{self.i1 - self.i0} time steps are too few for a {window}-step window"
            )
        self.counts = multiprocessing.Array("d", 5)  # inherited by forked DataLoader workers
        self._pid, self._array, self._meter = None, None, None

    def __len__(self) -> int:
        return self.per_series * len(self.ilat)

    def _open(self):
        if self._pid != os.getpid():  # a worker forked after the parent opened its own
            import zarr

            self._meter = remote.Meter()
            self._array = zarr.open_array(
                remote.open_store(self.source, self._meter), path=data.VAR, mode="r"
            )
            self._pid = os.getpid()
        return self._array

    def __getitem__(self, index):
        idx = np.atleast_1d(np.asarray(index))
        s, t = idx // self.per_series, idx % self.per_series
        # each window's hours, from the selection's first
        span = t[:, None] + np.arange(self.window + 1)
        hours = np.unique(span)
        lats, lons = np.unique(np.take(self.ilat, s)), np.unique(np.take(self.ilon, s))
        array = self._open()
        before, t0 = (self._meter.bytes, self._meter.reads), time.perf_counter()
        block = array.oindex[
            hours + self.i0, lats, lons
        ]  # (hours, lats, lons): the chunks that hold them
        read_s = time.perf_counter() - t0
        rows = np.searchsorted(hours, span)
        cols_lat = np.searchsorted(lats, np.take(self.ilat, s))[:, None]
        cols_lon = np.searchsorted(lons, np.take(self.ilon, s))[:, None]
        z = torch.from_numpy(
            ((block[rows, cols_lat, cols_lon] - self.mean) / self.std).astype(np.float32)
        )
        self._count(
            self._meter.bytes - before[0], self._meter.reads - before[1], read_s, z.nelement() * 4
        )
        x, y = z[:, : self.window, None].contiguous(), z[:, self.window, None].contiguous()
        return (x[0], y[0]) if np.ndim(index) == 0 else (x, y)

    def _count(self, nbytes: int, reads: int, read_s: float, used: int) -> None:
        with self.counts.get_lock():
            c = self.counts
            c[BYTES], c[READS], c[READ_S], c[USED] = (
                c[BYTES] + nbytes,
                c[READS] + reads,
                c[READ_S] + read_s,
                c[USED] + used,
            )
            if not c[FIRST]:
                c[FIRST] = time.time()  # the wall clock: comparable between processes


def stream_split(params: dict, ctx: BuildContext):
    """(train StoreWindows, test values, z-score mean and std, what was selected, read cost)."""
    meter = remote.Meter()
    opened = time.time()
    ds, p, how = split._open(params, ctx, meter)
    if not split.is_zarr(p["data"]):
        raise ValueError(
            f"read=stream reads a zarr store; data={p['data']} is not one (use read=memory)"
        )
    sel, coords = data.selection(ds, p["points"], p["grid"], p["train_start"], p["train_end"])
    i0, i1, ilat, ilon = data.indices(ds, sel, coords)
    week = np.asarray(sel.isel(time=slice(0, data.READ_HOURS)).values, dtype=np.float32)
    _, test, _ = data.select(ds, p["points"], p["grid"], p["test_start"], p["test_end"])
    built = (
        meter.bytes,
        meter.reads,
        time.perf_counter() - meter.opened,
        week.nbytes + test.nbytes,
    )
    train = StoreWindows(
        _source(p, ctx),
        (i0, i1),
        ilat,
        ilon,
        params["window"],
        float(week.mean()),
        float(week.std()),
        opened,
    )
    note = (
        f"{p['data']}: {len(coords)} series streamed from the store; "
        f"train {p['train_start']}..{p['train_end']}, "
        f"test {p['test_start']}..{p['test_end']} ({how})"
    )

    def read() -> ReadCost:
        c = train.counts
        first = c[FIRST] - opened if c[FIRST] else 0.0
        return ReadCost(
            int(built[0] + c[BYTES]),
            int(built[3] + c[USED]),
            int(built[1] + c[READS]),
            built[2] + c[READ_S],
            first,
        )

    return train, test, float(week.mean()), float(week.std()), note, read


def _source(p: dict, ctx: BuildContext) -> str:
    return (
        split._generated_store(p, ctx)
        if p["data"] == "generated"
        else (data.ARCO_URL if p["data"] == "arco" else p["data"])
    )

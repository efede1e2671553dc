"""LSTM on ERA5 2 m temperature: windows of 24 hours -> the next hour."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from ..task import Task, tensor_mb
from . import data


class LSTMRegressor(nn.Module):
    def __init__(self, hidden: int = 64, layers: int = 2):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class Windows(Dataset):
    """Windows cut from one (time, series) tensor; no window crosses from one series into another.

    Index k is series k // per_series, start k % per_series. An int index builds the two
    tensors of one item in Python (the study's per-item Dataset); a list of indices gathers
    a whole batch with one indexed read (the vectorized path). Both give the same numbers.
    """

    def __init__(self, series: torch.Tensor, window: int, horizon: int = 1):
        self.series, self.window, self.horizon = series, window, horizon
        self.per_series = series.shape[0] - window - horizon + 1
        if self.per_series < 1:
            raise ValueError(f"{series.shape[0]} time steps are too few for a {window}-step window")
        self.offsets = torch.arange(window)

    def __len__(self) -> int:
        return self.per_series * self.series.shape[1]

    def __getitem__(self, index):
        if isinstance(index, int):
            s, t = divmod(index, self.per_series)
            x = torch.tensor([[float(v)] for v in self.series[t:t + self.window, s]])
            y = torch.tensor([float(self.series[t + self.window + self.horizon - 1, s])])
            return x, y
        idx = torch.as_tensor(index)
        s, t = idx // self.per_series, idx % self.per_series
        x = self.series[t[:, None] + self.offsets, s[:, None]].unsqueeze(-1)
        y = self.series[t + self.window + self.horizon - 1, s].unsqueeze(-1)
        return x, y


def lstm_flops(window: int, hidden: int, layers: int) -> float:
    """Forward + backward FLOPs of one window: 4 gates x (inputs + hidden) x hidden
    multiply-adds per step and layer, the head once; backward taken as twice forward."""
    forward = sum(4 * ((1 if i == 0 else hidden) + hidden) * hidden * 2 for i in range(layers)) * window
    return 3.0 * (forward + 2 * hidden)


def _generated_store(params: dict, seed: int) -> str:
    """A cached ERA5-schema zarr store for data=generated, read back through the zarr path."""
    from stbench_cli.envinfo import cache_dir

    lat0, lat1, lon0, lon1 = data.parse_box(params["grid"] or "20:40:280:280.25")
    lats = np.arange(lat1, lat0 - 1e-6, -0.25)
    lons = np.arange(lon0, lon1 + 1e-6, 0.25)
    key = f"{lat0}:{lat1}:{lon0}:{lon1}:{params['train_start']}:{params['test_end']}:{seed}"
    path = cache_dir() / "data" / f"era5-generated-{hashlib.sha1(key.encode()).hexdigest()[:10]}.zarr"
    if not (path / ".zmetadata").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        data.generate(path, lats, lons, params["train_start"], params["test_end"], seed)
    return str(path)


def load_split(params: dict, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list]:
    """(train values, test values, coords), both (time, series) in kelvin."""
    source = _generated_store(params, seed) if params["data"] == "generated" else params["data"]
    ds = data.open_dataset(source)
    _, train, coords = data.select(ds, params["points"], params["grid"], params["train_start"], params["train_end"])
    _, test, _ = data.select(ds, params["points"], params["grid"], params["test_start"], params["test_end"])
    return train, test, coords


def check(params: dict) -> None:
    """Parent-side check: open the source and validate the selection without reading values
    (the cell reads them once; for a remote store, reading twice would fetch twice)."""
    if params["data"] == "generated":
        return
    ds = data.open_dataset(params["data"])
    for start, end in ((params["train_start"], params["train_end"]), (params["test_start"], params["test_end"])):
        data.selection(ds, params["points"], params["grid"], start, end)


def build(params: dict, seed: int, rank: int = 0, world_size: int = 1) -> Task:
    train_k, test_k, coords = load_split(params, seed)
    mean, std = float(train_k.mean()), float(train_k.std())  # z-score with training statistics only
    train = Windows(torch.from_numpy((train_k - mean) / std), params["window"])
    test = Windows(torch.from_numpy((test_k - mean) / std), params["window"])
    x_last, y = test[list(range(len(test)))]
    persistence = float(((x_last[:, -1] - y) ** 2).mean().sqrt()) * std  # the last hour, repeated
    torch.manual_seed(seed)
    return Task(
        train=train, val=test, model=LSTMRegressor(params["hidden"], params["layers"]),
        loss_fn=nn.functional.mse_loss, metric_name="test_rmse_k",
        metric_sum=lambda pred, target: ((pred - target) ** 2).sum(),
        metric_finish=lambda total, count: (total / max(count, 1)) ** 0.5 * std,
        naive_metric=persistence, data_source=f"{params['data']}:{len(coords)} series",
        data_mb=tensor_mb(train.series, test.series),
        flops_per_sample=lstm_flops(params["window"], params["hidden"], params["layers"]),
    )


def prepare(source: str, out: Path, points: str, grid: str, start: str, end: str) -> Path:
    """Cache a selection of any source as a local ERA5-schema zarr store."""
    import xarray as xr

    ds = data.open_dataset(source)
    times, values, coords = data.select(ds, points, grid, start, end)
    lats = sorted({a for a, _ in coords}, reverse=True)
    lons = sorted({b for _, b in coords})
    cube = np.full((len(times), len(lats), len(lons)), np.nan, np.float32)
    for j, (a, b) in enumerate(coords):
        cube[:, lats.index(a), lons.index(b)] = values[:, j]
    xr.Dataset({data.VAR: (("time", "latitude", "longitude"), cube, {"units": "K"})},
               coords={"time": times, "latitude": np.float32(lats), "longitude": np.float32(lons)}
               ).chunk({"time": 24 * 31}).to_zarr(out, mode="w", consolidated=True, zarr_format=2)
    return out

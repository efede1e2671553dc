"""Traffic speeds: PeMS/METR-LA HDF5, the chickenpox series, a generator on any graph, and
windows that are either materialized (`base`) or cut by index at batch time (`index`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

STEP_MINUTES = 5


def read_speed_h5(path: str | Path, ids: list[str], stop: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(speeds (time, sensors) float32 in the graph's sensor order, times) from a DCRNN
    speed file: pandas HDF5, key `speed`, integer sensor-id columns, zeros for missing.
    `stop` reads only the first rows (enough to check the layout)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"speed file {p} does not exist; give a pandas HDF5 file with key 'speed' (e.g. pems-bay.h5)")
    try:
        df = pd.read_hdf(p, key="speed", stop=stop)
    except (KeyError, ValueError, OSError, TypeError) as exc:
        raise ValueError(f"speed file {p} is not a pandas HDF5 table with key 'speed' ({exc})") from None
    columns = {str(c): c for c in df.columns}  # the h5 has integer ids, the pickle strings
    missing = [i for i in ids if i not in columns]
    if missing:
        raise ValueError(f"speed file {p} lacks {len(missing)} of the graph's sensors (e.g. {missing[0]})")
    values = df[[columns[i] for i in ids]].to_numpy(np.float32)
    return values, df.index.to_numpy()


def load_chickenpox(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(cases (weeks, counties), adjacency) from PyTorch Geometric Temporal's chickenpox.json."""
    d = json.loads(Path(path).read_text())
    x = np.asarray(d["FX"], np.float32)
    adj = np.zeros((x.shape[1], x.shape[1]), np.float32)
    for a, b in d["edges"]:
        adj[a, b] = 1.0
    return x, adj


def generate_speeds(adj: np.ndarray, steps: int, seed: int, chunk: int = 4096) -> np.ndarray:
    """Speeds (steps, sensors) in mph on a graph: daily and weekly profiles, congestion that
    starts at random incidents and spreads to neighbouring sensors over the next steps,
    sensor noise, and missing readings (zeros: short outages of single sensors).

    Built in chunks of time into one float32 array: at 11 k sensors x 52 k steps, whole-array
    float64 temporaries would need several times the 2.3 GB result.
    """
    from scipy import sparse

    rng = np.random.default_rng(seed)
    n = adj.shape[0]
    walk = sparse.csr_matrix(adj / np.maximum(adj.sum(axis=1, keepdims=True), 1e-9))
    exposure = rng.uniform(0.5, 1.5, n)  # some sensors sit on busier roads
    free_flow = rng.uniform(60, 70, n)
    speed = np.empty((steps, n), np.float32)
    c = np.zeros(n)
    for lo in range(0, steps, chunk):
        t = np.arange(lo, min(lo + chunk, steps))
        minute = (t * STEP_MINUTES) % (24 * 60)
        weekday = ((t * STEP_MINUTES) // (24 * 60)) % 7 < 5
        rush = np.exp(-((minute - 8 * 60) / 50.0) ** 2) + np.exp(-((minute - 17.5 * 60) / 70.0) ** 2)
        profile = 1.0 - 0.35 * rush * np.where(weekday, 1.0, 0.3)
        incidents = rng.random((len(t), n)) < 2e-4 * (0.5 + rush[:, None]) * exposure
        congestion = np.empty((len(t), n), np.float32)
        for i in range(len(t)):  # congestion decays and spreads upstream along edges
            c = 0.93 * c + 0.06 * (walk @ c) + incidents[i] * rng.uniform(0.3, 0.6, n)
            congestion[i] = c
        s = (free_flow * profile[:, None] ** exposure).astype(np.float32) * np.clip(1.0 - congestion, 0.15, 1.0)
        s *= 1.0 + 0.03 * rng.standard_normal((len(t), n), dtype=np.float32)
        outage = rng.random((len(t), n), dtype=np.float32) < 1e-3
        for lag in range(1, 6):  # outages last up to half an hour
            outage[lag:] |= outage[:-lag] & (rng.random((len(t) - lag, n), dtype=np.float32) < 0.7)
        speed[lo:lo + len(t)] = np.where(outage, 0.0, np.maximum(s, 1.0))
    return speed


class IndexWindows(Dataset):
    """Windows cut by index from the one raw copy of the series: window k is steps
    k..k+in_steps-1 in (z-scored speed and time of day, computed per batch) and the
    following `horizon` steps out (speed in mph, zeros = missing). The series may live on
    any device; nothing but the raw speeds (time, sensors) and the time of day is stored."""

    def __init__(self, speed: torch.Tensor, tod: torch.Tensor, mean: float, std: float, in_steps: int = 12,
                 horizon: int = 12, first: int = 0, count: int | None = None):
        self.speed, self.tod, self.mean, self.std = speed, tod, mean, std
        self.in_steps, self.horizon, self.first = in_steps, horizon, first
        self.count = count if count is not None else speed.shape[0] - in_steps - horizon + 1 - first
        self.in_off = torch.arange(in_steps, device=speed.device)
        self.out_off = torch.arange(in_steps, in_steps + horizon, device=speed.device)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):
        single = isinstance(index, int)
        start = torch.as_tensor([index] if single else index, device=self.speed.device) + self.first
        rows_in = start[:, None] + self.in_off
        s_in = self.speed[rows_in]
        tod = self.tod[rows_in][..., None].expand_as(s_in)
        x = torch.stack([(s_in - self.mean) / self.std, tod], dim=-1)
        y = self.speed[start[:, None] + self.out_off].unsqueeze(-1)
        return (x[0], y[0]) if single else (x, y)

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.speed, self.tod

    def to(self, device) -> "IndexWindows":
        return IndexWindows(self.speed.to(device), self.tod.to(device), self.mean, self.std, self.in_steps,
                            self.horizon, self.first, self.count)


def materialize(w: IndexWindows):
    """DCRNN's own preprocessing: every overlapping window stored, inputs and targets."""
    from torch.utils.data import TensorDataset

    x, y = w[list(range(len(w)))]
    return TensorDataset(x.contiguous(), y.contiguous())

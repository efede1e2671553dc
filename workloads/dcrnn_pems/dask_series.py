"""`batching=dask-index`: the series as a Dask array persisted across a Dask cluster's workers,
each rank index-batching from its part (the seed's, the index-batching study's lazy
index-batching: its `IndexDataset(..., lazy=True)` over a Dask array of the series).

- The cluster is the one Dask's configuration names (DASK_SCHEDULER_ADDRESS, which stbench's
  dask launcher sets for every rank): `distributed.Client()` finds it as it always does.
- The series is made on a worker (`source.load_series`, a task), never in a rank: the rank only
  ever holds the batches it cut. The training rows are cut into one chunk per rank, chunk i
  persisted on the i-th worker by address (the dask launcher's order: rank i runs there), and
  the rows after them (validation, test) into one chunk per worker too, so every worker holds
  the same share. Every rank builds the same graph under the same keys: the scheduler makes
  each chunk once, and every rank's client keeps it until that rank ends.
- A batch of windows is one fetch of the rows they touch (`speed[rows]` computed by the rank's
  client, from its own worker but for the span at its part's end), cut as IndexWindows cuts
  them: the same values, so the same training as `sharded-index`, which splits the windows the
  same way.
- The data memory per rank (`data_mb`) is what its worker holds of the series (Dask's own
  count of the chunks' bytes on it), as each rank of sharded-index holds its part; the rank's
  process holds a batch at a time. `x.dask_cluster_mb` is the whole series across the cluster.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch
from torch.utils.data import Dataset

from .source import STEP_MINUTES, historical_average_mae, load_series

NO_CLUSTER = (
    "batching=dask-index reads its series from a Dask cluster: run the study with "
    "--launcher dask (or with DASK_SCHEDULER_ADDRESS naming a scheduler)"
)


def client():
    """This rank's client of the cluster Dask's configuration names."""
    import dask
    from distributed import Client

    if not dask.config.get("scheduler-address", None):
        raise RuntimeError(NO_CLUSTER)
    return Client()  # the process's default client too: distributed.wait and compute use it


def _speeds(params: dict, seed: int) -> np.ndarray:
    """The whole series, made on a worker."""
    return np.ascontiguousarray(load_series(params, seed)[0], dtype=np.float32)


def _stats(speeds: np.ndarray, params: dict) -> dict:
    """What a rank needs of the whole series, computed where it lives (make_task's split and
    training statistics, the historical-average baseline)."""
    t = speeds.shape[0]
    n_windows = t - params["in_steps"] - params["horizon"] + 1
    n_train, n_val = int(round(n_windows * 0.7)), int(round(n_windows * 0.1))
    train_rows = speeds[: n_train + params["in_steps"]]
    observed = train_rows[train_rows != 0]
    return {
        "steps": t,
        "sensors": speeds.shape[1],
        "n_train": n_train,
        "n_val": n_val,
        "mean": float(observed.mean()),
        "std": float(observed.std()),
        "naive": historical_average_mae(speeds, n_train, n_val, params),
    }


def _rows(speeds: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return speeds[lo:hi].copy()


def bounds(steps: int, n_train: int, world: int) -> list[tuple[int, int, int]]:
    """(first row, end row, worker index) of each chunk: rank i's training part (the rows of its
    windows' starts, as sharded-index splits them) on worker i, then the rows after the parts
    in `world` pieces, one a worker."""
    per_rank = n_train // world
    parts = [(i * per_rank, (i + 1) * per_rank, i) for i in range(world)]
    edges = np.linspace(world * per_rank, steps, world + 1).round().astype(int)
    return parts + [(int(a), int(b), i) for i, (a, b) in enumerate(zip(edges, edges[1:])) if b > a]


class Series:
    """The persisted series of one cell: its Dask array, its statistics, where its chunks are."""

    def __init__(self, params: dict, seed: int, world: int, rank: int):
        import dask
        import dask.array as da

        self.client = client()
        keep = {k: params[k] for k in ("data", "graph", "size", "steps", "in_steps", "horizon")}
        token = hashlib.sha1(json.dumps([keep, seed, world], sort_keys=True).encode()).hexdigest()
        whole = self.client.persist(
            dask.delayed(_speeds)(keep, seed, dask_key_name=f"dcrnn-series-{token}")
        )
        self.stats = self.client.compute(
            dask.delayed(_stats)(whole, keep, dask_key_name=f"dcrnn-stats-{token}")
        ).result()
        workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
        if len(workers) < world:
            raise RuntimeError(f"dask-index: {world} ranks, {len(workers)} Dask workers")
        self.worker = workers[rank]
        chunks = []
        for i, (lo, hi, w) in enumerate(bounds(self.stats["steps"], self.stats["n_train"], world)):
            rows = dask.delayed(_rows)(whole, lo, hi, dask_key_name=f"dcrnn-rows-{token}-{i}")
            chunk = da.from_delayed(rows, (hi - lo, self.stats["sensors"]), np.float32)
            chunks.append(self.client.persist(chunk, workers=[workers[w]]))
        self.speed = da.concatenate(chunks, axis=0)
        from distributed import wait

        wait(chunks)
        del whole  # the chunks hold the series now; the whole one is released
        self._where = self.client.who_has(chunks)
        self._bytes = self.client.nbytes(summary=False)

    def mb(self, worker: str | None = None) -> float:
        """MiB of the series on one worker (None: on the whole cluster), as Dask counts them."""
        keys = [k for k, on in self._where.items() if worker is None or worker in on]
        return sum(self._bytes.get(k, 0) for k in keys) / 2**20


class DaskWindows(Dataset):
    """Windows cut by index from the persisted series: the same windows as IndexWindows, each
    batch fetched as the rows its windows touch."""

    def __init__(self, series: Series, mean: float, std: float, params: dict, first: int, count):
        self.series, self.mean, self.std = series, mean, std
        self.in_steps, self.horizon = params["in_steps"], params["horizon"]
        self.first, self.count = first, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):
        single = isinstance(index, int)
        index = index.cpu().numpy() if torch.is_tensor(index) else index
        rows = np.atleast_1d(np.asarray(index, dtype=np.int64))[:, None] + self.first
        rows = rows + np.arange(self.in_steps + self.horizon)
        need = np.unique(rows)
        block = self.series.client.compute(self.series.speed[need], sync=True)
        s = torch.from_numpy(np.ascontiguousarray(block))[
            torch.from_numpy(np.searchsorted(need, rows))
        ]
        s_in, y = s[:, : self.in_steps], s[:, self.in_steps :].unsqueeze(-1)
        day = 24 * 60
        tod = torch.from_numpy(
            ((rows[:, : self.in_steps] * STEP_MINUTES) % day / float(day)).astype(np.float32)
        )
        x = torch.stack([(s_in - self.mean) / self.std, tod[..., None].expand_as(s_in)], dim=-1)
        return (x[0], y[0]) if single else (x, y)

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return ()  # nothing of the series lives in the rank (Series.mb: on its worker)

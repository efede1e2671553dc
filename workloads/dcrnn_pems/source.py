"""Traffic data without torch: PeMS/METR-LA HDF5 speed tables, the chickenpox series, a
generator of speeds on any graph, the sensor graph a cell uses, the parent-side check and
the historical-average baseline."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

from stbench.contract import kept_arrays, require

from . import graph

STEP_MINUTES = 5


def read_speed_h5(
    path: str | Path, ids: list[str], stop: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(speeds (time, sensors) float32 in the graph's sensor order, times) from a DCRNN
    speed file: pandas HDF5, key `speed`, integer sensor-id columns, zeros for missing.
    `stop` reads only the first rows (enough to check the layout)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ValueError(
            f"speed file {p} does not exist; give a pandas HDF5 file with key 'speed' "
            "(e.g. pems-bay.h5)"
        )
    require("tables", f"speed file {p} (pandas HDF5)", ValueError)
    try:
        df = pd.read_hdf(p, key="speed", stop=stop)
    except (KeyError, ValueError, OSError, TypeError) as exc:
        raise ValueError(
            f"speed file {p} is not a pandas HDF5 table with key 'speed' ({exc})"
        ) from None
    columns = {str(c): c for c in df.columns}  # the h5 has integer ids, the pickle strings
    missing = [i for i in ids if i not in columns]
    if missing:
        raise ValueError(
            f"speed file {p} lacks {len(missing)} of the graph's sensors (e.g. {missing[0]})"
        )
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


# Calibrated against the real PeMS-BAY (325 sensors x 52,116 five-minute steps, Jan-Jun 2017) as
# DCRNN (Li et al., ICLR 2018, Table 1) and its speed table describe it: speeds of mean 62.6 and
# std 9.6 mph; historical average (per sensor and time of week) MAE 2.88 mph at every horizon;
# ARIMA, a model of the recent past alone, 1.62 / 2.33 / 3.38 at 15 / 30 / 60 minutes, and
# DCRNN 1.38 / 1.74 / 2.07. What makes that shape is traffic a weekly average cannot know but
# the last readings reveal: rush hours that vary day to day in depth and onset, incidents, and
# slow drifts. At the default size (seed 0) the generator gives mean 62.6, std 9.6, HA MAE 2.89
# and persistence (the last reading) MAE 1.19 / 1.63 / 2.35 / 3.77 at 5 / 15 / 30 / 60 minutes.
FREE_FLOW = (66.3, 3.0)  # mph: mean and regional spread of uncongested speed
RUSH = ((8 * 60, 70.0), (17.5 * 60, 90.0))  # minute of the day and half-width of the two peaks
RUSH_DEPTH = 0.7  # deepest recurrent slowdown (fraction of free flow) at the worst bottlenecks
WEEKEND = 0.15  # weekend rush hours, relative to weekdays
DAY_INTENSITY = (0.5, 0.25)  # lognormal sigma of a day's rush depth: regional, per sensor
DAY_SHIFT = (30.0, 8.0)  # minutes a day's rush starts early or late: regional, per sensor
DRIFT = (0.95, 0.012)  # slow AR(1) speed drift: coefficient per step, stationary std (fraction)
NOISE = 0.015  # sensor noise per reading (fraction)
INCIDENT_RATE = 2e-4  # incidents per sensor and step, at off-peak traffic and average exposure
OUTAGE_RATE = 2e-4  # sensor outages start per sensor and step (readings of 0: missing)


def _walk(a: np.ndarray):
    """Row-normalised adjacency as a sparse matrix: one step of a random walk."""
    from scipy import sparse

    return sparse.csr_matrix(a / np.maximum(a.sum(axis=1, keepdims=True), 1e-9))


def _field(rng: np.random.Generator, walk, rows: int, hops: int) -> np.ndarray:
    """(rows, sensors) standard-normal values smoothed over the graph for `hops` steps, then
    standardised per row: neighbouring sensors share their road's conditions."""
    z = rng.standard_normal((walk.shape[0], rows))
    for _ in range(hops):
        z = 0.5 * z + 0.5 * (walk @ z)
    z = z.T
    return (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)


def _rush_days(rng: np.random.Generator, near, n_days: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per rush peak: (depth (days, sensors) as a fraction of free flow, onset shift in minutes).
    A sensor's usual depth is regional and heavy-tailed (most roads flow, a few bottlenecks
    jam); each day scales it and moves its onset, so yesterday's rush hour is a rough guide."""
    peaks = []
    for _ in RUSH:
        usual = RUSH_DEPTH / (1 + np.exp(-2.5 * _field(rng, near, 1, 3)[0]))
        (reg, loc), (sreg, sloc) = DAY_INTENSITY, DAY_SHIFT
        log = reg * _field(rng, near, n_days, 4) + loc * rng.standard_normal((n_days, len(usual)))
        shift = sreg * _field(rng, near, n_days, 4) + sloc * rng.standard_normal(
            (n_days, len(usual))
        )
        peaks.append(
            (
                (usual * np.exp(log - (reg**2 + loc**2) / 2)).astype(np.float32),
                shift.astype(np.float32),
            )
        )
    return peaks


def _recurrent(peaks, t: np.ndarray) -> np.ndarray:
    """(steps, sensors) fraction of free flow lost to rush hours at steps t."""
    minute = (t * STEP_MINUTES) % (24 * 60)
    day = (t * STEP_MINUTES) // (24 * 60)
    week = np.where(day % 7 < 5, 1.0, WEEKEND)[:, None]
    drop = np.zeros((len(t), len(peaks[0][0][0])), np.float32)
    for (centre, width), (depth, shift) in zip(RUSH, peaks):
        x = np.abs((minute[:, None] - centre - shift[day]) / width, dtype=np.float32)
        drop += depth[day] * np.exp(-x * x * np.sqrt(x))  # |x|^2.5: a flatter top than a Gaussian's
    return np.clip(week * drop, 0.0, 0.9, dtype=np.float32)


def generate_speeds(adj: np.ndarray, steps: int, seed: int, chunk: int = 4096) -> np.ndarray:
    """Speeds (steps, sensors) in mph on a graph: free flow per road, rush hours whose depth and
    onset vary day to day, congestion that starts at random incidents and spreads upstream,
    a slow drift, sensor noise, and missing readings (zeros: short outages of single sensors).

    Built in chunks of time into one float32 array: at 11 k sensors x 52 k steps, whole-array
    float64 temporaries would need several times the 2.3 GB result.
    """
    from scipy import signal

    rng = np.random.default_rng(seed)
    n = adj.shape[0]
    near, upstream = _walk(adj + adj.T), _walk(adj)
    free_flow = np.clip(FREE_FLOW[0] + FREE_FLOW[1] * _field(rng, near, 1, 2)[0], 55.0, 75.0)
    peaks = _rush_days(rng, near, steps * STEP_MINUTES // (24 * 60) + 1)
    exposure = rng.uniform(0.5, 1.5, n)  # some sensors sit on busier roads: more incidents
    rho, drift_sd = DRIFT
    speed = np.empty((steps, n), np.float32)
    c, drift = np.zeros(n), np.zeros((1, n))
    for lo in range(0, steps, chunk):
        t = np.arange(lo, min(lo + chunk, steps))
        minute = (t * STEP_MINUTES) % (24 * 60)
        rush = np.exp(-(((minute - 8 * 60) / 50.0) ** 2)) + np.exp(
            -(((minute - 17.5 * 60) / 70.0) ** 2)
        )
        incidents = rng.random((len(t), n)) < INCIDENT_RATE * (0.5 + rush[:, None]) * exposure
        congestion = np.empty((len(t), n), np.float32)
        for i in range(len(t)):  # congestion decays and spreads upstream along edges
            c = 0.93 * c + 0.06 * (upstream @ c) + incidents[i] * rng.uniform(0.3, 0.6, n)
            congestion[i] = c
        kick = rng.standard_normal((len(t), n), dtype=np.float32) * (drift_sd * np.sqrt(1 - rho**2))
        slow, drift = signal.lfilter([1.0], [1.0, -rho], kick, axis=0, zi=drift)
        s = (free_flow * (1.0 - _recurrent(peaks, t))).astype(np.float32) * np.clip(
            1.0 - congestion, 0.15, 1.0
        )
        s *= (1.0 + slow) * (1.0 + NOISE * rng.standard_normal((len(t), n), dtype=np.float32))
        speed[lo : lo + len(t)] = np.where(_outages(rng, (len(t), n)), 0.0, np.maximum(s, 1.0))
    return speed


def _outages(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Missing readings: outages start at random and last up to half an hour."""
    outage = rng.random(shape, dtype=np.float32) < OUTAGE_RATE
    for lag in range(1, 6):
        outage[lag:] |= outage[:-lag] & (
            rng.random((shape[0] - lag, shape[1]), dtype=np.float32) < 0.7
        )
    return outage


# part of a kept series' name: raise it when generate_speeds changes what it makes, so that a
# cache never hands back the old generator's speeds
GENERATOR = 1


def cached_speeds(cache_dir, adj: np.ndarray, steps: int, seed: int) -> np.ndarray:
    """`generate_speeds`' series, kept in `cache_dir` for the next process of the same graph,
    length and seed (contract/kept.py): PeMS-BAY's 52,116 steps take ~2 s to make on one core,
    and scipy's import ~1 s more, a read of them 0.2 s, and every process of a study builds the
    series, its anatomy's too."""
    graph = hashlib.sha256(np.ascontiguousarray(adj).tobytes()).hexdigest()[:16]
    return kept_arrays(
        cache_dir,
        "dcrnn-pems",
        f"{GENERATOR}-{graph}-{steps}-{seed}",
        steps * adj.shape[0] * 4,
        lambda: {"speeds": generate_speeds(adj, steps, seed)},
    )["speeds"]


SIZES = {"bay": (325, 52_116), "la": (207, 34_272), "2k7": (2_700, 52_116), "11k": (11_000, 52_116)}


def _packaged(name: str) -> tuple[list[str], np.ndarray]:
    with resources.files(__package__).joinpath(f"adj_{name}.npz").open("rb") as f, np.load(f) as z:
        return [str(i) for i in z["ids"]], z["adj"].astype(np.float32)


def _graph_of_file(path: str) -> str:
    """graph=auto with a speed file: the packaged graph whose sensors the file has (a
    METR-LA file gets the LA graph whatever `size` says; size only shapes generated data)."""
    import pandas as pd

    try:
        columns = {str(c) for c in pd.read_hdf(path, key="speed", stop=1).columns}
    except (KeyError, ValueError, OSError, TypeError):
        return "bay"  # read_speed_h5 then names what is wrong with the file
    for name in ("bay", "la"):
        if set(_packaged(name)[0]) <= columns:
            return name
    raise ValueError(
        f"speed file {path} has sensors of neither packaged graph (PeMS-BAY, METR-LA); "
        f"give its graph: --set graph=adj_mx.pkl"
    )


def load_graph(params: dict, seed: int) -> tuple[list[str], np.ndarray]:
    name = params["graph"]
    if (
        name == "auto"
        and params["data"] not in ("generated",)
        and not params["data"].endswith(".json")
    ):
        name = _graph_of_file(params["data"])
    elif name == "auto":
        name = params["size"] if params["size"] in ("bay", "la") else "generated"
    if name in ("bay", "la"):
        return _packaged(name)
    if name == "generated":
        n = SIZES[params["size"]][0]
        return [str(i) for i in range(n)], graph.generated_graph(n, seed)
    return graph.load_adj_pickle(name)


def load_series(params: dict, seed: int, cache_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """(speeds (time, sensors), adjacency) for the configured data and graph; generated speeds
    kept in `cache_dir` where one is given (`cached_speeds`)."""
    if params["data"].endswith(".json"):
        return load_chickenpox(params["data"])
    ids, adj = load_graph(params, seed)
    if params["data"] == "generated":
        steps = params["steps"] or SIZES[params["size"]][1]
        if cache_dir is None:
            return generate_speeds(adj, steps, seed), adj
        return cached_speeds(cache_dir, adj, steps, seed), adj
    speeds, _ = read_speed_h5(params["data"], ids)
    return speeds, adj


def load_adj(params: dict, seed: int) -> np.ndarray:
    """The adjacency alone, for a rank whose series lives elsewhere (batching=dask-index)."""
    if params["data"].endswith(".json"):
        return load_chickenpox(params["data"])[1]
    return load_graph(params, seed)[1]


def check(params: dict) -> None:
    """Parent-side check of the graph and speed files a cell would read."""
    if params["data"].endswith(".json"):
        if not Path(params["data"]).is_file():
            raise ValueError(f"data file {params['data']} does not exist")
        return
    if params["data"] == "generated":
        if params["graph"] not in ("auto", "bay", "la", "generated"):
            graph.load_adj_pickle(params["graph"])  # a user's pickle: refused or corrupt fails now
        # packaged and generated graphs need no check (generating one here would do it twice)
        return
    ids, _ = load_graph(params, 0)
    read_speed_h5(params["data"], ids, stop=1)  # the layout and sensor ids, not the whole table


def historical_average_mae(speeds: np.ndarray, n_train: int, n_val: int, params: dict) -> float:
    """Masked MAE over the validation windows of the per-sensor, per-time-of-week mean of the
    training speeds: the historical-average baseline DCRNN compares against."""
    steps_per_week = 7 * 24 * 60 // STEP_MINUTES
    train = speeds[: n_train + params["in_steps"]]
    # the whole weeks summed slot by slot, then the last part-week's first slots: what
    # np.add.at over each step's slot sums, 26x faster (2.0 s to 0.08 s at PeMS-BAY's size)
    whole = train.shape[0] // steps_per_week * steps_per_week
    weeks = train[:whole].reshape(-1, steps_per_week, speeds.shape[1])
    sums = weeks.sum(axis=0, dtype=np.float64)
    counts = (weeks != 0).sum(axis=0).astype(np.float64)
    rest = train[whole:]
    sums[: len(rest)] += rest
    counts[: len(rest)] += rest != 0
    avg = np.where(counts > 0, sums / np.maximum(counts, 1), train[train != 0].mean())
    rows = np.arange(
        n_train + params["in_steps"], n_train + n_val + params["in_steps"] + params["horizon"] - 1
    )
    truth, pred = speeds[rows], avg[rows % steps_per_week]
    mask = truth != 0
    return float(np.abs(pred - truth)[mask].mean())

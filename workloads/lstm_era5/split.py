"""Which part of the ERA5 data a cell uses: the selection, the train/test split, the
parent-side check, and `stbench data --prepare` (numpy and xarray; no torch)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from stbench.contract import BuildContext

from . import data


def _generated_store(params: dict, ctx: BuildContext) -> str:
    """A cached ERA5-schema zarr store for data=generated, read back through the zarr path."""
    lat0, lat1, lon0, lon1 = data.parse_box(params["grid"] or "20:40:280:280.25")
    lats = np.arange(lat1, lat0 - 1e-6, -0.25)
    lons = np.arange(lon0, lon1 + 1e-6, 0.25)
    key = f"{lat0}:{lat1}:{lon0}:{lon1}:{params['train_start']}:{params['test_end']}:{ctx.seed}"
    path = ctx.cache_dir / "data" / f"era5-generated-{hashlib.sha1(key.encode()).hexdigest()[:10]}.zarr"
    if not (path / ".zmetadata").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        data.generate(path, lats, lons, params["train_start"], params["test_end"], ctx.seed)
    return str(path)


def load_split(params: dict, ctx: BuildContext) -> tuple[np.ndarray, np.ndarray, list]:
    """(train values, test values, coords), both (time, series) in kelvin."""
    source = _generated_store(params, ctx) if params["data"] == "generated" else params["data"]
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

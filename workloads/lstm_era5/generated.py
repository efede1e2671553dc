"""ERA5 look-alikes: a zarr store with the ARCO ERA5 store's schema (data.py's `VAR` on time,
latitude, longitude), its 2 m temperature generated from a seed. What `data=generated` trains on
and what the tests read through the same code as the real store."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .data import VAR


def generate(
    path: Path,
    lats: np.ndarray,
    lons: np.ndarray,
    start: str,
    end: str,
    seed: int = 0,
    time_chunk: int = 24 * 31,
) -> Path:
    """Write an ERA5-schema zarr store: diurnal and seasonal cycles, a latitude gradient and
    AR(1) weather noise, chunked along time like the ARCO store."""
    ds = dataset(lats, lons, start, end, seed)
    # chunked along time as the ARCO store
    ds.chunk({"time": time_chunk}).to_zarr(path, mode="w", consolidated=True, zarr_format=2)
    return path


def can_store() -> bool:
    """Whether this Python can write the store (zarr, and dask for its chunks): the GPU machine
    lent to this project has neither, and there `data=generated` is the same field in memory."""
    from importlib.util import find_spec

    return find_spec("zarr") is not None and find_spec("dask") is not None


def dataset(lats: np.ndarray, lons: np.ndarray, start: str, end: str, seed: int = 0):
    """The generated field as an ERA5-schema Dataset in memory (what the store holds)."""
    import xarray as xr

    time = np.arange(np.datetime64(start, "h"), np.datetime64(end, "h") + 1).astype(
        "datetime64[ns]"
    )
    t2m = _t2m(time, lats, lons, np.random.default_rng(seed))
    return xr.Dataset(
        {
            VAR: (
                ("time", "latitude", "longitude"),
                t2m,
                {"units": "K", "long_name": "2 metre temperature"},
            )
        },
        coords={
            "time": time,
            "latitude": np.asarray(lats, np.float32),
            "longitude": np.asarray(lons, np.float32),
        },
    )


def _t2m(time: np.ndarray, lats, lons, rng) -> np.ndarray:
    """2 m temperature (time, lat, lon) in K: a latitude gradient, a seasonal and a diurnal
    cycle, and AR(1) weather noise."""
    hours = np.arange(len(time), dtype=np.float64)
    doy = (time - time.astype("datetime64[Y]")).astype("timedelta64[h]").astype(float) / 24.0
    lat = np.asarray(lats, np.float64)[None, :, None]
    lon = np.asarray(lons, np.float64)[None, None, :]
    base = 300.0 - 0.45 * np.abs(lat)  # warmer towards the equator
    season = (
        (2.0 + 0.2 * np.abs(lat))
        * -np.cos(2 * np.pi * (doy[:, None, None] - 15) / 365.25)
        * np.sign(lat + 1e-9)
    )
    local_hour = (hours[:, None, None] % 24 + lon / 15.0) % 24
    diurnal = 4.0 * np.cos(2 * np.pi * (local_hour - 15) / 24)
    noise = np.empty((len(time), lat.shape[1], lon.shape[2]))
    noise[0] = rng.standard_normal(noise.shape[1:])
    shocks = rng.standard_normal(noise.shape) * 0.3
    for t in range(1, len(time)):  # AR(1): weather persists for days
        noise[t] = 0.98 * noise[t - 1] + shocks[t]
    return (base + season + diurnal + noise).astype(np.float32)

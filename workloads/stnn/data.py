"""SST fields for STNN: a NOAA-style netCDF read through xarray, or a generated field.

Both give the same thing: values (time, lat, lon) float32 with NaN over land, and the ocean
mask. The series STNN models are the ocean cells, numbered row-major (lat, then lon).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_GRID_RE = re.compile(r"^(\d+)x(\d+)$")
GLOBAL_GRID = (180, 360)


@dataclass(frozen=True)
class Field:
    values: np.ndarray  # (time, lat, lon) float32, NaN over land
    ocean: np.ndarray  # (lat, lon) bool
    lat: np.ndarray
    lon: np.ndarray
    source: str

    def series(self) -> np.ndarray:
        """(time, ocean cells) float32."""
        return self.values[:, self.ocean]


def parse_grid(text: str) -> tuple[int, int]:
    m = _GRID_RE.match(text)
    if not m or int(m.group(1)) < 2 or int(m.group(2)) < 2:
        raise ValueError(f"grid={text!r} is not LATxLON (e.g. 30x84, 60x168, 180x360)")
    return int(m.group(1)), int(m.group(2))


def grid_coords(nlat: int, nlon: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Cell centres: the whole globe for 180x360, else the tropical Pacific box of the STNN
    paper's PST data (30S-30N, 123-291E) at the resolution the grid implies. The third value
    says whether longitude wraps around."""
    if (nlat, nlon) == GLOBAL_GRID:
        lat0, lat1, lon0, lon1, wrap = -90.0, 90.0, 0.0, 360.0, True
    else:
        lat0, lat1, lon0, lon1, wrap = -30.0, 30.0, 123.0, 291.0, False
    dlat, dlon = (lat1 - lat0) / nlat, (lon1 - lon0) / nlon
    return lat0 + dlat * (np.arange(nlat) + 0.5), lon0 + dlon * (np.arange(nlon) + 0.5), wrap


def land_mask(nlat: int, nlon: int, fraction: float, seed: int) -> np.ndarray:
    """Smooth blobs of land covering `fraction` of the cells, denser towards the western and
    eastern edges (the continents around a basin)."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(seed + 7)
    noise = gaussian_filter(rng.standard_normal((nlat, nlon)), sigma=max(nlon / 40, 1.0), mode="wrap")
    noise /= noise.std() or 1.0
    edge = np.abs(np.linspace(-1, 1, nlon))[None, :] ** 4 * 2.0
    score = noise + edge
    if fraction <= 0:
        return np.zeros((nlat, nlon), bool)
    return score >= np.quantile(score, 1.0 - fraction)


def generate(grid: str, months: int, seed: int, land: float = 0.1) -> Field:
    """SST-like monthly field: latitudinal gradient, a seasonal cycle opposite in the two
    hemispheres, anomalies advected westward along the equator with an ENSO-like oscillation,
    and land. Built one month at a time, so a 180x360 grid needs only the output array."""
    from scipy.ndimage import gaussian_filter

    nlat, nlon = parse_grid(grid)
    lat, lon, wrap = grid_coords(nlat, nlon)
    rng = np.random.default_rng(seed)
    phi = np.deg2rad(lat)[:, None]
    base = 28.0 * np.cos(phi) ** 2 - 1.0 + np.zeros((1, nlon))
    season_amp = 4.0 * np.sin(phi) + np.zeros((1, nlon))
    enso = np.exp(-((lat[:, None] / 8.0) ** 2)) * np.exp(-(((lon[None, :] - 220.0) / 50.0) ** 2))
    sigma = max(nlat / 15, 1.0)
    mode = "wrap" if wrap else "nearest"
    out = np.empty((months, nlat, nlon), np.float32)
    anomaly = np.zeros((nlat, nlon))
    shift = max(1, nlon // 84)  # about 2 degrees a month, whatever the resolution
    for t in range(months):
        kick = gaussian_filter(rng.standard_normal((nlat, nlon)), sigma=sigma, mode=mode) * sigma
        anomaly = 0.85 * np.roll(anomaly, -shift, axis=1) + 0.35 * kick
        oscillation = 1.5 * np.sin(2 * np.pi * t / 43.0 + 0.3 * np.sin(2 * np.pi * t / 97.0))
        season = season_amp * np.cos(2 * np.pi * (t % 12 - 1) / 12.0)
        out[t] = base + season + anomaly + oscillation * enso
    ocean = ~land_mask(nlat, nlon, land, seed)
    out[:, ~ocean] = np.nan
    return Field(out, ocean, lat, lon, f"generated:{grid} x {months} months (land {land:g})")


def _box(text: str) -> tuple[float, float, float, float] | None:
    if not text:
        return None
    parts = text.split(":")
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 4:
        raise ValueError(f"box={text!r} is not lat0:lat1:lon0:lon1 (e.g. -29:29:124:290)")
    return values  # type: ignore[return-value]


def _pick_variable(ds, name: str, path) -> str:
    candidates = [v for v, da in ds.data_vars.items() if {"time", "lat", "lon"} <= set(da.dims)]
    if name != "auto":
        if name not in ds.data_vars:
            raise ValueError(f"{path} has no variable {name!r}; (time, lat, lon) variables: {', '.join(candidates) or 'none'}")
        return name
    if not candidates:
        raise ValueError(f"{path} has no (time, lat, lon) variable; variables: {', '.join(ds.data_vars) or 'none'}")
    return candidates[0]


def _land(ds, da, coarsen: int) -> np.ndarray | None:
    """The file's land mask on the selection (a coarse cell is land only if all its fine
    cells are), or None if the file has none."""
    for mask_name, land_is in (("land", lambda m: m != 0), ("mask", lambda m: m != 0), ("lsmask", lambda m: m == 0)):
        if mask_name in ds.data_vars and {"lat", "lon"} <= set(ds[mask_name].dims):
            land = land_is(ds[mask_name].squeeze(drop=True).sel(lat=da.lat, lon=da.lon)).values.astype(bool)
            if coarsen > 1:
                nlat, nlon = da.sizes["lat"] // coarsen, da.sizes["lon"] // coarsen
                land = land[: nlat * coarsen, : nlon * coarsen].reshape(nlat, coarsen, nlon, coarsen).all(axis=(1, 3))
            return land
    return None


def open_sst(path: str, variable: str = "auto", box: str = "", start: str = "", end: str = "",
             coarsen: int = 1, load: bool = True) -> Field:
    """Read a NOAA-style SST netCDF (e.g. OISST v2 monthly means, or the STNN PST layout).

    Dimensions may be called lat/latitude and lon/longitude. Land is where the file's `land`
    or `mask`/`lsmask` variable says so (nonzero land, or zero ocean for lsmask), or where a
    cell has no finite value; a cell with gaps in time is masked too. With load=False only the
    coordinates and mask are read (the parent's up-front check).
    """
    import xarray as xr

    p = Path(path)
    if not p.exists():
        raise ValueError(f"data file {path} does not exist")
    try:
        ds = xr.open_dataset(p)
    except Exception as exc:  # netCDF4/h5netcdf raise many types for a corrupt file
        raise ValueError(f"data file {path} cannot be read as netCDF ({type(exc).__name__}: {exc})") from None
    ds = ds.rename({k: v for k, v in {"latitude": "lat", "longitude": "lon"}.items() if k in ds.dims})
    name = _pick_variable(ds, variable, path)
    da = ds[name].transpose("time", "lat", "lon")
    bounds = _box(box)
    if bounds:
        lat0, lat1, lon0, lon1 = bounds
        lat_slice = slice(lat0, lat1) if da.lat[0] <= da.lat[-1] else slice(lat1, lat0)
        da = da.sel(lat=lat_slice, lon=slice(lon0, lon1))
    if start or end:
        da = da.sel(time=slice(start or None, end or None))
    if da.sizes["time"] < 3 or da.sizes["lat"] < 1 or da.sizes["lon"] < 1:
        raise ValueError(f"{path}: the selection (box={box!r}, start={start!r}, end={end!r}) leaves "
                         f"{dict(da.sizes)}; it needs at least 3 months and one cell")
    land = _land(ds, da, coarsen)
    if coarsen > 1:
        da = da.coarsen(lat=coarsen, lon=coarsen, boundary="trim").mean()
    lat, lon = da.lat.values, da.lon.values
    values = da.values.astype(np.float32) if load else None
    finite = np.isfinite(values).all(axis=0) if load else np.ones((len(lat), len(lon)), bool)
    ocean = finite & (~land if land is not None else True)
    if not ocean.any():
        raise ValueError(f"{path}: variable {name!r} has no ocean cell with values in the selection")
    if load:
        values[:, ~ocean] = np.nan
    else:
        values = np.empty((da.sizes["time"], 0, 0), np.float32)
    return Field(values, ocean, lat, lon, f"{p.name}:{name} {da.sizes['time']} months x {len(lat)}x{len(lon)}")

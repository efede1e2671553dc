"""SST fields for STNN: a NOAA-style netCDF read through xarray, or a generated field.

Both give the same thing: values (time, lat, lon) float32 with NaN over land, and the ocean
mask. The series STNN models are the ocean cells, numbered row-major (lat, then lon).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stbench.contract import require

from .noise import RedNoise, ar2_std, smoothings

_GRID_RE = re.compile(r"^(\d+)x(\d+)$")
# Whole-globe grids (1, 0.5 and 0.25 degrees); any other grid is the tropical Pacific box.
# 721x1440 is ERA5's layout: rows centred on the poles, 0.25 degrees apart.
GLOBAL_GRIDS = ((180, 360), (360, 720), (720, 1440), (721, 1440))


@dataclass(frozen=True)
class Field:
    values: np.ndarray  # (time, lat, lon) float32, NaN over land
    ocean: np.ndarray  # (lat, lon) bool
    lat: np.ndarray
    lon: np.ndarray
    source: str

    def series(self) -> np.ndarray:
        """(time, ocean cells) float32, row-major (a batch reads cells of a month), copied month
        by month: values[:, ocean] comes out column-major, and making that row-major copies
        the series a second time (1.5 GB at the 0.25-degree globe)."""
        out = np.empty((len(self.values), int(self.ocean.sum())), self.values.dtype)
        for t, month in enumerate(self.values):
            out[t] = month[self.ocean]
        return out


def parse_grid(text: str) -> tuple[int, int]:
    m = _GRID_RE.match(text)
    if not m or int(m.group(1)) < 2 or int(m.group(2)) < 2:
        raise ValueError(f"grid={text!r} is not LATxLON (e.g. 30x84, 60x168, 180x360)")
    return int(m.group(1)), int(m.group(2))


def is_global(nlat: int, nlon: int) -> bool:
    return (nlat, nlon) in GLOBAL_GRIDS


def grid_coords(nlat: int, nlon: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Cell centres: the whole globe for the GLOBAL_GRIDS, else the tropical Pacific box of the
    STNN paper's PST data (30S-30N, 123-291E) at the resolution the grid implies. The third
    value says whether longitude wraps around."""
    if is_global(nlat, nlon):
        half = 90.0 / (nlat - 1) if nlat % 2 else 0.0  # an odd count has a row on each pole
        lat0, lat1, lon0, lon1, wrap = -90.0 - half, 90.0 + half, 0.0, 360.0, True
    else:
        lat0, lat1, lon0, lon1, wrap = -30.0, 30.0, 123.0, 291.0, False
    dlat, dlon = (lat1 - lat0) / nlat, (lon1 - lon0) / nlon
    return lat0 + dlat * (np.arange(nlat) + 0.5), lon0 + dlon * (np.arange(nlon) + 0.5), wrap


def land_mask(nlat: int, nlon: int, fraction: float, seed: int) -> np.ndarray:
    """Smooth blobs of land covering `fraction` of the cells, denser towards the western and
    eastern edges (the continents around a basin)."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(seed + 7)
    noise = gaussian_filter(
        rng.standard_normal((nlat, nlon)), sigma=max(nlon / 40, 1.0), mode="wrap"
    )
    noise /= noise.std() or 1.0
    edge = np.abs(np.linspace(-1, 1, nlon))[None, :] ** 4 * 2.0
    score = noise + edge
    if fraction <= 0:
        return np.zeros((nlat, nlon), bool)
    return score >= np.quantile(score, 1.0 - fraction)


# The generated field is calibrated against the tropical Pacific SST anomalies of STNN's paper
# (PST: NOAA monthly means 1970-2003 on 30x84 2-degree cells, 399 months; the tests read a copy
# beside the checkout, it is not shipped). On that file / on generate("30x84", 399, seed=0):
#   std 0.64 / 0.66 C; lag-1 autocorrelation 0.78 / 0.79 (pooled; mean per cell 0.73 / 0.76),
#   lag-12 0.13 / 0.16; correlation with the cell 1, 2, 4, 8 cells east 0.97 0.91 0.80 0.61 /
#   0.98 0.94 0.84 0.66 and 1, 2, 4 cells north 0.94 0.81 0.53 / 0.95 0.85 0.61 (e-folding about
#   30 degrees zonally, 12 meridionally); leading EOF (ENSO) 39% / 33% of the variance, its index
#   autocorrelated 0.96 0.57 0.05 -0.21 / 0.95 0.56 0.12 -0.04 at 1, 6, 12, 24 months; RMSE of
#   persistence 1-12 months ahead, over all start months, 0.72 / 0.73 C. On the held-out last 12
#   months persistence scores 0.65 C on the file and 0.69 C here (0.61-1.26 C over seeds 0-4:
#   one year is one draw). Both are anomalies: the earlier generated field was absolute SST with
#   a seasonal cycle (persistence 1.40 C; STNN 1.46 C after 10 epochs), which PST does not have.
_ENSO_AR2 = (1.83, -0.86)  # damped oscillator: ~38-month period, damping 0.93 a month
_ENSO_PEAK = 1.1  # C per unit index, on the equator east of the dateline
_ENSO_WIDTH = (10.0, 60.0)  # e-folding latitude, flat-topped half-width in longitude (deg)
_SPIN_UP = 120  # months run before the first one kept: month 0 is already stationary
_RED_NOISE = (
    RedNoise(
        rho=0.62, std=0.47, widths=((4.5, 10.0, 0.85), (2.0, 2.5, 0.15))
    ),  # weather-scale anomalies
    RedNoise(
        rho=0.97, std=0.3, widths=((15.0, 40.0, 1.0),)
    ),  # basin-wide, decadal (PDO- and trend-like)
)


def generate(grid: str, months: int, seed: int, land: float = 0.1) -> Field:
    """SST-anomaly-like monthly field (C), calibrated against the PST anomalies (above): an
    ENSO-like damped oscillation on an equatorial pattern east of the dateline, red noise at
    two scales, and land. Scales are in degrees, so every grid has the same physics. Built one
    month at a time, so a globe needs only the output array (1.7 GB at 721x1440)."""
    nlat, nlon = parse_grid(grid)
    lat, lon, wrap = grid_coords(nlat, nlon)
    rng = np.random.default_rng(seed)
    east = (lon[None, :] - 240.0 + 180.0) % 360.0 - 180.0  # degrees from 120W, on a globe too
    a1, a2 = _ENSO_AR2
    pattern = (
        (_ENSO_PEAK / ar2_std(a1, a2))
        * np.exp(-((lat[:, None] / _ENSO_WIDTH[0]) ** 2))
        * np.exp(-((east / _ENSO_WIDTH[1]) ** 4))
    )
    terms = [
        smoothings(noise, (nlat, nlon), (lat[1] - lat[0], lon[1] - lon[0]), wrap)
        for noise in _RED_NOISE
    ]
    fields = [np.zeros((nlat, nlon)) for _ in _RED_NOISE]
    index, previous = 0.0, 0.0
    out = np.empty((months, nlat, nlon), np.float32)
    for t in range(-_SPIN_UP, months):
        index, previous = a1 * index + a2 * previous + rng.standard_normal(), index
        for field, noise, smooth in zip(fields, _RED_NOISE, terms):
            field *= noise.rho
            for term in smooth:
                field += term.draw(rng)
        if t >= 0:
            out[t] = pattern * index + sum(fields)
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
            raise ValueError(
                f"{path} has no variable {name!r}; "
                f"(time, lat, lon) variables: {', '.join(candidates) or 'none'}"
            )
        return name
    if not candidates:
        raise ValueError(
            f"{path} has no (time, lat, lon) variable; "
            f"variables: {', '.join(ds.data_vars) or 'none'}"
        )
    return candidates[0]


def _land(ds, da, coarsen: int) -> np.ndarray | None:
    """The file's land mask on the selection (a coarse cell is land only if all its fine
    cells are), or None if the file has none."""
    for mask_name, land_is in (
        ("land", lambda m: m != 0),
        ("mask", lambda m: m != 0),
        ("lsmask", lambda m: m == 0),
    ):
        if mask_name in ds.data_vars and {"lat", "lon"} <= set(ds[mask_name].dims):
            land = land_is(
                ds[mask_name].squeeze(drop=True).sel(lat=da.lat, lon=da.lon)
            ).values.astype(bool)
            if coarsen > 1:
                nlat, nlon = da.sizes["lat"] // coarsen, da.sizes["lon"] // coarsen
                land = (
                    land[: nlat * coarsen, : nlon * coarsen]
                    .reshape(nlat, coarsen, nlon, coarsen)
                    .all(axis=(1, 3))
                )
            return land
    return None


def _open(path: str):
    """The netCDF dataset, its dimensions named lat and lon; ValueError for a file that is not
    there or not netCDF."""
    import xarray as xr

    if not Path(path).exists():
        raise ValueError(f"data file {path} does not exist")
    require("netCDF4", f"data file {path} (netCDF)", ValueError)
    try:
        ds = xr.open_dataset(Path(path))
    except Exception as exc:  # netCDF4/h5netcdf raise many types for a corrupt file
        raise ValueError(
            f"data file {path} cannot be read as netCDF ({type(exc).__name__}: {exc})"
        ) from None
    return ds.rename(
        {k: v for k, v in {"latitude": "lat", "longitude": "lon"}.items() if k in ds.dims}
    )


def _select(da, box: str, start: str, end: str, path: str):
    """The variable within the box and the months asked for; ValueError where that leaves
    fewer than 3 months or no cell."""
    bounds = _box(box)
    if bounds:
        lat0, lat1, lon0, lon1 = bounds
        lat_slice = slice(lat0, lat1) if da.lat[0] <= da.lat[-1] else slice(lat1, lat0)
        da = da.sel(lat=lat_slice, lon=slice(lon0, lon1))
    if start or end:
        da = da.sel(time=slice(start or None, end or None))
    if da.sizes["time"] < 3 or da.sizes["lat"] < 1 or da.sizes["lon"] < 1:
        raise ValueError(
            f"{path}: the selection (box={box!r}, start={start!r}, end={end!r}) leaves "
            f"{dict(da.sizes)}; it needs at least 3 months and one cell"
        )
    return da


def open_sst(
    path: str,
    variable: str = "auto",
    box: str = "",
    start: str = "",
    end: str = "",
    coarsen: int = 1,
    load: bool = True,
) -> Field:
    """Read a NOAA-style SST netCDF (e.g. OISST v2 monthly means, or the STNN PST layout).

    Dimensions may be called lat/latitude and lon/longitude. Land is where the file's `land`
    or `mask`/`lsmask` variable says so (nonzero land, or zero ocean for lsmask), or where a
    cell has no finite value; a cell with gaps in time is masked too. With load=False only the
    coordinates and mask are read (the parent's up-front check).
    """
    p = Path(path)
    ds = _open(path)
    name = _pick_variable(ds, variable, path)
    da = _select(ds[name].transpose("time", "lat", "lon"), box, start, end, path)
    land = _land(ds, da, coarsen)
    if coarsen > 1:
        da = da.coarsen(lat=coarsen, lon=coarsen, boundary="trim").mean()
    lat, lon = da.lat.values, da.lon.values
    values = da.values.astype(np.float32) if load else None
    finite = np.isfinite(values).all(axis=0) if load else np.ones((len(lat), len(lon)), bool)
    ocean = finite & (~land if land is not None else True)
    if not ocean.any():
        raise ValueError(
            f"{path}: variable {name!r} has no ocean cell with values in the selection"
        )
    if load:
        values[:, ~ocean] = np.nan
    else:
        values = np.empty((da.sizes["time"], 0, 0), np.float32)
    return Field(
        values,
        ocean,
        lat,
        lon,
        f"{p.name}:{name} {da.sizes['time']} months x {len(lat)}x{len(lon)}",
    )

"""ERA5 2 m temperature: open a source lazily, select points or a box (look-alikes of a
generated store: generated.py).

Every source becomes the same xarray Dataset: variable `2m_temperature` (K, float32) on
dims (time, latitude, longitude), as in the ARCO ERA5 store. Only the selected points and
time range are ever computed (dask chunks along time), never the whole store.
"""

from __future__ import annotations

import socket
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from . import remote

VAR = "2m_temperature"
# The 0.25° hourly store the ARCO README names (1940 on, updated monthly). Its "-v3" is the
# data set's version: the store is zarr format 2 (.zmetadata, .zarray), as was the older
# 1959-2022-full_37-1h-0p25deg-chunk-1.zarr-v2 the study read. Chunks: 1 hour x the globe.
ARCO_URL = "gs://gcp-public-data-arco-era5/ar/full_37-1h-0p25deg-chunk-1.zarr-v3"
CSV_COLUMNS = ["time", "latitude", "longitude", VAR]
REMOTE = ("gs://", "gcs://", "https://", "http://", "s3://")
READ_HOURS = 24 * 7  # hours read at a time: a box's dask chunk, a prepare's block
PREPARING = "prepare.json"  # in a store that `stbench data prepare` has not finished


def _embedded():
    """The packaged copy of the real series at (40N, 280E) and (20N, 280E), 2020-2021 hourly."""
    import xarray as xr

    with (
        resources.files(__package__).joinpath("era5_t2m_2pts.npz").open("rb") as f,
        np.load(f) as z,
    ):
        start = np.datetime64("1900-01-01T00", "h") + int(z["start_hour"][0])
        time = start + np.arange(z["t2m"].shape[0]).astype("timedelta64[h]")
        return xr.Dataset(
            {VAR: (("time", "latitude", "longitude"), z["t2m"], {"units": "K"})},
            coords={
                "time": time.astype("datetime64[ns]"),
                "latitude": z["latitude"],
                "longitude": z["longitude"],
            },
        )


def _csv(path: Path):
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"data file {path} is not a readable CSV ({exc})") from None
    missing = [c for c in CSV_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"data file {path} lacks column(s) {', '.join(missing)}; "
            f"expected columns {', '.join(CSV_COLUMNS)} (the study's layout)"
        )
    df["time"] = pd.to_datetime(df["time"])
    ds = df.set_index(["time", "latitude", "longitude"])[[VAR]].to_xarray()
    return ds.astype(np.float32)


def reachable(url: str, timeout: float = 5.0) -> str | None:
    """None if the URL's host answers, else why not (checked before gcsfs retries for minutes)."""
    host, port = remote.endpoint_host(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return None
    except OSError as exc:
        return f"cannot reach {host}:{port} ({exc})"


def _zarr(source: str, meter):
    """A zarr store, local or remote, read through a metered filesystem, lazily: a selection
    reads the chunks it touches and no other (zarr fetches them concurrently)."""
    import xarray as xr

    return xr.open_zarr(remote.open_store(source, meter or remote.Meter()), chunks=None)


def open_dataset(source: str, time_chunk: int = 24 * 31, check_network: bool = True, meter=None):
    """An ERA5-schema Dataset for `source`: embedded, a CSV, a zarr store, a netCDF file, or
    a remote zarr URL (gs:// read anonymously through gcsfs). A zarr store's reads count into
    `meter` (remote.Meter)."""
    if source == "embedded":
        return _embedded()
    if source == "arco":
        source = ARCO_URL
    path = Path(source)
    if not source.startswith(REMOTE) and not path.exists():
        raise ValueError(
            f"data source {source} does not exist; valid: embedded, generated, arco, a .csv, "
            f".zarr or .nc path, or a gs:// zarr URL"
        )
    if source.startswith(REMOTE) and check_network and (why := reachable(source)):
        raise ValueError(
            f"{why}; with no network use the embedded default (data=embedded), a local copy "
            f"(stbench data prepare lstm-era5 on a networked machine), or data=generated"
        )
    if (path / PREPARING).exists():
        raise ValueError(
            f"data source {source} is a prepare that has not finished; run the same "
            f"`stbench data prepare` again to resume it"
        )
    if source.startswith(REMOTE) or path.suffix == ".zarr" or path.is_dir():
        try:
            ds = _zarr(source, meter)
        except (
            Exception
        ) as exc:  # zarr, HTTP and codec errors come in many types (zarr's are ValueErrors)
            raise ValueError(unreadable(source, exc)) from None
    else:
        ds = _file(source, path, time_chunk)
    if VAR not in ds or set(ds[VAR].dims) != {"time", "latitude", "longitude"}:
        raise ValueError(f"data source {source} has no {VAR}(time, latitude, longitude) variable")
    return ds


def _file(source: str, path: Path, time_chunk: int):
    """A CSV or netCDF file as an ERA5-schema Dataset."""
    import xarray as xr

    try:
        if path.suffix == ".csv":
            return _csv(path)
        if path.suffix in (".nc", ".nc4", ".h5"):
            return xr.open_dataset(path, chunks={"time": time_chunk})
        raise ValueError(f"data source {source}: unknown format; valid: .csv, .zarr, .nc")
    except ValueError:
        raise
    except Exception as exc:  # netCDF/HDF5 parse errors come in many types; name the file
        raise ValueError(unreadable(source, exc)) from None


def unreadable(source: str, exc: BaseException) -> str:
    """One line for a source that cannot be opened or read: a missing store or bucket, a corrupt
    file."""
    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, FileNotFoundError) or any(
        m in text.lower() for m in ("not found", "no group found", "no such")
    ):
        return (
            f"data source {source} does not exist or holds no zarr store "
            f"({type(exc).__name__}: {text})"
        )
    return f"data source {source} is corrupt or unreadable ({type(exc).__name__}: {text})"


def parse_points(text: str) -> list[tuple[float, float]]:
    """'40:280+20:280' -> [(40.0, 280.0), (20.0, 280.0)] ('+' because --set splits on commas)."""
    if text == "all":
        raise ValueError("points=all selects every grid point; it has no list of points")
    try:
        return [(float(a), float(b)) for a, b in (p.split(":") for p in text.split("+"))]
    except ValueError:
        raise ValueError(
            f"points={text!r} is malformed; expected lat:lon pairs joined by '+', "
            "e.g. 40:280+20:280"
        ) from None


def parse_box(text: str) -> tuple[float, float, float, float]:
    try:
        lat0, lat1, lon0, lon1 = map(float, text.split(":"))
    except ValueError:
        raise ValueError(
            f"grid={text!r} is malformed; expected lat0:lat1:lon0:lon1, e.g. 30:50:260:290"
        ) from None
    return min(lat0, lat1), max(lat0, lat1), min(lon0, lon1), max(lon0, lon1)


def selection(ds, points: str, grid: str, start: str, end: str):
    """The validated, still lazy (time, series) selection and its [(lat, lon)…]; nothing is read.

    ERA5 stores latitude north to south; a box is selected by value whatever the order. A zarr
    store is opened without dask (data._zarr): points are read by zarr itself, exactly the
    chunks the selection touches (dask's chunks along time would read whole blocks of them).
    """
    import xarray as xr

    da = ds[VAR]
    lat, lon = da["latitude"].values, da["longitude"].values
    extent = f"latitude {lat.min():g}..{lat.max():g}, longitude {lon.min():g}..{lon.max():g}"
    if grid or points == "all":  # a box, or every grid point of the data
        lat0, lat1, lon0, lon1 = (
            parse_box(grid) if grid else (lat.min(), lat.max(), lon.min(), lon.max())
        )
        da = da.sel(
            latitude=lat[(lat >= lat0) & (lat <= lat1)],
            longitude=lon[(lon >= lon0) & (lon <= lon1)],
        )
        if da.sizes["latitude"] * da.sizes["longitude"] == 0:
            raise ValueError(f"grid {grid} holds no grid point of the data ({extent})")
        da = da.sel(time=slice(start, end))
        # a lazily read store: stacking would read it; dask defers that (where there is no dask,
        # as on the GPU machine, the data is in memory: generated.dataset)
        if da.chunks is None and find_spec("dask") is not None:
            da = da.chunk({"time": READ_HOURS})
        da = da.stack(series=("latitude", "longitude"))
        coords = [(float(a), float(b)) for a, b in da["series"].values]
    else:
        coords = parse_points(points)
        for a, b in coords:
            if not (np.isclose(lat, a).any() and np.isclose(lon, b).any()):
                raise ValueError(f"point ({a:g}, {b:g}) is not on the data's grid ({extent})")
        ilat = [int(np.argmin(np.abs(lat - a))) for a, _ in coords]
        ilon = [int(np.argmin(np.abs(lon - b))) for _, b in coords]
        da = da.isel(
            latitude=xr.DataArray(ilat, dims="series"), longitude=xr.DataArray(ilon, dims="series")
        )
    da = da.sel(time=slice(start, end))
    if da.sizes["time"] < 2:
        t = ds["time"].values
        raise ValueError(
            f"time range {start}..{end} is not in the data ({str(t[0])[:13]}..{str(t[-1])[:13]})"
        )
    return da.transpose("time", "series"), coords


def indices(ds, sel, coords: list) -> tuple[int, int, list[int], list[int]]:
    """Where a selection (see selection) lies in the store: its first and past-last hour on the
    time axis, and each series' latitude and longitude index."""
    lat, lon = ds["latitude"].values, ds["longitude"].values
    i0 = int(ds.indexes["time"].get_loc(sel["time"].values[0]))
    return (
        i0,
        i0 + sel.sizes["time"],
        [int(np.argmin(np.abs(lat - a))) for a, _ in coords],
        [int(np.argmin(np.abs(lon - b))) for _, b in coords],
    )


def select(ds, points: str, grid: str, start: str, end: str):
    """(times, values (time, series) float32, [(lat, lon)…]) for the points or the box.

    With points="all" a grid point with no value at all is not a series: a CSV of scattered
    points becomes a grid whose other cells are empty."""
    da, coords = selection(ds, points, grid, start, end)
    values = np.asarray(da.values, dtype=np.float32)  # dask computes the selection only
    if points == "all" and not grid:
        present = np.isfinite(values).any(axis=0)
        values, coords = values[:, present], [c for c, keep in zip(coords, present) if keep]
    if not np.isfinite(values).all():
        raise ValueError(f"the selection {start}..{end} has missing values (NaN)")
    return da["time"].values, values, coords

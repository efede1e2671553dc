"""`stbench data prepare lstm-era5`: say what a selection will read, then copy it into a
time-chunked local zarr store, in blocks that a resumed prepare never reads again.

Before reading any value the store's metadata says how many chunks the selection touches and
their size (decoded, and as stored from one chunk's size): above a limit (1 GB fetched) the
prepare stops unless told `yes`, naming the better layouts. The copy is written beside its
destination as `.NAME.partial`, whose `prepare.json` lists the finished blocks; only when every
block is in does it get its consolidated metadata and its name, so a store at the destination
is always whole (and data.open_dataset refuses a folder that still holds prepare.json).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import data, remote

LIMIT_GB = 1.0  # bytes fetched (as stored) above which a prepare asks for `yes`
# hours per block: the copy's time chunk, the unit of progress and of a resume
BLOCK = data.READ_HOURS
STATE = data.PREPARING


def size(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class Cost:
    """What a selection reads, from the store's metadata (and one chunk's size as stored)."""

    chunks: int  # chunks of the variable the selection touches
    chunk_shape: tuple[int, ...]
    decoded_bytes: int  # one chunk, decoded
    # one chunk as stored (the first the selection reads), where the store says
    stored_bytes: int | None
    used_bytes: int  # the values kept
    hour_chunks: int  # chunks per hour of the selection

    @property
    def fetch_bytes(self) -> int:
        return self.chunks * (self.stored_bytes or self.decoded_bytes)

    def text(self) -> str:
        shape = " x ".join(map(str, self.chunk_shape))
        stored = f"~{size(self.fetch_bytes)} as stored, " if self.stored_bytes else ""
        return (
            f"{self.chunks:,} chunks of {shape} "
            f"({stored}{size(self.chunks * self.decoded_bytes)} decoded) "
            f"to keep {size(self.used_bytes)}: "
            f"{self.fetch_bytes / self.used_bytes:,.0f}x read amplification"
        )

    def refusal(self, limit_gb: float) -> str:
        """One line: why not, and what would read less."""
        hour = self.fetch_bytes / max(self.chunks / self.hour_chunks, 1)
        return (
            f"the selection reads {self.text()}, over the {limit_gb:g} GB limit (--max-gb); "
            "add --yes to read it, or read a better layout: a time-chunked copy "
            "(chunks of many hours x a small area read about "
            f"the {size(self.used_bytes)} kept), fewer hours or a smaller box "
            f"(each hour reads {size(hour)} here), or a coarser store"
        )


def cost(source: str, ds, sel, coords: list, meter: remote.Meter) -> Cost | None:
    """The chunks and bytes `sel` (data.selection) reads from a zarr store; None for another
    source."""
    import zarr

    enc = ds[data.VAR].encoding
    if "chunks" not in enc or not source.startswith(data.REMOTE) and not Path(source).is_dir():
        return None
    ct, cy, cx = enc["chunks"]
    i0, i1, ilat, ilon = data.indices(ds, sel, coords)
    cells = {(a // cy, b // cx) for a, b in zip(ilat, ilon)}
    times = range(i0 // ct, (i1 - 1) // ct + 1)
    itemsize = ds[data.VAR].dtype.itemsize
    array = zarr.open_array(remote.open_store(source, meter), path=data.VAR, mode="r")
    key = array.metadata.encode_chunk_key((times[0], *min(cells)))
    fs, path = remote.filesystem(source, meter, asynchronous=False)
    try:
        stored = int(fs.size(f"{path.rstrip('/')}/{data.VAR}/{key}"))
    except Exception:  # a store that cannot say (or a missing chunk: fill values) is costed decoded
        stored = None
    return Cost(
        len(times) * len(cells),
        (ct, cy, cx),
        ct * cy * cx * itemsize,
        stored,
        (i1 - i0) * len(coords) * itemsize,
        len(cells) / ct,
    )


def prepare(
    source: str,
    out: Path,
    points: str,
    grid: str,
    start: str,
    end: str,
    yes: bool = False,
    max_gb: float = LIMIT_GB,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Copy a selection of any source into a time-chunked local ERA5-schema zarr store at `out`
    (see the module's note); ValueError for bad input or a selection over the limit."""
    say = progress or (lambda text: None)
    meter = remote.Meter()
    ds = data.open_dataset(source, meter=meter)
    sel, coords = data.selection(ds, points, grid, start, end)
    c = cost(source, ds, sel, coords, meter)
    if c is not None and c.fetch_bytes > max_gb * 1e9 and not yes:
        raise ValueError(c.refusal(max_gb))
    # the first hour decodes: a store whose chunks are garbage is one line, before anything is
    # written
    try:
        sel.isel(time=0).values
    except Exception as exc:
        raise ValueError(data.unreadable(source, exc) + f" (reading its hour {start})") from None
    if c is not None:
        say(f"{source}: the selection reads {c.text()}")
    job = {"source": source, "points": points, "grid": grid, "start": start, "end": end}
    work, state = _work(Path(out), job, sel, coords, ds[data.VAR].attrs, say)
    try:
        _copy(sel, coords, work, state, meter, say, c)
    except (
        Exception
    ) as exc:  # a chunk that cannot be read or decoded: one line; a resume keeps what is done
        if not state["done"]:
            shutil.rmtree(work)  # nothing copied: nothing left behind
        kept = (
            f"; {len(state['done'])} of {state['blocks']} blocks are kept for a resume"
            if state["done"]
            else ""
        )
        raise ValueError(data.unreadable(source, exc) + kept) from None
    return _finish(work, Path(out))


def _work(out: Path, job: dict, sel, coords: list, attrs: dict, say) -> tuple[Path, dict]:
    """The partial copy for this job: resumed if one is there, else begun (metadata and
    coordinates, no values)."""
    import xarray as xr
    from dask import array as darray

    work = out.with_name(f".{out.name}.partial")
    blocks = -(-sel.sizes["time"] // BLOCK)
    if (work / STATE).exists():
        state = json.loads((work / STATE).read_text())
        if state["job"] == job and state["blocks"] == blocks:
            say(f"resuming {work}: {len(state['done'])} of {blocks} blocks already copied")
            return work, state
        shutil.rmtree(work)  # another selection's leftovers
    elif work.exists():
        shutil.rmtree(work)
    lats, lons = _grid(coords)
    shape = (sel.sizes["time"], len(lats), len(lons))
    empty = darray.full(shape, np.nan, dtype=np.float32, chunks=(BLOCK, len(lats), len(lons)))
    xr.Dataset(
        {data.VAR: (("time", "latitude", "longitude"), empty, {"units": "K", **attrs})},
        coords={
            "time": sel["time"].values,
            "latitude": np.float32(lats),
            "longitude": np.float32(lons),
        },
    ).to_zarr(work, mode="w", compute=False, consolidated=False, zarr_format=2)
    state = {"job": job, "blocks": blocks, "done": []}
    _save(work, state)
    say(
        f"copying into {work} in {blocks} blocks of {BLOCK} hours; "
        "interrupted, the same command resumes"
    )
    return work, state


def _grid(coords: list) -> tuple[list, list]:
    # ERA5: north to south
    return sorted({a for a, _ in coords}, reverse=True), sorted({b for _, b in coords})


def _save(work: Path, state: dict) -> None:
    tmp = work / f".{STATE}.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, work / STATE)


def _copy(
    sel, coords: list, work: Path, state: dict, meter: remote.Meter, say, c: Cost | None
) -> None:
    """Read and write each block not yet done; a block is done once its chunk is written."""
    import zarr

    lats, lons = _grid(coords)
    place = [(lats.index(a), lons.index(b)) for a, b in coords]
    hours = sel.sizes["time"]
    target = zarr.open_array(str(work / data.VAR), mode="r+")
    left = state["blocks"] - len(state["done"])
    total = f" of ~{size(c.fetch_bytes * left / state['blocks'])}" if c else ""
    for k in range(state["blocks"]):
        if k in state["done"]:
            continue
        a, z = k * BLOCK, min((k + 1) * BLOCK, hours)
        values = np.asarray(sel.isel(time=slice(a, z)).values, dtype=np.float32)
        cube = np.full((z - a, len(lats), len(lons)), np.nan, np.float32)
        for j, (i, k_lon) in enumerate(place):
            cube[:, i, k_lon] = values[:, j]
        target[a:z] = cube
        state["done"].append(k)
        _save(work, state)
        say(
            f"read {size(meter.bytes)}{total}: {z:,} of {hours:,} hours "
            f"({len(state['done'])}/{state['blocks']} blocks)"
        )


def _finish(work: Path, out: Path) -> Path:
    """Consolidate the whole copy's metadata, then give it its name."""
    import warnings

    import zarr

    # zarr names prepare.json as not part of the hierarchy: it is not
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(work), zarr_format=2)
    (work / STATE).unlink()
    if out.exists():
        shutil.rmtree(out)
    os.replace(work, out)
    return out

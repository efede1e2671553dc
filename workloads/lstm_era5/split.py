"""Which part of the ERA5 data a cell uses: the selection, the train/test split, the
parent-side check, and `stbench data prepare` (numpy and xarray; no torch)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from stbench.contract import BuildContext, ReadCost

from . import data, generated, remote


def _grid(params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The 0.25-degree latitudes (north first, as ERA5) and longitudes of data=generated."""
    lat0, lat1, lon0, lon1 = data.parse_box(params["grid"] or "20:40:280:280.25")
    return np.arange(lat1, lat0 - 1e-6, -0.25), np.arange(lon0, lon1 + 1e-6, 0.25)


def _generated_store(params: dict, ctx: BuildContext) -> str:
    """A cached ERA5-schema zarr store for data=generated, read back through the zarr path."""
    lat0, lat1, lon0, lon1 = data.parse_box(params["grid"] or "20:40:280:280.25")
    lats, lons = _grid(params)
    key = f"{lat0}:{lat1}:{lon0}:{lon1}:{params['train_start']}:{params['test_end']}:{ctx.seed}"
    path = (
        ctx.cache_dir
        / "data"
        / f"era5-generated-{hashlib.sha1(key.encode()).hexdigest()[:10]}.zarr"
    )
    if not (path / ".zmetadata").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generated.generate(path, lats, lons, params["train_start"], params["test_end"], ctx.seed)
    return str(path)


# The study's selection: what `auto` means for the embedded series, the ARCO store and
# generated data. A local file instead uses every series it holds and its own hours.
STUDY = {
    "points": "40:280+20:280",
    "train_start": "2020-01-01",
    "train_end": "2020-12-31T23",
    "test_start": "2021-01-01",
    "test_end": "2021-12-31T23",
}
AUTO = "auto"
TEST_SHARE = 0.2  # of a file's hours, the last ones, when no date is given


def is_study_source(source: str) -> bool:
    return source in ("embedded", "generated", "arco") or source.startswith(data.REMOTE)


def _hour(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "h"), unit="h"))


def resolve(params: dict, ds=None) -> tuple[dict, str]:
    """The parameters with every `auto` made concrete, and how the split was chosen.

    The study's sources get the study's points and years. A local file gets every series it
    holds (unless points or a grid are given) and a chronological split of its hours: the last
    20% for test unless dates are given; one date given places the other next to it."""
    p = dict(params)
    if is_study_source(p["data"]):
        p.update({k: v for k, v in STUDY.items() if p[k] == AUTO})
        return p, "the study's split" if all(
            params[k] == AUTO for k in STUDY
        ) else "the given split"
    if p["points"] == AUTO:
        p["points"] = "all"
    times = np.sort(ds["time"].values)
    lo = np.datetime64(p["train_start"]) if p["train_start"] != AUTO else times[0]
    hi = np.datetime64(p["test_end"]) if p["test_end"] != AUTO else times[-1]
    span = times[(times >= lo) & (times <= hi)]
    if len(span) < 2:
        raise ValueError(
            f"time range {_hour(lo)}..{_hour(hi)} is not in the data "
            f"({_hour(times[0])}..{_hour(times[-1])})"
        )
    how = "the given split"
    if p["train_end"] == AUTO and p["test_start"] == AUTO:
        cut = min(max(int(round(len(span) * (1 - TEST_SHARE))), 1), len(span) - 1)
        p["train_end"], p["test_start"] = _hour(span[cut - 1]), _hour(span[cut])
        how = f"last {TEST_SHARE:.0%} of hours for test"
    elif p["train_end"] == AUTO:
        p["train_end"] = _hour(span[span < np.datetime64(p["test_start"])].max(initial=span[0]))
    elif p["test_start"] == AUTO:
        p["test_start"] = _hour(span[span > np.datetime64(p["train_end"])].min(initial=span[-1]))
    p["train_start"], p["test_end"] = _hour(lo), _hour(hi)
    return p, how


def _open(params: dict, ctx: BuildContext | None = None, meter=None):
    """The dataset a cell reads and its concrete selection (see resolve)."""
    p, how = resolve(params) if is_study_source(params["data"]) else (params, "")
    if p["data"] == "generated" and not generated.can_store():  # no zarr here: in memory
        lats, lons = _grid(p)
        seed = ctx.seed if ctx else 0
        return generated.dataset(lats, lons, p["train_start"], p["test_end"], seed), p, how
    source = _generated_store(p, ctx) if p["data"] == "generated" else p["data"]
    ds = data.open_dataset(source, meter=meter)
    if not how:
        p, how = resolve(params, ds)
    return ds, p, how


def is_zarr(source: str) -> bool:
    """A source read chunk by chunk through the metered filesystem (remote, a .zarr, generated)."""
    return (
        source in ("arco", "generated")
        or source.startswith(data.REMOTE)
        or source.endswith(".zarr")
        or Path(source).is_dir()
    )


def load_split(
    params: dict, ctx: BuildContext
) -> tuple[np.ndarray, np.ndarray, list, str, ReadCost | None]:
    """(train values, test values, coords, what was selected, what reading cost), values
    (time, series) in kelvin; the cost for a zarr source (remote or local), else None."""
    meter = remote.Meter()
    ds, p, how = _open(params, ctx, meter)
    _, train, coords = data.select(ds, p["points"], p["grid"], p["train_start"], p["train_end"])
    first = time.perf_counter()  # the training values are in memory: the first batch can be cut
    _, test, _ = data.select(ds, p["points"], p["grid"], p["test_start"], p["test_end"])
    done = time.perf_counter()
    name = Path(p["data"]).name if not is_study_source(p["data"]) else p["data"]
    series = (
        "the grid box"
        if p["grid"]
        else "all series in the file"
        if p["points"] == "all"
        else "the study's points"
        if params["points"] == AUTO
        else "the given points"
    )
    note = (
        f"{name}: {len(coords)} series ({series}); train {p['train_start']}..{p['train_end']}, "
        f"test {p['test_start']}..{p['test_end']} ({how})"
    )
    cost = (
        ReadCost(
            meter.bytes,
            train.nbytes + test.nbytes,
            meter.reads,
            done - meter.opened,
            first - meter.opened,
        )
        if is_zarr(p["data"]) and (p["data"] != "generated" or generated.can_store())
        else None
    )
    return train, test, coords, note, cost


def check(params: dict) -> None:
    """Parent-side check: open the source and validate the selection, reading of a zarr store
    only each range's first hour (a corrupt or missing chunk there is one line before any
    cell starts; the cell reads the rest once: for a remote store, reading twice would fetch
    twice)."""
    if params["read"] == "stream" and not is_zarr(params["data"]):
        raise ValueError(
            f"read=stream reads a zarr store; data={params['data']} is not one (use read=memory)"
        )
    if params["data"] == "generated":
        return
    ds, p, _ = _open(params)
    _within_read_limit(ds, p, params["max_read_gb"])
    for start, end in ((p["train_start"], p["train_end"]), (p["test_start"], p["test_end"])):
        sel, _ = data.selection(ds, p["points"], p["grid"], start, end)
        if is_zarr(p["data"]):
            try:
                sel.isel(time=0).values
            except Exception as exc:  # zarr, codec and HTTP errors come in many types
                raise ValueError(
                    data.unreadable(p["data"], exc) + f" (reading its hour {start})"
                ) from None


def _within_read_limit(ds, p: dict, limit_gb: float) -> None:
    """A remote store's selection costed from its metadata alone (prepare.cost): above the limit
    the study is refused before any cell starts, in one line naming what it would read and the
    better layouts (ARCO's whole-globe hourly chunks make two points of two years tens of GB)."""
    from .prepare import cost, size

    source = data.ARCO_URL if p["data"] == "arco" else p["data"]
    if limit_gb <= 0 or not source.startswith(data.REMOTE):
        return
    costs = []
    for start, end in ((p["train_start"], p["train_end"]), (p["test_start"], p["test_end"])):
        sel, coords = data.selection(ds, p["points"], p["grid"], start, end)
        costs.append(cost(source, ds, sel, coords, remote.Meter()))
    fetch = sum(c.fetch_bytes for c in costs if c is not None)
    if fetch > limit_gb * 1e9:
        train = next(c for c in costs if c is not None)
        raise ValueError(
            f"data={p['data']}: train and test read ~{size(fetch)}; the training range alone "
            + train.refusal(limit_gb)
            .removeprefix("the selection ")
            .replace("(--max-gb); add --yes to read it", "(--set max_read_gb; 0: no limit)")
        )

"""lstm-era5: real ERA5 through every source path, the two loaders, learning, bad input."""

import numpy as np
import pytest
import torch

from stbench.child.trainer import LoopConfig, Trainer
from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from stbench.workloads.lstm_era5 import data, generated
from stbench.workloads.lstm_era5.prepare import prepare
from stbench.workloads.lstm_era5.split import load_split
from stbench.workloads.lstm_era5.task import Windows, make_task
from tests.conftest import SHARED_DATA
from tests.helpers import preset_params, stbench, train


def build(params, seed=0):
    return make_task(params, BuildContext(seed=seed))


CSV = SHARED_DATA / "era5" / "t2m_2020-2021_2pts.csv"
needs_csv = pytest.mark.skipif(
    not CSV.exists(), reason="../shared/data/era5 is not beside the checkout"
)
SPAN = ("2020-01-01", "2021-12-31T23")


def params(**overrides):
    return preset_params("lstm-era5", **overrides)


@needs_csv
def test_embedded_copy_is_the_real_csv():
    _, csv_values, coords = data.select(data.open_dataset(str(CSV)), "40:280+20:280", "", *SPAN)
    _, embedded, _ = data.select(data.open_dataset("embedded"), "40:280+20:280", "", *SPAN)
    assert csv_values.shape == (17544, 2) and coords == [(40.0, 280.0), (20.0, 280.0)]
    np.testing.assert_array_equal(embedded, csv_values)


@needs_csv
def test_zarr_path_yields_the_csv_series(tmp_path):
    """(gs:// through gcsfs, against a GCS server on loopback: test_era5_gcs.py)"""
    _, expected, _ = data.select(data.open_dataset(str(CSV)), "40:280+20:280", "", *SPAN)
    store = prepare(str(CSV), tmp_path / "era5.zarr", "40:280+20:280", "", *SPAN)
    _, from_zarr, _ = data.select(data.open_dataset(str(store)), "40:280+20:280", "", *SPAN)
    np.testing.assert_array_equal(from_zarr, expected)


@needs_csv
def test_netcdf_file_yields_the_csv_series(tmp_path):
    ds = data.open_dataset(str(CSV))
    ds.to_netcdf(tmp_path / "t2m.nc")
    _, expected, _ = data.select(ds, "40:280+20:280", "", *SPAN)
    _, from_nc, _ = data.select(
        data.open_dataset(str(tmp_path / "t2m.nc")), "40:280+20:280", "", *SPAN
    )
    np.testing.assert_array_equal(from_nc, expected)


def test_generated_data_without_zarr_is_the_same_field_in_memory(tmp_path, monkeypatch):
    """The GPU machine has neither zarr nor dask: data=generated is then built in memory, the
    values the store would hold (the size sweep of `stbench gpu-vs-cpu` trains on it there)."""
    params = {**preset_params("lstm-era5", "smoke"), "data": "generated", "grid": "30:30.5:250:251"}
    ctx = BuildContext(seed=3, cache_dir=tmp_path)
    stored = load_split(params, ctx)
    monkeypatch.setattr(generated, "can_store", lambda: False)
    real = data.find_spec
    monkeypatch.setattr(data, "find_spec", lambda name: None if name == "dask" else real(name))
    in_memory = load_split(params, ctx)
    for a, b in zip(stored[:2], in_memory[:2]):
        np.testing.assert_array_equal(a, b)
    assert stored[2] == in_memory[2] and stored[4] is not None and in_memory[4] is None
    assert len(list((tmp_path / "data").glob("*.zarr"))) == 1  # the in-memory path wrote none


def test_generated_store_has_the_era5_schema(tmp_path):
    lats, lons = np.arange(45.0, 29.9, -0.25), np.arange(250.0, 254.0, 0.25)
    generated.generate(
        tmp_path / "g.zarr", lats, lons, "2020-01-01", "2020-02-29T23", time_chunk=24 * 7
    )
    ds = data.open_dataset(str(tmp_path / "g.zarr"))
    da = ds["2m_temperature"]
    assert (
        da.dims == ("time", "latitude", "longitude")
        and da.dtype == np.float32
        and da.attrs["units"] == "K"
    )
    assert da.shape == (60 * 24, len(lats), len(lons)) and da.encoding["chunks"][0] == 24 * 7
    assert ds["latitude"].values[0] > ds["latitude"].values[-1]  # north to south, as ERA5
    _, values, coords = data.select(ds, "", "30:40:250:251", "2020-01-01", "2020-01-31T23")
    assert values.shape == (744, 41 * 5) and len(coords) == 41 * 5
    day = values[:, 0].reshape(31, 24).mean(axis=0)
    assert day.max() - day.min() > 4  # a diurnal cycle
    _, pts, _ = data.select(ds, "45:250+30:250", "", "2020-01-01", "2020-01-31T23")
    assert pts[:, 1].mean() > pts[:, 0].mean()  # warmer to the south


def test_windows_never_cross_series_and_both_paths_agree():
    series = torch.arange(20, dtype=torch.float32).reshape(10, 2)  # series 0 even, series 1 odd
    w = Windows(series, window=3)
    assert len(w) == 2 * 7
    x, y = w[list(range(len(w)))]
    for k in range(len(w)):
        xi, yi = w[k]
        assert torch.equal(xi, x[k]) and torch.equal(yi, y[k])
        column = set((torch.cat([x[k].flatten(), y[k]]) % 2).tolist())
        assert len(column) == 1  # every value of a window comes from one series
    assert y[6].item() == 18 and x[7, 0].item() == 1  # series 0 ends, series 1 starts afresh


def test_per_item_and_vectorized_loaders_yield_identical_batches():
    task = build(params(), seed=0)
    batches = {}
    for mode in ("vectorized", "per-item"):
        spec = RunSpec(
            "lstm-era5", "cpu", "single", 32, 1, params=tuple(sorted(params(loader=mode).items()))
        )
        trainer = Trainer(task, LoopConfig.from_spec(spec), torch.device("cpu"))
        trainer.sampler.set_epoch(3)
        batches[mode] = [b for _, b in zip(range(4), trainer.train_loader)]
    for (xv, yv), (xp, yp) in zip(batches["vectorized"], batches["per-item"]):
        assert torch.equal(xv, xp) and torch.equal(yv, yp)
        # the same layout too: a strided or float64 batch would cost the LSTM more in its compute
        # phase
        for v, p in ((xv, xp), (yv, yp)):
            assert (
                v.dtype == p.dtype == torch.float32
                and v.stride() == p.stride()
                and v.is_contiguous()
            )


@needs_csv
def test_beats_the_climatological_mean_on_the_real_csv():
    p = params(data=str(CSV))
    smoke = get("lstm-era5").presets["smoke"]
    spec = RunSpec(
        "lstm-era5",
        "cpu",
        "single",
        smoke["batch_size"],
        smoke["epochs"],
        params=tuple(sorted(p.items())),
    )
    train_k, test_k, *_ = load_split(p, BuildContext())
    climatology = float(np.sqrt(((test_k[24:] - train_k.mean()) ** 2).mean()))
    result = train(build(p, 0), spec)
    assert result.status == "ok" and result.figures.val_metric == "test_rmse_k"
    assert result.figures.val_value < 0.5 * climatology


@pytest.mark.slow
@needs_csv
@pytest.mark.parametrize(
    "setting,message",
    [
        (
            "data=/nowhere/t2m.csv",
            "data source /nowhere/t2m.csv does not exist; valid: embedded, generated, arco",
        ),
        (
            "data={bad_csv}",
            "lacks column(s) 2m_temperature; "
            "expected columns time, latitude, longitude, 2m_temperature",
        ),
        (
            "points=10:280",
            "point (10, 280) is not on the data's grid (latitude 20..40, longitude 280..280)",
        ),
        ("points=forty", "points='forty' is malformed; expected lat:lon pairs joined by '+'"),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, setting, message):
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("time,latitude,longitude,t2m\n2020-01-01,40,280,270.0\n")
    proc = stbench(
        "run",
        "lstm-era5",
        "--smoke",
        "--set",
        setting.format(bad_csv=bad_csv),
        "--out",
        tmp_path / "r",
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "r").exists()


def test_prepare_without_network_is_one_clear_line():
    proc = stbench(
        "data", "prepare", "lstm-era5", "--source", "gs://gcp-public-data-arco-era5/x.zarr"
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "cannot reach storage.googleapis.com" in proc.stderr or "does not exist" in proc.stderr


def one_point_year(path, year=2017):
    """An hourly one-point CSV of one year in the study's layout, as a user exports it."""
    import pandas as pd

    t = pd.date_range(f"{year}-01-01", f"{year}-12-31T23:00", freq="h")
    hours = np.arange(len(t))
    kelvin = 283 + 9 * np.sin(2 * np.pi * hours / 8766) + 4 * np.sin(2 * np.pi * hours / 24)
    kelvin += np.random.default_rng(0).normal(0, 0.3, len(t))
    pd.DataFrame(
        {
            "time": t.strftime("%Y-%m-%dT%H:%M"),
            "latitude": 52.5,
            "longitude": 13.25,
            "2m_temperature": kelvin.round(2),
        }
    ).to_csv(path, index=False)
    return path


@pytest.mark.slow
def test_a_users_one_point_year_runs_with_no_other_option(tmp_path):
    """The study's points and 2020/2021 split are not on a user's file: its own series and its
    last 20% of hours are used, and the row says so. The path is recorded as typed."""
    import csv
    import json

    one_point_year(tmp_path / "berlin_2017.csv")
    stbench(
        "run",
        "lstm-era5",
        "--set",
        "data=berlin_2017.csv",
        "--epochs",
        "1",
        "--out",
        "r",
        cwd=tmp_path,
        check=True,
    )
    (row,) = csv.DictReader(open(next((tmp_path / "r").glob("*/runs.csv"))))
    assert row["status"] == "ok", row["reason"]
    assert row["data_source"] == (
        "berlin_2017.csv: 1 series (all series in the file); train 2017-01-01T00.."
        "2017-10-19T23, test 2017-10-20T00..2017-12-31T23 (last 20% of hours for test)"
    )
    assert json.loads(row["params"])["data"] == "berlin_2017.csv"


@pytest.mark.parametrize(
    "given,train_end,test_start,how",
    [
        ({}, "2017-10-19T23", "2017-10-20T00", "last 20% of hours for test"),
        ({"test_start": "2017-12-01"}, "2017-11-30T23", "2017-12-01", "the given split"),
        ({"train_end": "2017-06-30T23"}, "2017-06-30T23", "2017-07-01T00", "the given split"),
    ],
)
def test_a_files_split_follows_the_dates_given(tmp_path, given, train_end, test_start, how):
    from stbench.workloads.lstm_era5.split import resolve

    ds = data.open_dataset(str(one_point_year(tmp_path / "t.csv")))
    dates = {k: "auto" for k in ("train_start", "train_end", "test_start", "test_end")}
    p, said = resolve(params(data=str(tmp_path / "t.csv"), **{**dates, **given}), ds)
    assert (
        p["points"],
        p["train_start"],
        p["train_end"],
        p["test_start"],
        p["test_end"],
        said,
    ) == ("all", "2017-01-01T00", train_end, test_start, "2017-12-31T23", how)


def test_the_embedded_default_keeps_the_studys_selection():
    from stbench.workloads.lstm_era5.split import STUDY, resolve

    default = preset_params("lstm-era5", "default")
    assert all(default[k] == "auto" for k in STUDY)
    assert resolve(default) == ({**default, **STUDY}, "the study's split")
    ctx = BuildContext()
    auto, explicit = load_split(default, ctx), load_split({**default, **STUDY}, ctx)
    assert np.array_equal(auto[0], explicit[0]) and np.array_equal(auto[1], explicit[1])
    assert auto[2] == [(40.0, 280.0), (20.0, 280.0)]
    assert auto[3] == (
        "embedded: 2 series (the study's points); train 2020-01-01..2020-12-31T23, "
        "test 2021-01-01..2021-12-31T23 (the study's split)"
    )


@pytest.mark.slow
def test_the_default_preset_beats_persistence_on_its_embedded_data():
    """The default (the study's: 2020 to train, 2021 to test, 5 epochs) learns past the naive
    baseline its target is set from; workers=0 only to keep the test's process count down."""
    p = preset_params("lstm-era5", "default", workers=0)
    default = get("lstm-era5").presets["default"]
    spec = RunSpec(
        "lstm-era5",
        "cpu",
        "single",
        default["batch_size"],
        default["epochs"],
        params=tuple(sorted(p.items())),
    )
    result = train(build(p, 0), spec)
    assert result.status == "ok" and result.figures.val_metric == "test_rmse_k"
    assert result.figures.val_value < result.figures.naive_baseline, (
        result.figures.val_value,
        result.figures.naive_baseline,
    )

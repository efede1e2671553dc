"""Prices per device-hour: --price DEVICE=USD or FILE, stored in the manifest, and
the pure functions that turn a row and the prices into money."""

import json

import pytest

from stbench.report.read import read_folder
from stbench.store.manifest import read_manifest
from stbench.store.prices import (
    cost_per_million_samples,
    cost_to_target,
    devices_held,
    parse_price,
    price_of,
    read_prices,
)
from tests.helpers import one_study, stbench


def test_prices_are_parsed_from_flags_and_each_file_format(tmp_path):
    assert parse_price("cpu=0.68") == {"cpu": 0.68}
    assert parse_price("cpu=0.68, cuda=2.99") == {"cpu": 0.68, "cuda": 2.99}
    for bad, said in (
        ("cpu", "malformed"),
        ("cpu=", "malformed"),
        ("cpu=abc", "not a number"),
        ("cuda=-1", "non-negative"),
    ):
        with pytest.raises(ValueError, match=said):
            parse_price(bad)
    files = {
        "p.toml": 'cpu = 0.68\n"cuda:1" = 2.99\n',
        "p.json": '{"prices": {"cpu": 0.68}}',
        "p.csv": "device,usd_per_hour\ncpu,0.68\ncuda,2.99\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert read_prices(tmp_path / "p.toml") == {"cpu": 0.68, "cuda:1": 2.99}
    assert read_prices(tmp_path / "p.json") == {"cpu": 0.68}
    assert read_prices(tmp_path / "p.csv") == {"cpu": 0.68, "cuda": 2.99}
    (tmp_path / "bad.csv").write_text("gpu,price\ncuda,3\n")
    (tmp_path / "p.yaml").write_text("cpu: 1\n")
    for name, said in (
        ("bad.csv", "header must be device,usd_per_hour"),
        ("p.yaml", "use a .toml"),
        ("absent.json", "No such file"),
    ):
        with pytest.raises(ValueError, match=said):
            read_prices(tmp_path / name)


def test_a_row_and_the_prices_give_cost_per_million_samples_and_to_target():
    prices = {"cpu": 0.68, "cuda": 2.99, "cuda:1": 4.0}
    assert price_of("cuda:0", prices) == 2.99 and price_of("cuda:1", prices) == 4.0
    assert price_of("mps", prices) is None
    cpu = {"device": "cpu", "nodes": "1", "samples_per_s": "1000", "time_to_target_s": "3600"}
    assert cost_per_million_samples(cpu, prices) == pytest.approx(0.68 / 3600 * 1000)
    assert cost_to_target(cpu, prices) == pytest.approx(0.68)
    world = {
        "device": "cuda",
        "world_size": "4",
        "gpus_used": "2",
        "samples_per_s": "20000",
        "time_to_target_s": "1800",
    }
    assert devices_held(world) == 2  # four ranks on two GPUs hold two GPUs
    assert cost_to_target(world, prices) == pytest.approx(2 * 2.99 / 2)
    assert cost_to_target({**cpu, "time_to_target_s": ""}, prices) is None  # not reached
    assert cost_per_million_samples({**cpu, "device": "mps"}, prices) is None  # no price


def test_run_stores_the_prices_and_the_study_joins_each_rows_cost_beside_it(tmp_path):
    (tmp_path / "prices.json").write_text(json.dumps({"cuda": 2.99, "cpu": 0.10}))
    folder = one_study(
        tmp_path / "out",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--set",
        "max_steps=3",
        "--price",
        tmp_path / "prices.json",
        "--price",
        "cpu=0.68",
        timeout=300,
    )
    assert read_manifest(folder)["prices"] == {"cuda": 2.99, "cpu": 0.68}  # --price over the file
    read = read_folder(folder)
    (row,) = read.runs
    assert "usd_per_hour" not in row  # a price is the study's, never a column of its rows
    cost = read.context.columns(row)  # joined beside the row where a view reads it
    assert cost["usd_per_hour"] == pytest.approx(0.68)
    expected = 0.68 / 3600 * 1e6 / float(row["samples_per_s"])
    assert cost["usd_per_million_samples"] == pytest.approx(expected)
    # a cost is a metric compare's table can show (docs/measurement.md)
    shown = stbench("compare", folder, "--metric", "usd_per_million_samples", timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"| {expected:.3g} " in shown.stdout  # three figures, as the table shows a cost


def test_a_bad_price_is_one_line_and_exit_2(tmp_path):
    proc = stbench("run", "cnn-strain", "--smoke", "--price", "cpu=cheap", "--out", tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: price of cpu 'cheap' is not a number (USD per hour)"
    ]
    assert not any(tmp_path.iterdir())

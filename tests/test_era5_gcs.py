"""lstm-era5 on gs:// through gcsfs' own HTTP path, against a GCS server on loopback.

The server (gcp-storage-emulator, tests/gcs_server.py) holds a store with ARCO ERA5's layout
scaled down to a 10° grid: `2m_temperature` (time, latitude, longitude) float32, ARCO's
attributes, one chunk per hour holding the whole grid, Blosc lz4, zarr format 2. Nothing is
overridden in stbench: gcsfs finds the server through STORAGE_EMULATOR_HOST, as it would find
Google's.
"""

import csv
import re

import numpy as np
import pytest

from tests.conftest import SHARED_DATA
from tests.gcs_server import GCSServer, arco_like, grid, upload, write_arco_store
from tests.helpers import stbench

# the smoke preset's hours, and the month between
STORE = "gs://era5-test/ar/full_37-1h-10deg-chunk-1.zarr"
SPAN = ("2020-01-01", "2021-01-31T23")
SMOKE_HOURS = (31 + 29 + 31) * 24 + 31 * 24  # train 2020-01..03, test 2021-01


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    server = GCSServer(tmp_path_factory.mktemp("gcs") / "requests.log", {STORE: [*SPAN, 10.0]})
    yield server
    server.stop()


@pytest.fixture
def emulated(gcs, monkeypatch):
    """This test's processes (the CLI, its cells) talk to the loopback server."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint)
    return gcs


def runs_row(folder):
    (row,) = csv.DictReader(open(next(folder.glob("*/runs.csv"))))
    return row


def test_the_seeded_store_has_arcos_layout(emulated):
    from stbench.workloads.lstm_era5 import data

    ds = data.open_dataset(STORE)
    da = ds["2m_temperature"]
    assert da.dims == ("time", "latitude", "longitude") and da.dtype == np.float32
    assert da.attrs == {"long_name": "2 metre temperature", "short_name": "t2m", "units": "K"}
    assert (
        da.encoding["chunks"] == (1, 19, 36)
        and da.encoding["compressors"][0].get_config()["cname"] == "lz4"
    )
    assert da.encoding["zarr_format"] == 2 if "zarr_format" in da.encoding else True
    assert ds["latitude"].values[0] == 90 and ds["longitude"].values[-1] == 350


def test_smoke_run_reads_the_store_over_gcsfs_http(emulated, tmp_path):
    before = len(emulated.requests())
    proc = stbench("run", "lstm-era5", "--smoke", "--set", f"data={STORE}", "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = runs_row(tmp_path / "r")
    assert row["status"] == "ok", row["reason"]
    gets = [
        r
        for r in emulated.requests()[before:]
        if r.startswith('"GET /download/storage/v1/b/era5-test/o/')
    ]
    assert len(gets) >= SMOKE_HOURS  # one GET per hour read, each a whole-globe chunk
    bytes_read, bytes_used = int(row["bytes_read"]), int(row["bytes_used"])
    assert bytes_used == SMOKE_HOURS * 2 * 4  # two points, float32
    assert int(row["read_requests"]) >= SMOKE_HOURS and bytes_read > 20 * bytes_used
    assert float(row["read_amplification"]) == pytest.approx(bytes_read / bytes_used)
    assert 0 < float(row["first_batch_s"]) and float(row["read_mb_per_s"]) > 0
    shown = stbench(
        "compare", tmp_path / "r", "--full", check=True
    ).stdout  # beside the data phase's share
    assert "read amplification" in shown and "first batch s" in shown


CSV = SHARED_DATA / "era5" / "t2m_2020-2021_2pts.csv"


@pytest.mark.skipif(not CSV.exists(), reason="../shared/data/era5 is not beside the checkout")
def test_a_store_uploaded_through_gcsfs_reads_back_as_the_csv(emulated, tmp_path):
    from stbench.workloads.lstm_era5 import data
    from stbench.workloads.lstm_era5.prepare import prepare

    span = ("2020-01-01", "2021-12-31T23")
    _, expected, _ = data.select(data.open_dataset(str(CSV)), "40:280+20:280", "", *span)
    local = prepare(str(CSV), tmp_path / "era5.zarr", "40:280+20:280", "", *span)
    url = upload(emulated, local, "gs://era5-copies/era5.zarr")
    _, from_gs, _ = data.select(data.open_dataset(url), "40:280+20:280", "", *span)
    np.testing.assert_array_equal(from_gs, expected)


def prepare_args(out, *extra, start="2020-01-01", end="2020-02-29T23"):
    return (
        "data",
        "prepare",
        "lstm-era5",
        "--source",
        STORE,
        "--start",
        start,
        "--end",
        end,
        "--store",
        out,
        *extra,
    )


def chunk_gets(server, since: int) -> int:
    """GETs of 2m_temperature's chunks the server answered since request `since`."""
    chunk = re.compile(
        r"/o/ar%2Ffull_37-1h-10deg-chunk-1\.zarr%2F2m_temperature%2F\d+\.\d+\.\d+\?alt=media"
    )
    return sum(bool(chunk.search(r)) for r in server.requests()[since:])


def test_prepare_states_the_cost_and_refuses_above_the_limit(emulated, tmp_path):
    before = len(emulated.requests())
    proc = stbench(*prepare_args(tmp_path / "t.zarr", "--max-gb", "0.0001", end="2020-01-31T23"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        "the selection reads 744 chunks of 1 x 19 x 36 (~" in proc.stderr
    )  # known before reading them
    assert (
        "to keep 6.0 KB" in proc.stderr
        and "over the 0.0001 GB limit (--max-gb); add --yes" in proc.stderr
    )
    assert "a time-chunked copy" in proc.stderr and "fewer hours or a smaller box" in proc.stderr
    assert chunk_gets(emulated, before) == 0 and not list(tmp_path.iterdir()), (
        proc.stderr
    )  # nothing read or written


def test_a_run_over_its_read_limit_is_refused_before_any_chunk_is_read(emulated, tmp_path):
    """A run on a remote store is costed from its metadata before any cell starts (ARCO's layout
    makes a small selection read tens of GB); over max_read_gb it is one line, exit 2."""
    before = len(emulated.requests())
    proc = stbench(
        "run",
        "lstm-era5",
        "--smoke",
        "--set",
        f"data={STORE}",
        "--set",
        "max_read_gb=0.0001",
        "--out",
        tmp_path / "out",
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"data={STORE}: train and test read ~" in proc.stderr
    assert "; the training range alone reads 2,184 chunks of 1 x 19 x 36 (~" in proc.stderr
    assert (
        "(--set max_read_gb; 0: no limit)" in proc.stderr and "a time-chunked copy" in proc.stderr
    )
    assert chunk_gets(emulated, before) == 0 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_prepare_killed_midway_resumes_to_the_same_store(emulated, tmp_path):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    stbench(*prepare_args(tmp_path / "whole.zarr"), check=True)
    exe = str(Path(sys.executable).parent / "stbench")
    proc = subprocess.Popen(
        [exe, *map(str, prepare_args(tmp_path / "resumed.zarr"))], stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:  # the 1,440 hours are 9 blocks of 168: kill it once 2 are in
        lines.append(line)
        if "(2/9 blocks)" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert any("2,928 chunks" in x or "1,440 chunks" in x for x in lines), lines
    assert (
        not (tmp_path / "resumed.zarr").exists() and (tmp_path / ".resumed.zarr.partial").exists()
    )
    proc2 = stbench(
        "run",
        "lstm-era5",
        "--set",
        f"data={tmp_path / '.resumed.zarr.partial'}",
        "--out",
        tmp_path / "r",
    )
    assert (
        proc2.returncode == 2 and "a prepare that has not finished" in proc2.stderr
    )  # never taken as complete
    before = len(emulated.requests())
    again = stbench(*prepare_args(tmp_path / "resumed.zarr"), check=True)
    assert "resuming" in again.stderr and "blocks already copied" in again.stderr
    # the finished blocks are not read again (the first hour is: every prepare checks that it
    # decodes)
    assert chunk_gets(emulated, before) <= 1440 - 2 * 168 + 1
    whole, resumed = tmp_path / "whole.zarr", tmp_path / "resumed.zarr"
    files = sorted(p.relative_to(whole) for p in whole.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(resumed) for p in resumed.rglob("*") if p.is_file())
    assert all((whole / f).read_bytes() == (resumed / f).read_bytes() for f in files)


def small_store(tmp_path, name="t.zarr", rename=None):
    """A local ARCO-layout store of the first two days (the hours a bad-input test reads)."""
    ds = arco_like(*grid(10.0), "2020-01-01", "2020-01-02T23")
    return write_arco_store(tmp_path / name, ds.rename(rename) if rename else ds)


@pytest.fixture
def bad_stores(emulated, tmp_path_factory):
    """gs:// URLs of a store without 2m_temperature and of one whose first chunk is garbage."""
    tmp = tmp_path_factory.mktemp("bad")
    no_var = upload(
        emulated, small_store(tmp, "n.zarr", {"2m_temperature": "t2m"}), "gs://era5-bad/no-var.zarr"
    )
    corrupt = upload(emulated, small_store(tmp, "c.zarr"), "gs://era5-bad/corrupt.zarr")
    emulated.filesystem().pipe_file(
        "era5-bad/corrupt.zarr/2m_temperature/0.0.0", b"not a blosc frame" * 40
    )
    return {"no-var": no_var, "corrupt": corrupt}


DAY = (
    "--set",
    "train_start=2020-01-01",
    "--set",
    "train_end=2020-01-01T23",
    "--set",
    "test_start=2020-01-02",
    "--set",
    "test_end=2020-01-02T23",
)


@pytest.mark.parametrize(
    "case,message",
    [
        ("unreachable", "cannot reach 127.0.0.1:"),
        (
            "no-bucket",
            "data source gs://no-such-bucket/era5.zarr does not exist or holds no zarr store",
        ),
        (
            "no-var",
            "data source gs://era5-bad/no-var.zarr has no "
            "2m_temperature(time, latitude, longitude) variable",
        ),
        ("corrupt", "data source gs://era5-bad/corrupt.zarr is corrupt or unreadable ("),
    ],
)
@pytest.mark.parametrize("command", ["run", "prepare"])
def test_bad_remote_input_is_one_line_and_writes_nothing(
    bad_stores, monkeypatch, tmp_path, case, message, command
):
    import socket

    url = {"unreachable": STORE, "no-bucket": "gs://no-such-bucket/era5.zarr"}.get(
        case
    ) or bad_stores[case]
    if case == "unreachable":
        with socket.socket() as s:  # a loopback port nothing listens on
            s.bind(("127.0.0.1", 0))
            monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{s.getsockname()[1]}")
    out = tmp_path / "out"
    if command == "run":
        proc = stbench(
            "run", "lstm-era5", "--set", f"data={url}", *DAY, "--epochs", "1", "--out", out
        )
    else:
        proc = stbench(
            "data",
            "prepare",
            "lstm-era5",
            "--source",
            url,
            "--start",
            "2020-01-01",
            "--end",
            "2020-01-02T23",
            "--store",
            out / "era5.zarr",
        )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
    assert not out.exists() or not list(out.rglob("*"))


@pytest.mark.slow
def test_streamed_windows_are_read_by_the_loaders_workers_and_counted(emulated, tmp_path):
    """read=stream: the training windows come from the store while training, through two
    DataLoader workers that each open their own gcsfs session; their reads reach the row."""
    before = len(emulated.requests())
    proc = stbench(
        "run",
        "lstm-era5",
        "--set",
        f"data={STORE}",
        "--set",
        "read=stream",
        "--set",
        "workers=2",
        "--set",
        "prefetch=4",
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--set",
        "max_steps=6",
        "--set",
        "max_eval_batches=2",
        "--set",
        "train_start=2020-01-01",
        "--set",
        "train_end=2020-01-07T23",
        "--set",
        "test_start=2020-01-08",
        "--set",
        "test_end=2020-01-09T23",
        "--out",
        tmp_path / "r",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = runs_row(tmp_path / "r")
    assert row["status"] == "ok", row["reason"]
    # built: the training week's statistics (168 h) and 48 test hours; streamed: each batch's
    # hours again
    assert (
        int(row["read_requests"]) > 2 * (168 + 48)
        and chunk_gets(emulated, before) >= int(row["read_requests"]) - 10
    )
    assert float(row["read_amplification"]) > 10 and float(row["first_batch_s"]) > 0

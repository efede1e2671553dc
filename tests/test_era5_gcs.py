"""lstm-era5 on gs:// through gcsfs' own HTTP path, against a GCS server on loopback.

The server (gcp-storage-emulator, tests/gcs_server.py) holds a store with ARCO ERA5's layout
scaled down to a 10° grid: `2m_temperature` (time, latitude, longitude) float32, ARCO's
attributes, one chunk per hour holding the whole grid, Blosc lz4, zarr format 2. Nothing is
overridden in stbench: gcsfs finds the server through STORAGE_EMULATOR_HOST, as it would find
Google's.
"""

import csv

import numpy as np
import pytest

from tests.conftest import SHARED_DATA
from tests.gcs_server import GCSServer, arco_like, grid, upload, write_arco_store
from tests.helpers import stbench

STORE = "gs://era5-test/ar/full_37-1h-10deg-chunk-1.zarr"  # the smoke preset's hours, and the month between
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
    assert da.encoding["chunks"] == (1, 19, 36) and da.encoding["compressors"][0].get_config()["cname"] == "lz4"
    assert da.encoding["zarr_format"] == 2 if "zarr_format" in da.encoding else True
    assert ds["latitude"].values[0] == 90 and ds["longitude"].values[-1] == 350


def test_smoke_run_reads_the_store_over_gcsfs_http(emulated, tmp_path):
    before = len(emulated.requests())
    proc = stbench("run", "lstm-era5", "--smoke", "--set", f"data={STORE}", "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = runs_row(tmp_path / "r")
    assert row["status"] == "ok", row["reason"]
    gets = [r for r in emulated.requests()[before:] if r.startswith('"GET /download/storage/v1/b/era5-test/o/')]
    assert len(gets) >= SMOKE_HOURS  # one GET per hour read, each a whole-globe chunk
    bytes_read, bytes_used = int(row["bytes_read"]), int(row["bytes_used"])
    assert bytes_used == SMOKE_HOURS * 2 * 4  # two points, float32
    assert int(row["read_requests"]) >= SMOKE_HOURS and bytes_read > 20 * bytes_used
    assert float(row["read_amplification"]) == pytest.approx(bytes_read / bytes_used)
    assert 0 < float(row["first_batch_s"]) and float(row["read_mb_per_s"]) > 0


CSV = SHARED_DATA / "era5" / "t2m_2020-2021_2pts.csv"


@pytest.mark.skipif(not CSV.exists(), reason="../shared/data/era5 is not beside the checkout")
def test_a_store_uploaded_through_gcsfs_reads_back_as_the_csv(emulated, tmp_path):
    from stbench.workloads.lstm_era5 import data
    from stbench.workloads.lstm_era5.split import prepare

    span = ("2020-01-01", "2021-12-31T23")
    _, expected, _ = data.select(data.open_dataset(str(CSV)), "40:280+20:280", "", *span)
    local = prepare(str(CSV), tmp_path / "era5.zarr", "40:280+20:280", "", *span)
    url = upload(emulated, local, "gs://era5-copies/era5.zarr")
    _, from_gs, _ = data.select(data.open_dataset(url), "40:280+20:280", "", *span)
    np.testing.assert_array_equal(from_gs, expected)

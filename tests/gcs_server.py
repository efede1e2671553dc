"""A GCS-protocol server on loopback for the tests: gcp-storage-emulator in its own process.

gcsfs talks to it over real HTTP (JSON API, media downloads with Range headers, uploads) when
`STORAGE_EMULATOR_HOST` names it; nothing in stbench knows it is not Google's. Every request
the server answers is one line of its log, so a test can show that the bytes came over HTTP.

Run as a script it serves until its stdin closes: `python gcs_server.py LOG SEEDS [--threads]`
prints `PORT` once it answers. SEEDS is JSON, {gs:// URL: [start, end, grid step in degrees]}:
ARCO-layout stores the server holds from the start (written in its own process straight into
its storage: ten thousand uploads over HTTP would take the fixture minutes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

ARCO_ATTRS = {"long_name": "2 metre temperature", "short_name": "t2m", "units": "K"}


class GCSServer:
    """The server process; `endpoint` is what STORAGE_EMULATOR_HOST takes."""

    def __init__(self, log: Path, seeds: dict | None = None, threads: bool = False):
        self.log = Path(log)
        args = [sys.executable, __file__, str(self.log), json.dumps(seeds or {})] + (
            ["--threads"] if threads else []
        )
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.proc.kill()
            raise RuntimeError(f"the GCS emulator did not start: {line!r}")
        self.port = int(line)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._wait()

    def _wait(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(
                    f"{self.endpoint}/storage/v1/b?project=test", timeout=2
                ).read()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the GCS emulator does not answer") from None
                time.sleep(0.1)

    def requests(self) -> list[str]:
        """The request lines the server has logged ('GET /download/storage/v1/b/... 200')."""
        return [
            line for line in self.log.read_text().splitlines() if '"' in line and "HTTP/" in line
        ]

    def filesystem(self):
        # gcsfs' HTTP class: its default one first asks a gRPC API for the bucket's layout (see
        # stbench.workloads.lstm_era5.remote), which the emulator does not serve
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(token="anon", endpoint_url=self.endpoint, skip_instance_cache=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def arco_like(lats, lons, start: str, end: str, seed: int = 0):
    """An ERA5 2 m temperature Dataset as the ARCO store holds it: variable `2m_temperature`
    (time, latitude, longitude) float32 with ARCO's attributes, latitude north to south,
    longitude 0..360 east, hourly; values from stbench's ERA5-schema generator's recipe."""
    import xarray as xr

    rng = np.random.default_rng(seed)
    time_ = np.arange(np.datetime64(start, "h"), np.datetime64(end, "h") + 1)
    hours = np.arange(len(time_), dtype=np.float32)
    lat, lon = np.asarray(lats, np.float32)[:, None], np.asarray(lons, np.float32)[None, :]
    base = 300.0 - 0.45 * np.abs(lat)
    day = (hours[:, None, None] % 24 + lon / 15.0) % 24
    season = (
        -np.cos(2 * np.pi * (hours[:, None, None] / 24 - 15) / 365.25)
        * (2 + 0.2 * np.abs(lat))
        * np.sign(lat + 1e-9)
    )
    noise = rng.standard_normal((1, *base.shape)).astype(np.float32) * 0.5
    t2m = (base + season + 4.0 * np.cos(2 * np.pi * (day - 15) / 24) + noise).astype(np.float32)
    return xr.Dataset(
        {"2m_temperature": (("time", "latitude", "longitude"), t2m, dict(ARCO_ATTRS))},
        coords={
            "time": time_.astype("datetime64[ns]"),
            "latitude": np.asarray(lats, np.float32),
            "longitude": np.asarray(lons, np.float32),
        },
    )


def grid(step: float):
    """ERA5's global grid at `step` degrees: latitude 90 .. -90, longitude 0 .. 360 - step."""
    return np.arange(90.0, -90.0 - 1e-9, -step), np.arange(0.0, 360.0 - 1e-9, step)


def write_arco_store(path, ds):
    """Write `ds` to a local zarr format 2 store with ARCO ERA5's layout and encoding: one chunk
    per hour holding the whole grid, Blosc(lz4, level 5, byte shuffle) as zarr 2 writes by
    default (the ARCO stores were written so), consolidated metadata."""
    from numcodecs import Blosc

    whole = (1, ds.sizes["latitude"], ds.sizes["longitude"])
    blosc = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)
    encoding = {name: {"chunks": whole, "compressors": (blosc,)} for name in ds.data_vars}
    ds.to_zarr(path, mode="w", consolidated=True, zarr_format=2, encoding=encoding)
    return path


def upload(server: GCSServer, local: Path, url: str) -> str:
    """Copy a local store into the server (the bucket is created); returns the gs:// URL."""
    fs = server.filesystem()
    bucket = url.removeprefix("gs://").split("/")[0]
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    fs.put(str(local), url.removeprefix("gs://"), recursive=True)
    return url


def _seed(emulator_storage, url: str, start: str, end: str, step: float) -> None:
    """Write an ARCO-layout store into the emulator's storage directly (see the module's note)."""
    import zarr
    from gcp_storage_emulator.handlers import buckets, objects

    store = zarr.storage.MemoryStore()
    write_arco_store(store, arco_like(*grid(step), start, end))
    bucket, _, prefix = url.removeprefix("gs://").partition("/")
    buckets.create_bucket(bucket, emulator_storage)
    for key, value in store._store_dict.items():
        data, name = value.to_bytes(), f"{prefix}/{key}"
        obj = objects._make_object_resource(
            "http://127.0.0.1", bucket, name, "application/octet-stream", str(len(data))
        )
        emulator_storage.create_file(bucket, name, data, objects._checksums(data, obj))


def _serve(log: str, seeds: dict, threads: bool) -> None:
    import logging
    from http import server as http_server

    from gcp_storage_emulator import server as emulator
    from gcp_storage_emulator import storage

    logging.basicConfig(filename=log, level=logging.INFO, format="%(message)s")
    # In memory the emulator's JSON dump of every object's metadata after each write only
    # persists what the process holds anyway, and costs O(objects) per upload: off.
    storage.Storage._write_config_to_file = lambda self: None
    # socketserver listens with a backlog of 5: gcsfs and zarr open more connections at once, and
    # the ones beyond it wait for a SYN retransmit (1 s, then 3 s): a loopback server at dial-up
    # speed
    http_server.HTTPServer.request_queue_size = 256
    if threads:  # concurrent reads for the loader study; writes stay the fixture's, before reads
        emulator.server.HTTPServer = http_server.ThreadingHTTPServer
    srv = emulator.create_server("127.0.0.1", 0, in_memory=True)
    for url, (start, end, step) in seeds.items():
        _seed(srv._storage, url, start, end, step)
    srv.start()
    print(srv._api._httpd.server_address[1], flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    srv.stop()


if __name__ == "__main__":
    _serve(sys.argv[1], json.loads(sys.argv[2]), "--threads" in sys.argv[3:])

"""lstm-era5's data-loading study: the study's two points read from ERA5 as ARCO lays
it out and from a time-major copy, before training or batch by batch while training, by a
DataLoader with and without workers and prefetch.

    python benchmarks/era5_loading.py --out results/reference/ref-cpu2-lstm-era5-loading \
        [--step 5] [--steps 40]

It starts the loopback GCS server of the tests (tests/gcs_server.py, gcp-storage-emulator) holding
a store with ARCO ERA5's layout on a coarser grid (`--step` degrees: 2m_temperature, one chunk per
hour x the whole globe, Blosc lz4, zarr format 2) for the smoke preset's hours, writes the same
store to a local folder, makes a time-major copy of the two points with `stbench data prepare`
(from the local store), and runs one stbench study over

    data   = the remote store (gs://, gcsfs over HTTP) | the local ARCO-layout store
             | the time-major copy
    read   = memory (the selection read before training) | stream (each batch read while training)
    workers x prefetch

Each row has samples/s, the data phase's share of a step (data_s, data_wait_s), bytes_read,
read_amplification, read_mb_per_s and first_batch_s; `stbench compare --full OUT` shows them side
by side. The absolute MB/s is a loopback figure (a single-threaded Python server on this host);
the read amplification is the real one for these layouts, and scales with the grid: on ARCO's
0.25° globe one hour of two points costs a 721 x 1440 chunk. A benchmark: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.gcs_server import GCSServer, arco_like, grid, write_arco_store  # noqa: E402

SPAN = (
    "2020-01-01",
    "2021-01-31T23",
)  # the smoke preset's train (2020-01..03) and test (2021-01) hours
REMOTE = "gs://era5-loading/ar/full_37-1h-{step}deg-chunk-1.zarr"


def stbench(*args: str, env: dict, cwd: Path) -> None:
    # run in the work folder with the stores named relative to it: the rows record data paths as
    # typed, and a committed study must not carry this machine's temporary folders
    exe = Path(sys.executable).parent / "stbench"
    print("$ stbench", " ".join(args), flush=True)
    subprocess.run([str(exe), *args], check=True, env=env, cwd=cwd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the study's result folder")
    ap.add_argument("--step", type=float, default=5.0, help="grid step in degrees (ARCO: 0.25)")
    ap.add_argument("--steps", type=int, default=40, help="training steps per cell (max_steps)")
    ap.add_argument("--workers", default="0,2")
    ap.add_argument("--prefetch", default="2,8")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="era5-loading-"))
    remote = REMOTE.format(step=f"{args.step:g}")
    server = GCSServer(work / "requests.log", {remote: [*SPAN, args.step]}, threads=True)
    try:
        env = {**os.environ, "STORAGE_EMULATOR_HOST": server.endpoint}
        write_arco_store(work / "arco-layout.zarr", arco_like(*grid(args.step), *SPAN))
        local, copy = "arco-layout.zarr", "time-major.zarr"
        stbench(
            "data",
            "prepare",
            "lstm-era5",
            "--source",
            local,
            "--points",
            "40:280+20:280",
            "--start",
            SPAN[0],
            "--end",
            SPAN[1],
            "--store",
            copy,
            env=env,
            cwd=work,
        )
        stbench(
            "run",
            "lstm-era5",
            "--smoke",
            "--epochs",
            "1",
            "--set",
            f"data={remote},{local},{copy}",
            "--set",
            "points=40:280+20:280",  # a local file's default is every series it holds
            "--set",
            "read=memory,stream",
            "--set",
            f"workers={args.workers}",
            "--set",
            f"prefetch={args.prefetch}",
            "--set",
            f"max_steps={args.steps}",
            "--set",
            "max_eval_batches=5",
            "--out",
            str(args.out.resolve()),
            env=env,
            cwd=work,
        )
        print(f"requests the loopback server answered: {len(server.requests()):,}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""`dcrnn-pems`: seq2seq DCRNN on PeMS-style traffic speeds, with the data modes of the
"Scalable PyTorch Geometric Temporal" study: materialized windows vs index-batching, series
kept on the GPU, and rank-sharded data for DDP. The packaged sensor graphs are DCRNN's
(MIT; see ATTRIBUTION.md)."""

from stbench.contract import BATCH, CHECKPOINT, BuildContext, Param, SizeAxis, Workload

from . import source


def build(params: dict, ctx: BuildContext):
    from .task import make_task  # torch: in the cell's process only

    return make_task(params, ctx)


def skip(params: dict, batch_size: int, device: str, memory: dict) -> str | None:
    if params["batching"] == "dask-index" and params["workers"]:
        return (
            "batching=dask-index fetches each batch through the rank's Dask client, which a "
            "DataLoader worker process does not have: workers=0"
        )
    return None


_PAPER = {"batch_size": 64, "epochs": 1, "lr": 0.01}

WORKLOAD = Workload(
    name="dcrnn-pems",
    summary="DCRNN traffic forecasting; data memory of base vs index vs gpu-index batching, "
    "DDP with sharded data, the series on a Dask cluster",
    params=(
        Param(
            "data",
            str,
            "generated",
            "generated | a pems-bay.h5-style file (key 'speed') | a chickenpox.json",
        ),
        Param(
            "graph",
            str,
            "auto",
            "auto (a speed file: the packaged graph it matches; generated: by size) "
            "| bay | la | generated | a DCRNN adj_mx*.pkl",
        ),
        Param(
            "size",
            str,
            "bay",
            "generated speeds: bay 325x52,116; la 207x34,272; 2k7 and 11k sensors x 52,116",
            ("bay", "la", "2k7", "11k"),
        ),
        Param("steps", int, 0, "time steps to generate (0: the size's span)", minimum=0),
        Param(
            "batching",
            str,
            "index",
            "how windows are made (dask-index: from a Dask array of the series persisted on "
            "the cluster's workers, --launcher dask)",
            ("base", "index", "gpu-index", "sharded-index", "dask-index"),
        ),
        Param(
            "model",
            str,
            "dcrnn",
            "dcrnn (seq2seq, ~372 k params) or tiny (one DCGRU layer)",
            ("dcrnn", "tiny"),
        ),
        Param("in_steps", int, 12, "input steps (5 min each)", minimum=1),
        Param("horizon", int, 12, "steps predicted", minimum=1),
        Param("units", int, 64, "DCGRU hidden units", minimum=1),
        Param("layers", int, 2, "DCGRU layers in encoder and decoder", minimum=1),
        Param("k", int, 2, "diffusion steps", minimum=1),
        Param("cl_decay_steps", int, 2000, "scheduled-sampling decay", minimum=1),
        Param("adam_eps", float, 1e-3, "Adam epsilon (DCRNN uses 1e-3)", minimum=0.0),
        Param("clip", float, 5.0, "gradient-norm clip (0: none)", minimum=0.0),
        Param("lr", float, 0.01, "Adam learning rate", minimum=0.0),
        CHECKPOINT,
    ),
    presets={
        "default": {"batch_size": 32, "epochs": 1, "units": 16, "layers": 1, "max_steps": 150},
        "paper": {**_PAPER, "epochs": 100},
        "pgt-i": {
            "batch_size": 64,
            "epochs": 1,
            "model": "tiny",
            "units": 2,
            "k": 3,
            "lr": 1e-3,
            "clip": 0.0,
        },
        # a smoke proves the path in seconds: a DCRNN step of 24 recurrent cells over the 325-sensor
        # graph takes ~0.3 s on 2 cores, so 5 steps an epoch (of 12) and the 2 validation batches of
        # two days of speeds (3,000 steps and whole epochs took 55 s: 130 steps). One intra-op
        # thread: with two, each of a step's thousands of small ops waits at a barrier for a thread
        # the OS has parked whenever other processes share the cores (a step took 16-26 s beside
        # the test suites of two others on the 2-core VM, 3.8 s with one thread)
        "smoke": {
            "batch_size": 32,
            "epochs": 2,
            "steps": 600,
            "units": 16,
            "layers": 1,
            "warmup_steps": 2,
            "max_steps": 5,
            "threads": 1,
        },
    },
    build=build,
    # The batch, from the study's 32 windows to 4,096 over PeMS-BAY's 325-sensor graph: a step
    # diffuses every window over every sensor, 190 MFLOP a window (6.1 GFLOP a step at 32, 777 at
    # 4,096: docs/workloads/dcrnn-pems.md); a month of 5-minute speeds (~6,000 training windows)
    # keeps one step an epoch at the largest.
    size=SizeAxis(
        BATCH, "windows a batch", (32, 256, 1024, 4096), smoke=(8, 32), fixed={"steps": 8640}
    ),
    # DCRNN's published average over its 12 horizons is ~0.6 x the historical average's MAE (1.74
    # vs 2.88 mph on PeMS-BAY); the default preset ends near there on the generated speeds, and
    # 0.7 x is the point where it has clearly learnt more than the weekly profile.
    target_ratio=0.7,
    target_note="val MAE at 70% of the historical average's (per sensor and time of week)",
    check=source.check,
    skip=skip,
    strategies=("single", "ddp", "zero1", "fsdp"),
    data_sources=(
        "generated speeds on the real PeMS-BAY / METR-LA graphs or on generated graphs",
        "pems-bay.h5 / metr-la.h5 (pandas HDF5, key 'speed') with adj_mx*.pkl",
        "chickenpox.json (PyTorch Geometric Temporal layout)",
    ),
)

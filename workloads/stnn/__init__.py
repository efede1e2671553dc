"""`stnn`: STNN (Ziat et al., ICDM 2017) on sea-surface temperature grids, with its relation
tensor dense on the device, streamed from host memory, or sparse (see relations.py).

Seeds: the original code fits about 50x50 cells on a 16 GB V100; a project streamed W through
a second GPU to reach 60x168 and concluded a sparse representation was what it needed.
"""

from stbench.contract import BATCH, BuildContext, Param, SizeAxis, Workload

from . import sizing
from .sizing import STATES


def build(params: dict, ctx: BuildContext):
    from .task import make_task  # torch: in the cell's process only

    return make_task(params, ctx)


_PAPER = {"batch_size": 1000, "epochs": 1}  # lr 3e-3 is the parameter's own default
# The default preset trains 15 epochs (77 s on an idle 2-core CPU) at lr 1e-3: the
# original's 3e-3 is tuned for thousands of epochs with a plateau decay, and over a few epochs
# it leaves the held-out RMSE jumping by +-5% from one epoch to the next; at 1e-3 it settles at
# 0.80-0.82 x persistence on the generated field (seed 0) and 0.85-0.90 x on the real PST file.
_DEFAULT = {**_PAPER, "epochs": 15, "lr": 1e-3}

WORKLOAD = Workload(
    name="stnn",
    summary="STNN on SST grids; relations dense vs host-offloaded vs sparse, "
    "memory and batches/s by grid size",
    params=(
        Param(
            "data",
            str,
            "generated",
            "generated (SST anomalies calibrated to the PST file's statistics) | a "
            "NOAA-style SST netCDF (time, lat, lon; NaN or a mask over land)",
        ),
        Param(
            "grid",
            str,
            "30x84",
            "generated grid LATxLON: 30x84 (paper), 60x168 (full resolution), 180x360 (1 deg "
            "globe), 360x720, 721x1440 (0.25 deg globe, ERA5's layout)",
        ),
        Param("months", int, 399, "generated months", minimum=3),
        Param("land", float, 0.1, "generated land fraction", minimum=0.0),
        Param("variable", str, "auto", "netCDF variable (auto: the first with time, lat, lon)"),
        Param("box", str, "", "lat0:lat1:lon0:lon1 selection of a file"),
        Param("start", str, "", "first month of a file to use"),
        Param("end", str, "", "last month of a file to use"),
        Param("coarsen", int, 1, "average LxL cells of a file (2: 1 deg -> 2 deg)", minimum=1),
        Param("test_steps", int, 12, "held-out months forecast by rolling the dynamics", minimum=1),
        Param(
            "mode",
            str,
            "stnn",
            "stnn: fixed W; stnn-r: a learned weight per edge; stnn-d: learned dense W",
            ("stnn", "stnn-r", "stnn-d"),
        ),
        Param(
            "relations",
            str,
            "sparse",
            "where W lives and how it is applied",
            ("dense", "offload", "sparse"),
        ),
        Param(
            "neighbours",
            str,
            "4",
            "4 or 8 neighbours (r=2), or dir4: one relation per direction (r=5)",
            ("4", "8", "dir4"),
        ),
        Param("chunk", int, 250, "offload: relation rows streamed per copy", minimum=1),
        Param("nz", int, 8, "latent factor size", minimum=1),
        Param("nhid", int, 0, "hidden units of the dynamics MLP (nlayers > 1)", minimum=0),
        Param("nlayers", int, 1, "dynamics layers (1: one linear map)", minimum=1),
        Param("activation", str, "tanh", "dynamics activation", ("tanh", "identity")),
        Param("lambd", float, 0.1, "weight of the dynamics loss", minimum=0.0),
        Param("l1", float, 0.0, "L1 on learned relations", minimum=0.0),
        Param("lr", float, 3e-3, "Adam learning rate (betas 0, 0.999)", minimum=0.0),
        Param(
            "state",
            str,
            "auto",
            "Adam's second moment: fp32 with a step counter per row (torch's Adam exactly) | "
            "bf16 on one shared decay scale, no counters (2.25x smaller; steps within 0.2%) | "
            "auto: fp32 unless it would not fit the RAM (x.state_bits says which ran)",
            (*STATES, "auto"),
        ),
        Param(
            "factor_grad",
            str,
            "sparse",
            "the factors' gradient: sparse (COO rows of the batch where a pass only looks "
            "factors up) | dense (the size of all factors every step: for tools that read every "
            "tensor's storage, e.g. TORCH_CUDA_SANITIZER)",
            ("sparse", "dense"),
        ),
    ),
    presets={
        "default": _DEFAULT,
        "paper": {**_PAPER, "epochs": 50},
        "full": {**_PAPER, "grid": "60x168", "max_steps": 200},
        "global": {**_PAPER, "grid": "180x360", "max_steps": 200},
        # one intra-op thread: a smoke stays seconds long on shared cores (dcrnn-pems' preset
        # says why)
        "smoke": {
            "batch_size": 200,
            "epochs": 2,
            "grid": "12x24",
            "months": 60,
            "warmup_steps": 2,
            "threads": 1,
        },
    },
    build=build,
    # The batch of (cell, month) pairs, from the study's 1,000 to 500,000, with dense relations:
    # each dynamics pair multiplies a relation row over every cell of the grid, so a step's work
    # grows with the batch (sparse relations' ~550 FLOP a pair never leave launch-bound): 0.11
    # GFLOP a step on average over the two passes at 1,000 pairs, 54.6 at 500,000
    # (docs/workloads/stnn.md); the default 30x84 grid holds ~800,000 pairs of each pass. An
    # epoch cut to two steps, a decoder batch and a dynamics batch (max_steps cuts both passes
    # in proportion): a window spans whole epochs, so every window holds both passes alike.
    size=SizeAxis(
        BATCH,
        "pairs a batch",
        (1000, 10_000, 100_000, 500_000),
        smoke=(200, 1000),
        fixed={"relations": "dense", "max_steps": 2},
    ),
    # Held-out RMSE passes 0.82 x persistence's about half-way through the default's first
    # epoch (step ~800 of 1,752 at batch 1000) and settles near 0.80 x: a target the model must
    # learn for (an untrained one scores ~0.87 x), reached early enough to compare machines on.
    target_ratio=0.82,
    target_note="val RMSE at 82% of persistence's (next month = this month's anomaly)",
    check=sizing.check,
    skip=sizing.skip,
    predict=sizing.predict_bytes,
    strategies=("single",),
    data_sources=(
        "generated SST-anomaly fields on any grid (30x84, 60x168, 180x360 presets), "
        "calibrated to PST",
        "NOAA-style SST netCDF via xarray (e.g. OISST v2 monthly means; land masked)",
    ),
)

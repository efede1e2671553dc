"""The reference studies the acceptance runs after its correctness part: each a real study of a
seed at a size worth publishing, the CPU (all the GPU machine's cores) beside the GPU in one
stbench run, its folder to commit as results/reference/ref-<gpu>-<name>.

Each is sized from the first H100 run (docs/acceptance-runs/h100-2026-11-26), where every
study ran past a cap guessed from the 2-core VM: a cell there costs ~9 s besides what it trains
(a process importing torch, initialising CUDA, making its data, warming up and evaluating), a
dcrnn-pems cell ~13 s, so a study's cost is mostly its count of cells. The cuda cells come
first (the figures no machine has given yet), every cell is killed at its --timeout, and the
study's step at its cap. Sizes here are smaller than the ones the issue named (`--epochs 5 10
15`, both stnn grids, batch 512 to 16,384), which took 152, 135 and 66 s by those timings: the
whole run must fit one 9-minute command beside its correctness part.
"""

from __future__ import annotations

from .steps import REFERENCE, Step, args


def study(result: str, cap_s: int, what: str, line: str, rehearse: str = "") -> Step:
    """A reference study: its stbench line, and the one a rehearsal runs (its CPU cells small)."""
    return Step(
        f"ref-{result}",
        REFERENCE,
        cap_s,
        what,
        argv=args(line),
        rehearse_argv=args(rehearse) if rehearse else (),
        result=result,
    )


# A rehearsal proves each command's path (its cuda cells stop at the CPU build's error), so its
# CPU cells are as few and small as the path allows, each given 120 s: on the 2-core CI machine,
# busy, a cell's setup alone (torch, the data) can take 30 s.
LSTM = "run lstm-era5 --preset paper --device cuda cpu"
STNN = (
    "run stnn --device cuda cpu --epochs 1 --set relations=dense,offload,sparse "
    "--set max_eval_batches=2"
)
DCRNN = (
    "run dcrnn-pems --preset pgt-i --device cuda cpu --set batching=index,gpu-index "
    "--set max_eval_batches=2"
)

STUDIES = (
    # The ERA5 LSTM study's table (the paper preset: 2 points, 2020 to train, 2021 to test,
    # batch 128, 2 workers). On the H100 an epoch took 0.5 s on cuda and 2.7 s on the 16-core
    # CPU (61 steps/s: no faster than the 2-core VM), each cell ~9.5 s more: epochs 1, 2, 3
    # make cuda ~31 s and the CPU ~45 s. The fit (fixed + per-epoch time) needs three points.
    study(
        "lstm-era5-paper",
        82,
        "ERA5 LSTM: cpu vs cuda at 1, 2, 3 epochs",
        f"{LSTM} --epochs 1 2 3 --timeout 40",
        f"{LSTM} --smoke --epochs 1 --timeout 120",
    ),
    # The STNN table at 60x168 (9,072 cells), where offload streams its relations in chunks:
    # dense, offload and sparse relations, batches/s. On the H100 a cuda cell took ~10.5 s, a
    # CPU cell at 30x84 ~10 s; a dense step at 60x168 took 0.35-0.45 s on 2 cores
    # (ref-cpu2-stnn-relations), so 20 steps on 16 cores keep a CPU cell near 15 s: ~75 s.
    study(
        "stnn-relations",
        72,
        "stnn: 60x168 x dense, offload, sparse",
        f"{STNN} --set grid=60x168 --set max_steps=20 --timeout 40",
        f"{STNN} --smoke --set max_steps=6 --timeout 120",
    ),
    # The index-batching table (the Scalable PGT study's tiny DCRNN, pgt-i, on PeMS-BAY's graph,
    # 52,116 generated steps): data memory, peak GPU memory, steps/s of index and gpu-index. On
    # the H100 a cuda cell took 15 s (13 s of setup: the series, the windows' index), 38-41
    # steps/s; 2 cores trained 11 steps/s (ref-cpu2-dcrnn-pems-bay-memory): 30 steps make the 4
    # cells ~60 s.
    study(
        "dcrnn-pems-index",
        60,
        "dcrnn: index vs gpu-index, cpu and cuda",
        f"{DCRNN} --set max_steps=30 --timeout 30",
        f"{DCRNN} --smoke --set max_steps=5 --timeout 120",
    ),
    # The thesis' batch knee on the GPU: on the H100 samples/s still rose 1.6x from batch 1,024
    # to 2,048 (316,000 to 503,000), so the sizes double from 2,048 to 16,384 (where a 1-D CNN
    # of 150k parameters fills an H100 at last). Epochs, not a time budget: a budget makes the
    # study a time-to-target one (the H100's first run printed an MLPerf table of targets not
    # reached instead of the knee). 5 epochs of 75,000 training curves: 184 steps at 2,048
    # (~1 s at 246 steps/s), 23 at 16,384; ~11 s a cell, 4 cells. The CPU's knee is
    # ref-cpu2-cnn-strain-batch-sweep (75 to 1,024: flat from 300).
    study(
        "cnn-strain-batch-knee",
        46,
        "cnn-strain: batch 2,048 to 16,384 on cuda",
        "run cnn-strain --device cuda --batch-size 2048 4096 8192 16384 --epochs 5 "
        "--set n_samples=100000 --set max_eval_batches=2 --timeout 25",
    ),
    # The largest grid the GPU trains with dense relations (n x n per relation: the memory-bound
    # mode): the memory model predicts 46 GiB at 200x400 and 91 GiB at 240x480, so an H100
    # trains the first and the plan skips the second with that reason; an H200 trains both.
    # Generating the field is cheap (a sparse cell's setup was 4-6 s at 180x360 on 2 cores) and
    # a dense step at 200x400 ~0.6 TFLOP; W is made on the GPU (relations.py), not filled in
    # host memory and copied. Not reached on the H100; last, as the least needed.
    study(
        "stnn-largest-grid",
        35,
        "stnn: dense relations at 200x400, 240x480",
        "run stnn --device cuda --epochs 1 --set grid=200x400,240x480 --set relations=dense "
        "--set max_steps=8 --set max_eval_batches=1 --timeout 30",
    ),
)

"""The reference studies the acceptance runs after its correctness part: each a real study of a
seed at a size worth publishing, the CPU (all the GPU machine's cores) beside the GPU in one
stbench run, its folder to commit as results/reference/ref-<gpu>-<name>.

Each is sized from its CPU timings on the 2-core VM (the committed ref-cpu2-* folders) so that
it ends inside its cap even on a slower machine: the cuda cells come first (the figures no
machine has given yet), every cell is killed at its --timeout, and the study's step at its cap.
A cell costs ~4-5 s of setup on the GPU machine (torch, CUDA, the data) besides what it trains.
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
    # batch 128, 2 workers). The CPU cells took 13/27/35 s on 2 cores (ref-cpu2-lstm-era5-paper),
    # where the 2 loader workers share the cores with training; 16 cores give them their own:
    # ~50 s with setup. On the GPU an epoch's 137 steps of a 2-layer 64-unit cuDNN LSTM take
    # well under a second: 3 cells ~25 s. The 15-epoch cell is killed at 45 s (3 s an epoch).
    study(
        "lstm-era5-paper",
        95,
        "ERA5 LSTM: cpu vs cuda at 5, 10, 15 epochs",
        f"{LSTM} --epochs 5 10 15 --timeout 45",
        f"{LSTM} --smoke --epochs 1 --timeout 120",
    ),
    # The STNN table: 30x84 and 60x168, dense, offload and sparse relations, batches/s. A dense
    # or offload step at 60x168 took 0.35-0.45 s on 2 cores (205 steps in 70-92 s,
    # ref-cpu2-stnn-relations), 0.05 s at 30x84, sparse 2 ms: 40 steps (5 of them warm-up) make
    # the CPU's 6 cells ~35 s with 16 cores (18 s a cell on 2), the GPU's ~36 s of setup.
    study(
        "stnn-relations",
        75,
        "stnn: 30x84, 60x168 x dense, offload, sparse",
        f"{STNN} --set grid=30x84,60x168 --set max_steps=40 --timeout 40",
        f"{STNN} --smoke --set max_steps=6 --timeout 120",
    ),
    # The index-batching table (the Scalable PGT study's tiny DCRNN, pgt-i, on PeMS-BAY's graph,
    # 52,116 generated steps): data memory, peak GPU memory, steps/s of index and gpu-index.
    # 2 cores: 5-10 s of setup (the series, the windows' index), 11 steps/s
    # (ref-cpu2-dcrnn-pems-bay-memory): 60 steps make the 2 CPU cells ~12 s, 4 cells ~40 s.
    study(
        "dcrnn-pems-index",
        45,
        "dcrnn: index vs gpu-index, cpu and cuda",
        f"{DCRNN} --set max_steps=60 --timeout 30",
        f"{DCRNN} --smoke --set max_steps=5 --timeout 120",
    ),
    # The thesis' batch knee on the GPU: batch sizes doubling to 16,384 (where a 1-D CNN of 150k
    # parameters fills an H100 at last), each 1.5 s of training steps whatever the epochs, on
    # 100,000 curves (generated in ~2.4 s on 2 cores): ~7 s a cell, 6 cells. The CPU's knee
    # is ref-cpu2-cnn-strain-batch-sweep (75 to 1,024: flat from 300).
    study(
        "cnn-strain-batch-knee",
        45,
        "cnn-strain: batch 512 to 16,384 on cuda",
        "run cnn-strain --device cuda --batch-size 512 1024 2048 4096 8192 16384 "
        "--set n_samples=100000 --time-budget 1.5 --set max_eval_batches=2 --timeout 25",
    ),
    # The largest grid the GPU trains with dense relations (n x n per relation: the memory-bound
    # mode): the memory model predicts 46 GiB at 200x400 and 91 GiB at 240x480, so an H100
    # trains the first and the plan skips the second with that reason; an H200 trains both.
    # Generating the field is cheap (a sparse cell's setup was 4-6 s at 180x360 on 2 cores) and
    # a dense step at 200x400 ~0.6 TFLOP: ~10 s a cell on the GPU.
    study(
        "stnn-largest-grid",
        35,
        "stnn: dense relations at 200x400, 240x480",
        "run stnn --device cuda --epochs 1 --set grid=200x400,240x480 --set relations=dense "
        "--set max_steps=8 --set max_eval_batches=1 --timeout 30",
    ),
)

"""The reference studies the acceptance runs after its correctness part (issue 37): the
question stbench exists to answer, `stbench gpu-vs-cpu`, once per workload, each study's folder
to commit as results/reference/ref-<gpu>-<workload>-gpu-vs-cpu.

The first H100 run (docs/acceptance-runs/h100-2026-11-26) spent ~9 s a cell outside its training,
so its studies measured set-up once each. A cell is now forked from a warm server (runner/warm.py)
and costs its window, its CUDA initialisation (on a GPU) and its data; a study is a budget of
wall seconds that the question's rounds fill and never pass (plan/question.py), so a cap here is
its budget and a margin for the command around the rounds.
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
# CPU cells are as few and small as the path allows: the workload's smoke sizes, one CPU
# candidate (the smoke presets fix one thread; the machine's choice is the other).
def question(workload: str, sizes: str, cap_s: int, what: str, extra: str = "") -> Step:
    """`stbench gpu-vs-cpu` on one workload: its budget the cap less what the command costs
    besides its rounds (the inventory, the last figure), every cell killed at 30 s."""
    line = f"gpu-vs-cpu {workload} --sizes {sizes} --window {WINDOW_S:g} --budget {cap_s - 12}"
    return study(
        f"{workload}-gpu-vs-cpu",
        cap_s,
        what,
        f"{line} --timeout 30 {extra}".strip(),
        f"gpu-vs-cpu {workload} --smoke --window 0.5 --budget 60 --timeout 120 {extra}".strip(),
    )


# Each study is the question a user asks (`stbench gpu-vs-cpu`): at three sizes of the workload's
# size axis, the 16-core CPU at its defaults and at its quick levers (one thread, half the
# cores, no loader workers where it has some) against the GPU at torch's default precision and
# at bf16, each cell 0.5 s of timed training, two rounds, then rounds of what is still open
# until the budget. The sizes keep a CPU step well inside the window (several steps a cell): a
# 1-D CNN of 150 k parameters to a batch of 4,096, the LSTM to 1,089 series, sparse STNN to
# 120x240, and the tiny DCRNN of the Scalable PGT study (pgt-i) to 2,700 sensors.
WINDOW_S = 0.5
STUDIES = (
    question("cnn-strain", "256 1024 4096", 58, "cnn-strain: batch 256 to 4,096, cpu and cuda"),
    question(
        "lstm-era5",
        "30:30:250:250.25 30:32.5:250:252.5 30:38:250:258",
        62,
        "ERA5 LSTM: 2 to 1,089 series, cpu and cuda",
    ),
    question("stnn", "30x84 60x168 120x240", 58, "stnn sparse: 30x84 to 120x240, cpu and cuda"),
    question(
        "dcrnn-pems",
        "la bay 2k7",
        60,
        "dcrnn pgt-i: 207 to 2,700 sensors, cpu and cuda",
        "--preset pgt-i",
    ),
)

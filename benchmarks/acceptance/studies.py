"""The reference studies the acceptance runs after its correctness part : the
question stbench exists to answer, `stbench gpu-vs-cpu`, once per workload, each study's folder
to commit as results/reference/ref-<gpu>-<workload>-gpu-vs-cpu.

The first H100 run (docs/acceptance-runs/h100-2026-11-26) spent ~9 s a cell outside its training.
A question's configurations are now measured as windows inside warm processes (runner/engine.py):
a process pays CUDA's start, the data, the model and the warm-up once for many windows, and the
study is a budget of wall seconds its rounds fill and never pass, so a cap here is its budget and
a margin for the command around the rounds.
"""

from __future__ import annotations

from . import checks_answers as answers
from .steps import REFERENCE, Probe, Step, args


def study(
    result: str, cap_s: int, what: str, line: str, rehearse: str = "", checks: tuple = ()
) -> Step:
    """A reference study: its stbench line, and the one a rehearsal runs (its CPU cells small)."""
    return Step(
        f"ref-{result}",
        REFERENCE,
        cap_s,
        what,
        argv=args(line),
        checks=checks,
        rehearse_argv=args(rehearse) if rehearse else (),
        result=result,
    )


# What a question's command costs besides its windows' budget: the inventory, the step's anatomy,
# this host's launches check for its card's prediction (CUDA's start in a child: a few seconds),
# the answer and its picture
AROUND_S = 15


# A rehearsal proves each command's path (its cuda windows stop at the CPU build's error), so its
# CPU windows are as few and small as the path allows: the workload's smoke sizes.
def question(workload: str, cap_s: int, what: str, extra: str = "") -> Step:
    """`stbench gpu-vs-cpu` on one workload at its own sizes: its budget the cap less what the
    command costs besides its windows (AROUND_S)."""
    return study(
        f"{workload}-gpu-vs-cpu",
        cap_s,
        what,
        f"gpu-vs-cpu {workload} --budget {cap_s - AROUND_S} {extra}".strip(),
        f"gpu-vs-cpu {workload} --smoke --budget 40 {extra}".strip(),
        # every size measured, 5 paired rounds at each, the largest concluded; and the card's
        # own predictions (made on its host from the CPU rows) never above its measured steps
        (
            Probe("question-concluded", answers.question_concluded),
            Probe("prediction-holds", answers.prediction_holds),
        ),
    )


# Each study is the question a user asks (`stbench gpu-vs-cpu`), at the workload's declared sizes
# (a batch axis whose last size is 50+ GFLOP a step): the 16-core CPU at its defaults and its
# quick levers (one thread, half the cores, no loader workers where it has some, bf16 where it
# has the units) against the GPU at torch's default precision, at TF32 and at bf16, as windows
# inside warm processes, six paired rounds at each size the budget can measure twice, then rounds
# of what is still open; the engine names a size it leaves out with the budget it would need.
# (TF32 joined after the H200 run below: one more GPU window a round, a short one beside the
# CPU's.)
# What the H200 run of 2026-11-28 said each size needs (`--budget`, two rounds at every size up to
# it, the 16-core CPU's windows being the dear part): cnn-strain 600 curves 59 s, 4,096 101 s,
# 32,768 160-267 s; lstm-era5 1,024 58 s, 4,096 111 s, 16,384 173-260 s; stnn 10,000 pairs 90 s,
# 100,000 286-525 s; dcrnn-pems 256 220 s, 4,096 3,106 s. The lease pays the first two sizes of
# cnn-strain and lstm-era5 and the first of the others; question-concluded names the rest.
STUDIES = (
    question("cnn-strain", 72, "cnn-strain: batch 75 to 32,768, cpu and cuda"),
    question("lstm-era5", 72, "ERA5 LSTM: batch 128 to 16,384, cpu and cuda"),
    question("stnn", 62, "stnn dense: 1,000 to 500,000 pairs, cpu and cuda"),
    question("dcrnn-pems", 62, "dcrnn-pems: batch 32 to 4,096, cpu and cuda"),
)

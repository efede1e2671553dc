"""The acceptance's steps, in priority order: what a step runs, its cap and the checks that read
what it wrote. The correctness part is here, the reference studies in `studies.py`, and the
extras (not in a default run) at the end.

Caps are seconds on one H100 or H200 (16 cores beside it), the step's checks included: what
the H200 run of 2026-11-28 measured (docs/acceptance-runs/h200-2026-11-28, the seconds beside
each step below) and about a fifth more. Its guesses before, for warm cells, were too tight for
five steps: a torchrun world starts fresh processes (~3.3 s importing torch on that host), and
so, on that run, did every cell after the first profile step: its checks measured a step's
anatomy in the acceptance's process, torch set TORCHINDUCTOR_CACHE_DIR there, and the warm
server refused to fork a cell whose environment differed (mended since: runner/warm.LATE), so
these caps are high for warm cells; doctor took 43 s. The first
cuda step also measures the GPU's peaks (~6 s, cached for the rest). A step that ends early
leaves its time to the next, and a step that failed for a reason a second try can mend (past its
limit, a cell that crashed or hung) runs once more where the deadline allows (engine.py)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from stbench.device import is_cuda

from . import checks_answers as answers
from . import checks_rows as rows
from . import checks_traces as traces
from .reference import cpu_gpu_agree

CORRECTNESS, REFERENCE, EXTRA = "correctness", "reference", "extra"


@dataclass(frozen=True)
class Probe:
    """A check of a step: its name and the reader + judge it runs on the step's folder."""

    name: str
    judge: Callable[..., Any]  # (folder, **kwargs) -> Check, or the doctor's list of them
    kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Step:
    """One step: an stbench command line run in the acceptance's process (the engine adds
    `--out` the step's folder), or another program in a process of its own."""

    name: str
    part: str  # CORRECTNESS | REFERENCE | EXTRA
    cap_s: int  # seconds on one H100, checks included
    what: str  # one line for --list
    argv: tuple[str, ...] = ()  # stbench's arguments
    command: tuple[str, ...] = ()  # or a program's
    env: tuple[tuple[str, str], ...] = ()
    checks: tuple[Probe, ...] = ()
    # a rehearsal's arguments instead of argv: the same command with its CPU cells small, since
    # its cuda cells stop at the CPU build's error and its CPU cells would run for real on 2 cores
    rehearse_argv: tuple[str, ...] = ()
    cpu_argv: tuple[str, ...] = ()  # smoke steps: the same cells on the CPU (reference.py)
    result: str = ""  # reference studies: commit the folder as results/reference/ref-<gpu>-<result>


def args(line: str) -> tuple[str, ...]:
    """A command line as typed, as its arguments."""
    return tuple(shlex.split(line))


# what each workload's smoke adds: cnn-strain's checkpoint levels make its cells the checkpoint
# check's too. cnn-strain runs strict fp32: under torch's defaults cuDNN runs its convolutions in
# TF32 (10-bit mantissa), and on the H100 three epochs of that ended 5.3% from the CPU's loss, a
# precision choice rather than a wrong result; the agreement judges the code path, in the same
# math on both sides (lstm-era5's cuDNN LSTM agreed within 0.005% under the defaults).
SMOKE_SETS = {
    "cnn-strain": "--set checkpoint=none,sqrt,full --set precision=fp32",
    "dcrnn-pems": "",
    "lstm-era5": "",
    "stnn": "",
}
AGREE = (Probe("cpu-gpu-agree", cpu_gpu_agree), Probe("phases-sum", rows.phases_sum))
NO_SYNCS = Probe("no-syncs", traces.no_syncs)
# the GPU predictions' launch count (counted on the CPU: a floor) against the profile's kernels;
# not stnn's: its profiled steps are a few of an epoch's mix of two passes, its count the mean
KERNEL_COUNT = Probe("kernel-count", traces.kernel_count)
# a real step's operators on the GPU's host against the least cost the bound charges one
HOST_PER_OPERATOR = Probe("host-per-operator", traces.host_per_operator)
# the step's memory as the predictions count it on a CPU, against the allocator's peak (the
# workloads without a memory model of their own; the same anatomy as the kernel count)
MEMORY_ESTIMATE = Probe("memory-estimate", traces.memory_estimate)
# stnn's own memory model (its workload predicts its bytes) against the allocator's peak
MEMORY_PREDICTION = Probe("memory-prediction", rows.memory_prediction)
WARM = Probe("warm-cells", rows.warm_cells)  # after another step's checks ran in this process


def smoke_argv(workload: str, device: str) -> tuple[str, ...]:
    """A workload's smoke cells on one device; on cuda each killed at 60 s (the CPU's, made
    beforehand for the reference, have no time to keep)."""
    limit = "--timeout 60" if is_cuda(device) else ""
    return args(f"run {workload} --smoke --device {device} {SMOKE_SETS[workload]} {limit}")


def smoke(workload: str, cap_s: int, *extra: Probe) -> Step:
    what = f"{workload} trains on cuda, agrees with the CPU"
    return Step(
        f"smoke-{workload}",
        CORRECTNESS,
        cap_s,
        what,
        argv=smoke_argv(workload, "cuda"),
        checks=(*AGREE, *extra),
        cpu_argv=smoke_argv(workload, "cpu"),
    )


def profile(
    workload: str, cap_s: int, sets: str, *checks: Probe, what: str = "", steps: int = 10
) -> Step:
    """A profiled run of a few steps on cuda (`stbench profile`: warm-up, then `steps`)."""
    argv = args(f"profile {workload} --device cuda {sets} --steps {steps} --timeout 60")
    what = what or "no host-device sync in a profiled step"
    checks = checks or (NO_SYNCS,)
    return Step(f"profile-{workload}", CORRECTNESS, cap_s, what, argv=argv, checks=checks)


# cnn-strain's smoke as a world of ranks on the one GPU, 10 steps an epoch
WORLD = "run cnn-strain --smoke --device cuda --set max_steps=10 --timeout 60 --strategy"
GLOO, NCCL = (("backend", "gloo"),), (("backend", "nccl"),)

STEPS = (
    # 3 cells, after the GPU's peaks are measured (~6 s, once): 7 s on the H200
    smoke(
        "cnn-strain", 10, Probe("nvml", rows.nvml), Probe("checkpoint-lowers-peak", rows.checkpoint)
    ),
    smoke("dcrnn-pems", 6),  # its index cell: 4 s
    smoke("lstm-era5", 5, Probe("tf32-peak", rows.tf32_peak)),  # 3 s
    smoke("stnn", 5),  # 3 s
    profile(  # 15 s
        "cnn-strain",
        18,
        "--smoke",
        NO_SYNCS,
        Probe("h2d-plausible", rows.h2d_plausible),
        KERNEL_COUNT,
        HOST_PER_OPERATOR,
        MEMORY_ESTIMATE,
        WARM,
        what="no host-device sync, plausible h2d, kernels counted",
    ),
    # gpu-index, the path only a GPU runs, and the device-data check's row (the host index path
    # is the DataLoader path cnn-strain and lstm-era5 profile): a dcrnn cell profiled 10 steps in
    # 18 s on the H100 (245,000 trace events); 4 steps took 37 s on the H200
    profile(
        "dcrnn-pems",
        42,
        "--smoke --set batching=gpu-index",
        NO_SYNCS,
        Probe("dcrnn-device-data", rows.device_data),
        KERNEL_COUNT,
        HOST_PER_OPERATOR,
        MEMORY_ESTIMATE,
        WARM,
        what="dcrnn gpu-index: no sync, no data or h2d time, kernels counted",
        steps=4,
    ),
    profile(  # 11 s
        "lstm-era5",
        14,
        "--smoke",
        NO_SYNCS,
        KERNEL_COUNT,
        HOST_PER_OPERATOR,
        MEMORY_ESTIMATE,
        WARM,
        what="no sync, kernels and memory counted",
    ),
    # the grid and chunk at which offload streams its relations in chunks (60x168: 9,072 cells);
    # dense and sparse beside it for sparse = dense and the memory model: 3 cells
    profile(  # 33 s: three fresh processes
        "stnn",
        38,
        "--set grid=60x168 --set chunk=250 --set relations=dense,offload,sparse",
        Probe("syncs", traces.stnn_syncs),
        Probe("offload-side-stream", traces.offload_stream),
        Probe("sparse-equals-dense", rows.backends_agree),
        HOST_PER_OPERATOR,
        MEMORY_PREDICTION,
        WARM,
        what="stnn: syncs, side stream, sparse = dense, memory",
    ),
    # a 2-rank gloo world on the one GPU; the NCCL world of 2 needs 2 GPUs: skipped, UNTESTED
    Step(
        "distributed",
        CORRECTNESS,
        16,  # 13 s: torchrun's ranks start fresh
        "ddp: 2 gloo ranks on 1 GPU; NCCL",
        argv=args(f"{WORLD} ddp --nproc 2 --set backend=gloo,nccl --expect skipped"),
        checks=(
            Probe("distributed-gloo", rows.distributed, GLOO),
            Probe("distributed-nccl", rows.distributed, NCCL),
        ),
    ),
    Step(
        "two-nodes",
        CORRECTNESS,
        15,  # 12 s
        "ddp: two loopback nodes, gloo",
        argv=args(f"{WORLD} ddp --nproc 1 --nnodes 2 --set backend=gloo"),
        checks=(Probe("two-nodes", rows.distributed, GLOO),),
    ),
    Step(
        "doctor",
        CORRECTNESS,
        48,  # 43 s
        "doctor --quick: phase timing, sampling, peaks, launches",
        argv=args("doctor --quick --device cpu cuda"),
        checks=(Probe("doctor", rows.doctor_checks),),
    ),
)


def largest(workload: str, sizes: str, cap_s: int, epochs: int, memory: Probe) -> Step:
    """GPU-only cells at a workload's two largest declared sizes (`sizes`, the size axis' own
    fixed parameters set as a question sets them), two steps an epoch: where a step's FLOPs and
    bytes, not its launches, may come to set its time, and which a question's CPU windows cannot
    pay for in a lease. Each cell predicted on the host as a question predicts a size
    (prediction-holds: the bound's FLOP and bandwidth terms checked where they count), and its
    memory against the prediction that says whether it fits; a size the planner skips as too
    large for the card (stnn's 500,000 pairs on an 80 GB card) is said, not failed."""
    from stbench.plan.registry import get

    fixed = {**get(workload).size.fixed, "max_steps": 2, "max_eval_batches": 1}
    sets = " ".join(f"--set {k}={v}" for k, v in fixed.items())
    line = f"run {workload} --device cuda --batch-size {sizes} --epochs {epochs} {sets}"
    return Step(
        f"largest-{workload}",
        EXTRA,
        cap_s,
        f"{workload} {sizes.replace(' ', ', ')} on cuda alone: bound, memory",
        argv=args(f"{line} --timeout 60 --expect skipped"),
        checks=(
            Probe("prediction-holds", answers.cells_prediction, SKIPPABLE),
            replace(memory, kwargs=SKIPPABLE),
        ),
    )


# The largest sizes, on the GPU alone (after the default steps, where the deadline leaves their
# caps: docs/gpu-acceptance.md): 20 or more timed steps each after the warm-up's 5 (dcrnn-pems'
# 4,096 windows are one step an epoch)
SKIPPABLE = (("may_skip", True),)
LARGEST = (
    largest("cnn-strain", "4096 32768", 25, 13, MEMORY_ESTIMATE),
    largest("lstm-era5", "4096 16384", 25, 13, MEMORY_ESTIMATE),
    largest("stnn", "100000 500000", 30, 13, MEMORY_PREDICTION),
    largest("dcrnn-pems", "1024 4096", 40, 25, MEMORY_ESTIMATE),
)

EXTRAS = (
    # dense factor gradients: the sanitizer reads data_ptr() of every tensor an operator
    # touches, which sparse COO gradients do not have (DESIGN.md)
    Step(
        "sanitizer",
        EXTRA,
        150,
        "stnn under TORCH_CUDA_SANITIZER",
        argv=args(
            "run stnn --smoke --device cuda --set relations=dense,offload "
            "--set factor_grad=dense --set chunk=16 --set max_steps=40 --timeout 120"
        ),
        env=(("TORCH_CUDA_SANITIZER", "1"),),
    ),
    Step(
        "gpu-tests",
        EXTRA,
        90,
        "the gpu-marked tests (tests/test_gpu.py)",
        command=args(
            "python -m pytest -q -p no:cacheprovider -m gpu -rfE --tb=short tests/test_gpu.py"
        ),
    ),
    Step(
        "strategies",
        EXTRA,
        40,
        "zero1 and fsdp: 2 gloo ranks on 1 GPU",
        argv=args(f"{WORLD} zero1 fsdp --nproc 2 --set backend=gloo"),
        checks=(Probe("strategies-gloo", rows.distributed, GLOO),),
    ),
    *LARGEST,
)

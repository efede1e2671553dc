"""What a cell's process reports: the one record that crosses from it to the parent.

A `CellResult` travels as JSON (pyperf's worker to runner): a status, the run's `Figures`, an
`EpochRow` per evaluation and a `RankRow` per rank. The parent adds what it knows (identity,
machine, energy; rows.py) to make the runs.csv row. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

STEP_PHASES = ("data", "h2d", "compute", "sync")  # one training step, in order


@dataclass(frozen=True)
class Figures:
    """What a cell's process measured; None where it measured nothing (a failed cell)."""

    wall_s: float | None = None
    train_s: float | None = None
    epoch_s: float | None = None  # median over epochs
    samples_per_s: float | None = None  # steady state: warm-up steps excluded
    steps_per_s: float | None = None
    warmup_steps: int | None = None
    data_s: float | None = None
    h2d_s: float | None = None
    compute_s: float | None = None
    sync_s: float | None = None
    eval_s: float | None = None
    data_wait_s: float | None = None  # host seconds inside the loader (CUDA's data_s: device idle)
    ddp_comm_s: float | None = None  # DDP's own logger: backward communication (DDP cells)
    ddp_exposed_comm_s: float | None = None  # ... of it not overlapped with backward: cf. sync_s
    peak_rss_mb: float | None = None
    base_rss_mb: float | None = None  # RSS before the workload allocated anything
    peak_gpu_mb: float | None = None
    data_mb: float | None = None
    param_mb: float | None = None  # per rank (max over ranks), counted from the tensors it holds
    grad_mb: float | None = None
    optim_state_mb: float | None = None
    activation_peak_mb: float | None = None  # one step's peak above its start, less its gradients
    activation_source: str | None = None  # "cuda allocator" | "profiler memory events"
    predicted_mb: float | None = None
    final_train_loss: float | None = None
    val_metric: str | None = None
    val_value: float | None = None
    naive_baseline: float | None = None
    flops_per_sample: float | None = None
    achieved_gflops: float | None = None
    device_name: str | None = None
    threads: int | None = None
    data_source: str | None = None
    sync_count: int | None = None  # gradient synchronisations a rank waited for (multi-process)
    # host of each node (torchrun agent), in node-rank order, comma-separated
    node_hosts: str | None = None
    # what fp32 math ran as: "fp32", or on CUDA "matmul fp32, cudnn tf32" etc.
    precision: str | None = None  # what fp32 math ran at, in words ("matmul fp32, cudnn tf32")
    matmul_math: str | None = None  # fp32 | tf32 | bf16: cuBLAS's products (a CPU's math)
    conv_math: str | None = None  # fp32 | tf32 | bf16: cuDNN's convolutions and RNNs
    compile_s: float | None = None  # torch.compile's first pass (not in wall_s' steps, throughput)
    # Time to quality (child/target.py): the target, whether and when an evaluation first reached it
    target: float | None = None
    target_reached: bool | None = None
    time_to_target_s: float | None = None  # MLPerf's clock: first step to that evaluation's end
    time_to_target_train_s: float | None = None  # the same, training steps only
    epochs_to_target: float | None = None
    samples_to_target: int | None = None
    epochs_done: float | None = None  # how far training got (a time budget ends mid-epoch)
    steps_done: int | None = None
    stopped_by: str | None = None  # epochs | time budget | target
    # distinct GPUs the ranks ran on, by the UUIDs they reported (None on CPU)
    gpus_used: int | None = None
    # What reading a chunked or remote source cost (contract.ReadCost; None for in-memory data)
    bytes_read: int | None = None  # fetched, as stored (compressed), metadata included
    bytes_used: int | None = None  # of values the task kept
    read_amplification: float | None = None  # bytes_read / bytes_used
    read_requests: int | None = None  # object reads (one request each)
    read_mb_per_s: float | None = None  # bytes_read over the seconds spent reading
    first_batch_s: float | None = None  # opening the source to the first training batch's values
    # the CPU levers the process ran with (child/cpu.py)
    threads_why: str | None = None  # why `threads`: given, or auto and what the load check saw
    threads_physical: int | None = None  # auto: the physical cores counted (None: given)
    threads_for_load: bool | None = None  # auto left out cores other processes kept busy
    interop_threads: int | None = None  # torch's inter-op threads
    bound_cpus: str | None = None  # the logical CPUs the process was pinned to (bind), or empty
    host_allocator: str | None = None  # glibc | glibc, thresholds fixed | jemalloc | tcmalloc


@dataclass(frozen=True)
class EpochRow:
    """One evaluation interval of a run: the steps since the previous evaluation, and the
    evaluation (an epoch, with the default cadence)."""

    run_id: str
    epoch: int
    epoch_s: float
    train_s: float
    data_s: float
    h2d_s: float
    compute_s: float
    sync_s: float
    eval_s: float
    steps: int
    train_loss: float
    val_metric: float
    data_wait_s: float = 0.0
    # One row per evaluation (per epoch unless `eval_every` sets a step cadence): where it fell
    step: int | None = None  # optimizer steps so far
    epochs_done: float | None = None
    elapsed_s: float | None = None  # since the first step, evaluation included
    train_elapsed_s: float | None = None  # training steps only


@dataclass(frozen=True)
class RankRow:
    """One rank of a multi-process cell (ranks.csv; a lone process is rank 0): its own totals.
    The runs.csv row reports the phases of the slowest rank (`reported`), every one of them, so
    they sum to its step time; the others show which rank waited, and in which phase."""

    run_id: str
    rank: int
    reported: bool  # the slowest rank (the most step time): the runs.csv row has its phases
    node: int  # torchrun's node (agent) rank
    steps: int
    train_s: float
    data_s: float
    h2d_s: float
    compute_s: float
    sync_s: float
    eval_s: float
    data_wait_s: float
    wall_s: float
    peak_gpu_mb: float | None = None
    gpu_uuid: str | None = None  # the GPU the rank ran on (None on CPU)
    # DDP's own logger on this rank (the row's are the reported rank's, like sync_s)
    ddp_comm_s: float | None = None
    ddp_exposed_comm_s: float | None = None


@dataclass(frozen=True)
class CellResult:
    """The one record that crosses from a cell's process to the parent (as JSON)."""

    status: str  # ok | diverged | oom | failed | hung
    reason: str = ""
    figures: Figures = field(default_factory=Figures)
    epochs: tuple[EpochRow, ...] = ()
    extras: Mapping[str, float] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(default_factory=dict)  # measurement -> why not made
    ranks: tuple[RankRow, ...] = ()  # every rank's own totals (ranks.csv)

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=float)

    @classmethod
    def from_json(cls, text: str) -> CellResult:
        d = json.loads(text)
        return cls(
            d["status"],
            d.get("reason", ""),
            Figures(**d.get("figures", {})),
            tuple(EpochRow(**e) for e in d.get("epochs", ())),
            d.get("extras", {}),
            d.get("unavailable", {}),
            tuple(RankRow(**r) for r in d.get("ranks", ())),
        )

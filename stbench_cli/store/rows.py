"""Typed records: what a cell's process reports, and the rows of the result files.

The column lists of runs.csv, epochs.csv, system.csv and ranks.csv are derived from these dataclasses;
nothing else lists them. A workload's own figures (`Task.extras`) become `x.<name>` columns
without any change here. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields

# The result folder's layout: runs.csv's `schema` column and the manifest's `schema`. A folder of
# an older one is rewritten once by `stbench migrate` (plan/migrate.py); readers take only this.
SCHEMA = 3  # 3: the CPU levers' parameters and columns (interop_threads, bind, ...)
STEP_PHASES = ("data", "h2d", "compute", "sync")  # one training step, in order
PHASE_COLUMNS = ("data_s", "h2d_s", "compute_s", "sync_s", "eval_s")  # where a run's time went
EXTRA_PREFIX = "x."
STATUSES = ("ok", "diverged", "oom", "failed", "timeout", "skipped", "hung")  # how a cell can end
# what a resume runs again: a lost node, a crashed rank, a stall may not happen twice (a
# deterministic failure, an oom, a divergence, a --timeout would: their rows stand)
RETRIED = ("failed", "hung")


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
    data_wait_s: float | None = (
        None  # host seconds inside the loader (on CUDA data_s is device idle time)
    )
    ddp_comm_s: float | None = None  # DDP's own logger: backward communication (DDP cells)
    ddp_exposed_comm_s: float | None = (
        None  # ... of it not overlapped with backward compute: compare sync_s
    )
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
    sync_count: int | None = (
        None  # gradient synchronisations a rank waited for (multi-process cells)
    )
    node_hosts: str | None = (
        None  # host of each node (torchrun agent), in node-rank order, comma-separated
    )
    precision: str | None = (
        None  # what fp32 math ran as: "fp32", or on CUDA "matmul fp32, cudnn tf32" etc.
    )
    compile_s: float | None = (
        None  # torch.compile's first pass (never in wall_s' steps or throughput)
    )
    # Time to quality (child/target.py): the target, whether and when the first evaluation reached it
    target: float | None = None
    target_reached: bool | None = None
    time_to_target_s: float | None = (
        None  # MLPerf's clock: first step to the end of that evaluation
    )
    time_to_target_train_s: float | None = None  # the same, training steps only
    epochs_to_target: float | None = None
    samples_to_target: int | None = None
    epochs_done: float | None = None  # how far training got (a time budget ends mid-epoch)
    steps_done: int | None = None
    stopped_by: str | None = None  # epochs | time budget | target
    gpus_used: int | None = (
        None  # distinct GPUs the ranks ran on, by the UUIDs they reported (None on CPU)
    )
    # What reading a chunked or remote source cost (contract.ReadCost; None for in-memory data)
    bytes_read: int | None = (
        None  # fetched by the filesystem, as stored (compressed), metadata included
    )
    bytes_used: int | None = None  # of values the task kept
    read_amplification: float | None = None  # bytes_read / bytes_used
    read_requests: int | None = None  # object reads (one request each)
    read_mb_per_s: float | None = None  # bytes_read over the seconds spent reading
    first_batch_s: float | None = None  # opening the source to the first training batch's values
    # the CPU levers the process ran with (issue 32; child/cpu.py)
    threads_why: str | None = None  # why `threads`: given, or auto and what the load check saw
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
class SystemRow:
    """One sample of the cell's process tree and its GPUs (GPU fields None without one)."""

    run_id: str
    t_s: float
    proc_cpu_pct: float
    proc_rss_mb: float
    sys_cpu_pct: float
    sys_mem_pct: float
    gpu_util_pct: float | None = None
    gpu_mem_mb: float | None = None
    gpu_power_w: float | None = None
    # what else the machine did while the cell ran (store.conditions sums them up per run)
    load_1m: float | None = (
        None  # the 1-minute load average (runnable tasks, the cell's own included)
    )
    cpu_steal_pct: float | None = None  # CPU time a hypervisor gave to other guests, % of all cores
    gpu_throttle: int | None = (
        None  # NVML's clock slowdown reasons (power cap, thermal, hardware), OR'ed over GPUs
    )


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
    ddp_comm_s: float | None = (
        None  # DDP's own logger on this rank (the row's are the reported rank's, like sync_s)
    )
    ddp_exposed_comm_s: float | None = None


@dataclass(frozen=True)
class CellResult:
    """The one record that crosses from a cell's process to the parent (as JSON)."""

    status: str  # ok | diverged | oom | failed | hung
    reason: str = ""
    figures: Figures = field(default_factory=Figures)
    epochs: tuple[EpochRow, ...] = ()
    extras: Mapping[str, float] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(
        default_factory=dict
    )  # measurement -> why it could not be made
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


@dataclass(frozen=True)
class Identity:
    """What ran: the cell of the matrix and its repeat."""

    run_id: str
    workload: str
    device: str
    strategy: str
    world_size: int
    nodes: int
    batch_size: int
    global_batch_size: int
    epochs: int
    repeat: int
    seed: int
    preset: str
    params: str  # the resolved workload parameters as JSON
    nproc_per_node: int = 1  # world_size = nproc_per_node x nodes
    launcher: str = "local"  # local | slurm | srun: how the cell's processes were started
    backend: str | None = None  # torch.distributed backend of a multi-process cell


@dataclass(frozen=True)
class Derived:
    """Figures the parent adds: its own clock, the machine's measured peak, energy counters."""

    setup_s: float | None = None  # process start to exit, less the child's wall time
    peak_gflops: float | None = None
    peak_fraction: float | None = None
    gpu_energy_j: float | None = None
    cpu_energy_j: float | None = None
    job_id: str | None = None  # the Slurm job (or job.step) that ran the cell
    peak_math: str | None = (
        None  # the math peak_gflops was measured at: fp32, tf32 or bf16 (runner/peak_math.py)
    )
    # issue 32: how each device's joules were measured, or "none: <why>" (runner/energy.py)
    gpu_energy_method: str | None = None  # "nvml counter" | "none: ..."
    cpu_energy_method: str | None = None  # "rapl (N packages)" | "none: ..."
    energy_window_s: float | None = None  # the seconds between the counters' two reads
    energy_short: bool | None = None  # the window is under 60 s (MLPerf: 60 samples at 1 Hz)


@dataclass(frozen=True)
class Machine:
    """Where it ran. Host names are often generic (`vm`, `localhost`, a container id), so a
    machine is told apart by its fingerprint over the hardware and the torch build too
    (store.machine.fingerprint); rows of two machines are never pooled as repeats."""

    host: str
    cpu_model: str
    gpu_count: int
    torch: str
    cuda: str | None
    nccl: str | None
    cores: int | None = None  # logical CPU cores
    gpu_names: str | None = None  # every GPU NVML sees, e.g. "2x Tesla T4"
    machine_id: str | None = None  # fingerprint of host, CPU, cores, GPUs and torch build


@dataclass(frozen=True)
class Conditions:
    """How busy the machine was while the cell ran, from its system.csv samples
    (store.conditions.conditions); None where nothing was sampled or a field is not reported."""

    load_max: float | None = None  # highest 1-minute load average
    others_cpu_pct: float | None = None  # mean CPU share of the other processes, % of all cores
    cpu_steal_pct: float | None = None  # mean steal, % of all cores
    gpu_throttle: str | None = None  # clock slowdown reasons NVML named ("" where none)
    gpu_throttle_share: float | None = None  # share of the samples with a slowdown
    # issue 32: the load check before the cell, and whether others competed for its cores
    others_cpu_before_pct: float | None = None  # other processes' CPU use, % of all cores
    contended: bool | None = None  # others used more cores than the cell's threads left free
    contention: str | None = None  # why it is contended: what was seen against what was free


@dataclass(frozen=True)
class RunRow:
    """One runs.csv row: a cell x repeat with its outcome."""

    identity: Identity
    status: str  # ok | diverged | oom | failed | timeout | skipped | hung
    reason: str
    machine: Machine
    figures: Figures = field(default_factory=Figures)
    derived: Derived = field(default_factory=Derived)
    extras: Mapping[str, float] = field(default_factory=dict)
    conditions: Conditions = field(
        default_factory=Conditions
    )  # columns added last: a header grows at its end

    def record(self) -> dict[str, object]:
        """The row as columns: the engine's, then the workload's `x.` figures."""
        out: dict[str, object] = {
            "schema": SCHEMA,
            **asdict(self.identity),
            "status": self.status,
            "reason": self.reason,
            **asdict(self.figures),
            **asdict(self.derived),
            **asdict(self.machine),
            **asdict(self.conditions),
        }
        out.update({f"{EXTRA_PREFIX}{k}": v for k, v in sorted(self.extras.items())})
        return out


def _names(cls) -> list[str]:
    return [f.name for f in fields(cls)]


RUN_COLUMNS = [
    "schema",
    *_names(Identity),
    "status",
    "reason",
    *_names(Figures),
    *_names(Derived),
    *_names(Machine),
    *_names(Conditions),
]
EPOCH_COLUMNS = _names(EpochRow)
SYSTEM_COLUMNS = _names(SystemRow)
RANK_COLUMNS = _names(RankRow)
# true/false columns, written as True/False: read back as 1.0/0.0 (store.rows is their one list)
BOOL_COLUMNS = frozenset(
    f.name
    for cls in (Figures, Derived, Conditions)
    for f in fields(cls)
    if str(f.type).startswith("bool")
)
TEXT_COLUMNS = frozenset(
    ["status", "reason"]
    + [
        f.name
        for cls in (Identity, Figures, Derived, Machine, Conditions)
        for f in fields(cls)
        if str(f.type).startswith("str")
    ]
)


def unexpected(rows: list[dict], accepted: tuple[str, ...] = ("ok",)) -> dict[str, int]:
    """Rows by status, for the statuses not accepted: what makes a study's exit code non-zero."""
    out: dict[str, int] = {}
    for r in rows:
        if r["status"] not in accepted:
            out[r["status"]] = out.get(r["status"], 0) + 1
    return out

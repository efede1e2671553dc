"""The rows of the result files, typed, and their column lists.

The column lists of runs.csv, epochs.csv, system.csv and ranks.csv are derived from these
dataclasses and from the records a cell's process reports (cell_result.py: `Figures`, `EpochRow`,
`RankRow`); nothing else lists them. A workload's own figures (`Task.extras`) become `x.<name>`
columns without any change here. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, make_dataclass

from .cell_result import EpochRow, Figures, RankRow

# The result folder's layout: runs.csv's `schema` column and the manifest's `schema`. Readers take
# only this one; a change of layout migrates the folders there are once and moves this on.
SCHEMA = 4  # 4: facts as columns (threads_physical, matmul_math, ...)
PHASE_COLUMNS = ("data_s", "h2d_s", "compute_s", "sync_s", "eval_s")  # where a run's time went
EXTRA_PREFIX = "x."
STATUSES = ("ok", "diverged", "oom", "failed", "timeout", "skipped", "hung")  # how a cell can end
# what a resume runs again: a lost node, a crashed rank, a stall may not happen twice (a
# deterministic failure, an oom, a divergence, a --timeout would: their rows stand)
RETRIED = ("failed", "hung")


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
    load_1m: float | None = None  # 1-minute load average (runnable tasks, the cell's own included)
    cpu_steal_pct: float | None = None  # CPU time a hypervisor gave to other guests, % of all cores
    gpu_throttle: int | None = None  # NVML's clock slowdown reasons (power, thermal, ...), OR'ed


@dataclass(frozen=True)
class PredictedLine:
    """One line of a gpu-vs-cpu study's predicted.csv (runner/predictions.py): one size's step
    predicted on one GPU model, never a row of runs.csv (plan/predict.py says what each is)."""

    gpu: str
    variant: str
    size: str
    batch: int
    gflop: float
    launches: float
    bound_ms: float
    bound_by: str
    lever: str
    estimate_ms: float
    fits: bool | None  # None: no memory predicted
    memory_mb: float | None
    cpu_step_ms: float | None
    most_gain: float | None
    estimated_gain: float | None
    flops_ms: float  # the bound's terms, each in ms
    bandwidth_ms: float
    host_link_ms: float
    launches_ms: float
    host_ms: float
    launch_floor_us: float
    eager_op_us: float | None = None  # None in a file written before the bound counted it
    # the card was on the machine that measured the step: its host's time and loading at 1x
    measured_here: bool | None = None  # None in a file written before the bound told them apart


@dataclass(frozen=True)
class OperatorLine:
    """One line of a profiled run's operators.csv (child/profiling.py): an operator's totals
    over the profiled steps, the most time first."""

    operator: str
    calls: int
    self_cpu_ms: float
    cpu_total_ms: float
    self_device_ms: float
    self_cpu_mem_mb: float


@dataclass(frozen=True)
class KernelLine:
    """One line of a profiled CUDA run's kernels.csv (store.trace.kernel_table): a kernel, copy
    or memset on the GPU's timeline, by name."""

    kind: str  # kernel | copy | memset
    kernel: str
    calls: int
    per_step: float  # calls a profiled step
    device_ms: float


@dataclass(frozen=True)
class HostLine:
    """One line of a profiled run's host.csv (store.trace.host_table): one profiled step as its
    host threads spent it. On a GPU an operator's span is its whole host path (autograd's
    recording, the dispatcher, the allocator, the launch): the cost the GPU predictions charge
    each operator; on a CPU it holds the operator's kernel too."""

    step: int  # the profiler's step number (ProfilerStep#k)
    operators: int  # top-level operators (none inside another), over the host's threads
    in_operators_ms: float  # their spans, summed
    between_ms: float  # the step's time on no thread inside one: Python, the optimizer's loop
    threads: int  # host threads that ran one (a GPU's backward runs on autograd's own thread)


@dataclass(frozen=True)
class StepMemory:
    """One line of a profiled run's memory.csv: one training step's memory."""

    step: int
    profiled: bool  # inside the profiler's window (its allocator peak is known)
    alloc_peak_above_start_mb: float | None  # from the trace's memory events
    rss_mb: float | None
    cuda_max_allocated_mb: float | None = None


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
    # the math peak_gflops was measured at: fp32, tf32 or bf16 (runner/peak_math.py)
    peak_math: str | None = None
    # how each device's joules were measured, or "none: <why>" (runner/energy.py)
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
    # the load check before the cell, and whether others competed for its cores
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
    # columns added last: a header grows at its end
    conditions: Conditions = field(default_factory=Conditions)

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


# A row read back (`Run`): each column as its dataclass declares it ("float | None", "int", ...);
# the workload's `x.` figures are numbers, any other column text.
def _kind(annotation: str) -> type:
    return {"float": float, "int": int, "bool": bool}.get(annotation.split(" ")[0], str)


def _types(*classes) -> dict[str, type]:
    return {f.name: _kind(str(f.type)) for cls in classes for f in fields(cls)}


RUN_PARTS = (Identity, Figures, Derived, Machine, Conditions)


RUN_TYPES = {
    "schema": int,
    "status": str,
    "reason": str,
    **_types(*RUN_PARTS),
}
# a Run's field types: each column's kind, None where the row has no value
RUN_ANNOTATIONS = {name: kind | None for name, kind in RUN_TYPES.items()}
RUN_ANNOTATIONS["params"] = dict
BOOL_COLUMNS = frozenset(k for k, t in RUN_TYPES.items() if t is bool)
EXPECTED = {float: "a number", int: "a whole number", bool: "True or False"}


class BadValue(ValueError):
    """A value that is not what its column holds."""

    def __init__(self, column: str, expected: str, found: object):
        shown = repr(found)
        shown = shown if len(shown) <= 60 else shown[:59] + "…"  # the line stays one line
        super().__init__(f"column {column}: expected {expected}, found {shown}")


def typed(column: str, value: object, kind: type) -> object:
    """One value as its column's type (None where empty); BadValue where it is not one."""
    if value is None or value == "":
        return None
    if kind is str:
        return str(value)
    text = str(value).strip()
    if kind is bool:
        if text in ("True", "False", "true", "false", "1", "0", "1.0", "0.0"):
            return text in ("True", "true", "1", "1.0")
        raise BadValue(column, EXPECTED[bool], value)
    try:
        number = float(text)
    except ValueError:
        raise BadValue(column, EXPECTED[kind], value) from None
    if kind is int:
        if not number.is_integer():
            raise BadValue(column, EXPECTED[int], value)
        return int(number)
    return number


class _Columns(Mapping):
    """A row's columns by name, for the code that takes rows as columns (tables, CSV): a name
    that is no column of runs.csv raises KeyError, so a misspelt column never reads as a gap; a
    workload's `x.` figure the row lacks reads None (workloads report different ones)."""

    __slots__ = ()

    def __getitem__(self, name: str) -> object:
        if name in _RUN_FIELD_SET:
            return getattr(self, name)
        if isinstance(name, str) and name.startswith(EXTRA_PREFIX):
            return self.extras.get(name)
        raise KeyError(f"{name!r} is no column of runs.csv")

    def __contains__(self, name: object) -> bool:
        return name in _RUN_FIELD_SET or name in self.extras

    def __iter__(self):
        yield from _RUN_FIELDS
        yield from self.extras

    def __len__(self) -> int:
        return len(_RUN_FIELDS) + len(self.extras)

    def get(self, name: str, default: object = None) -> object:
        """The column's value, `default` where the row has none (a gap); KeyError where `name`
        is no column at all."""
        value = self[name]
        return default if value is None else value

    @property
    def columns(self) -> dict[str, object]:
        """Every column of the row, the workload's `x.` figures last."""
        return {name: self[name] for name in self}


_RUN_FIELDS = tuple(RUN_COLUMNS)  # the order runs.csv holds them in
_RUN_FIELD_SET = frozenset(_RUN_FIELDS)
# One runs.csv row as the study wrote it and every reader reads it back (run_study's rows,
# read_runs, a report's folders): a field per column of RUN_COLUMNS, typed as the dataclass that
# declares it says (a gap is None, a flag a bool), `params` as a dict, the workload's `x.`
# figures in `extras`, and the folder it was read from. Made from the column lists above, so a
# column added to Figures (or any part of RunRow) is a field here with no change.
Run = make_dataclass(
    "Run",
    [
        *[(name, RUN_ANNOTATIONS[name], field(default=None)) for name in _RUN_FIELDS],
        ("extras", Mapping[str, float], field(default_factory=dict)),
        ("folder", str, field(default="")),
    ],
    bases=(_Columns,),
    frozen=True,
    eq=True,
    namespace={"__module__": __name__},
)
Run.__doc__ = "One runs.csv row, typed: a field per column (store/rows.py)."


def run_of(record: Mapping[str, object], folder: str = "") -> Run:
    """A runs.csv row (as read: text; or as written: RunRow.record()) as a Run; BadValue names
    the column that is not what it must be."""
    out = {name: typed(name, record.get(name), kind) for name, kind in RUN_TYPES.items()}
    if out["status"] not in STATUSES:
        raise BadValue("status", f"one of {', '.join(STATUSES)}", out["status"])
    extras = {
        name: typed(name, value, float)
        for name, value in record.items()
        if name not in RUN_TYPES and name.startswith(EXTRA_PREFIX)
    }
    try:
        params = json.loads(out["params"] or "{}")
    except ValueError:
        raise BadValue("params", "the parameters as JSON", out["params"]) from None
    if not isinstance(params, dict):
        raise BadValue("params", "the parameters as a JSON object", out["params"])
    return Run(**{**out, "params": params}, extras=extras, folder=folder)


def row_of(record: Mapping[str, object], kind: type):
    """A results file's row as the dataclass its writer wrote (EpochRow, SystemRow, RankRow,
    PredictedLine; a profile's OperatorLine, KernelLine, StepMemory), each field typed as the
    dataclass declares it (None where the row has no value); a column no field names is left
    out. BadValue names a value that is not one."""
    return kind(**{k: typed(k, record.get(k), t) for k, t in _types(kind).items()})


def unexpected(rows: list[dict], accepted: tuple[str, ...] = ("ok",)) -> dict[str, int]:
    """Rows by status, for the statuses not accepted: what makes a study's exit code non-zero."""
    out: dict[str, int] = {}
    for r in rows:
        if r["status"] not in accepted:
            out[r["status"]] = out.get(r["status"], 0) + 1
    return out

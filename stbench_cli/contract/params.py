"""Parameters: a workload's own, and the trainer's common ones every workload has.

Every parameter can become a matrix axis with `--set key=v1,v2`. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


_PARSERS: dict[type, Callable[[str], Any]] = {int: int, float: float, str: str, bool: _parse_bool}


@dataclass(frozen=True)
class Param:
    """One parameter: its type, default, what values are allowed and what it means."""

    name: str
    kind: type  # int, float, str or bool
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None  # None: any value of `kind`
    minimum: float | None = None

    def parse(self, text: str) -> Any:
        """Type and check one value; ValueError with a message naming what is valid."""
        try:
            value = _PARSERS[self.kind](text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a valid {self.kind.__name__}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        if self.choices is not None and value not in self.choices:
            valid = ", ".join(str(c) for c in self.choices)
            raise ValueError(f"{self.name}={value!r} is not allowed; valid: {valid}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{self.name}={value!r} must be >= {self.minimum}")
        return value


PRECISIONS = ("default", "fp32", "tf32", "bf16")  # the device layer's Accelerator.use_precision
# jemalloc and tcmalloc are preloaded (LD_PRELOAD) by the launcher where installed
ALLOCATORS = ("keep", "system", "jemalloc", "tcmalloc")


def setting(name: str, value: Any) -> str:
    """A parameter as a user reads it: `threads` 0 is 'threads=auto' (the physical cores not
    busy: its knob's own meaning), any other `name=value`."""
    if name == "threads" and str(value) in ("0", "0.0"):
        return "threads=auto"
    return f"{name}={value}"


def _knob(default: Any, help: str, choices: tuple | None = None, minimum: float | None = None):
    return field(default=default, metadata={"help": help, "choices": choices, "minimum": minimum})


@dataclass(frozen=True)
class TrainerParams:
    """The knobs of the engine's trainer. Each field is also a `Param` of every workload
    (COMMON_PARAMS), so it can be an axis; a workload may override a default."""

    lr: float = _knob(1e-3, "learning rate for one process (see lr_scaling)", minimum=0.0)
    lr_scaling: str = _knob(
        "none",
        "scale lr by the global batch over lr_base_batch: none, linear (x ratio), sqrt",
        ("none", "linear", "sqrt"),
    )
    lr_warmup_steps: int = _knob(0, "linear lr warm-up over this many optimizer steps", minimum=0)
    warmup_steps: int = _knob(5, "first steps excluded from steady-state throughput", minimum=0)
    workers: int = _knob(0, "DataLoader worker processes", minimum=0)
    loader: str = _knob(
        "vectorized",
        "vectorized: one indexed slice per batch; per-item: default collate",
        ("vectorized", "per-item"),
    )
    # 0 is not torch's default (whatever the process inherited) but a choice recorded in the
    # row (threads_why): plan/threads.py, as PyTorch's own CPU launcher uses physical cores
    threads: int = _knob(
        0,
        "torch intra-op threads per process: N exactly; 0 (auto): the physical cores not busy "
        "with other processes at the cell's start, shared by its ranks, at least 1",
        minimum=0,
    )
    max_steps: int = _knob(
        0, "cap on training steps per epoch (0: the whole epoch), for scale studies", minimum=0
    )
    max_eval_batches: int = _knob(
        0, "cap on validation batches per epoch (0: all), for scale studies", minimum=0
    )
    backend: str = _knob(
        "auto",
        "torch.distributed backend of a multi-process cell (auto: nccl on CUDA, gloo on CPU); "
        "mpi4py: gloo, with DDP's gradient all-reduce through MPI (--launcher mpirun, cpu)",
        ("auto", "nccl", "gloo", "mpi", "mpi4py"),
    )
    bucket_cap_mb: float = _knob(
        25.0, "DDP gradient bucket size in MiB (torch's default: 25)", minimum=0.0
    )
    precision: str = _knob(
        "default",
        "what fp32 math runs as: default (torch's: fp32 matmul, TF32 cuDNN on CUDA), "
        "fp32 (strict), tf32 (matmul and cuDNN on CUDA), bf16 (autocast, fp32 master weights)",
        PRECISIONS,
    )
    compile: str = _knob(
        "none",
        "torch.compile the model: none, default, reduce-overhead (CUDA graphs on CUDA); "
        "compile time is compile_s, never in throughput",
        ("none", "default", "reduce-overhead"),
    )
    lr_base_batch: int = _knob(
        0,
        "the global batch `lr` is meant for (0: one process's batch, so lr_scaling scales "
        "with the world size)",
        minimum=0,
    )
    target: float = _knob(
        0.0,
        "validation metric a run must reach (lower is better) for time to target; 0: the "
        "workload's default, a fraction of its naive baseline (`stbench list`)",
        minimum=0.0,
    )
    eval_every: int = _knob(
        0, "evaluate every N optimizer steps (0: at each epoch's end)", minimum=0
    )
    eval_every_s: float = _knob(
        0.0,
        "evaluate every N seconds of training (evaluation excluded), so cells of different "
        "speeds get curves at the same times (0: by steps or epochs)",
        minimum=0.0,
    )
    time_budget: float = _knob(
        0.0,
        "seconds of training steps per cell (evaluation excluded): train until spent, "
        "whatever the epochs (0: train the epochs)",
        minimum=0.0,
    )
    stop_at_target: bool = _knob(
        False, "end the run at the first evaluation that reaches the target"
    )
    allocator: str = _knob(
        "keep",
        "host memory a step frees: keep (reused by the next step: glibc's heap "
        "thresholds fixed, no page faults to get it back), system (glibc's adaptive defaults, "
        "as in a plain script), jemalloc or tcmalloc (preloaded where installed)",
        ALLOCATORS,
    )
    prefetch: int = _knob(
        2,
        "batches each DataLoader worker loads ahead (prefetch_factor; torch's default: 2; "
        "with workers > 0 only)",
        minimum=1,
    )
    ddp_log_every: int = _knob(
        100,
        "DDP's own logger samples its first 10 steps, then every Nth (torch's default: 100; "
        "1 samples every step: a host sync per step on CUDA, for checking sync_s)",
        minimum=1,
    )
    # levers a fair CPU baseline needs (`stbench tune`)
    interop_threads: int = _knob(0, "torch inter-op threads (0: torch's default)", minimum=0)
    bind: str = _knob(
        "none",
        "pin the cell's threads: none; cores (one logical CPU of each of the first "
        "`threads` physical cores, as taskset -C); numa (numactl: CPUs and memory of NUMA node 0; "
        "needs numactl)",
        ("none", "cores", "numa"),
    )
    max_eval_samples: int = _knob(
        0,
        "cap on validation samples per evaluation (0: all), so cells of different batch sizes "
        "are judged on the same samples",
        minimum=0,
    )

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> TrainerParams:
        """The trainer's view of a cell's parameters (every one written out)."""
        return cls(**{f.name: params[f.name] for f in fields(cls)})


COMMON_PARAMS: tuple[Param, ...] = tuple(
    Param(
        f.name,
        type(f.default),
        f.default,
        f.metadata["help"],
        f.metadata["choices"],
        f.metadata["minimum"],
    )
    for f in fields(TrainerParams)
)

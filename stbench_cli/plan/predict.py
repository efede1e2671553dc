"""Would a GPU pay? A GPU's step predicted from what the step is made of, measured on this CPU
(child/anatomy.py), and the card's published peaks (store/gpus.toml). Pure.

For one GPU and one size, two figures, both marked predicted wherever they are shown:

- **a lower bound** on the GPU's step time: the longest of
  - its FLOPs at the card's fastest dense peak for the precision (fp32 math may run as TF32
    where the card has it: cuDNN's default),
  - the bytes it must move at least (every parameter, gradient and optimizer-state byte read and
    written once, every saved activation written and read once, the batch read once) at the
    card's memory bandwidth; a working set that fits the card's L2 cache may never reach its
    memory, and then counts nothing here,
  - the batch crossing the host link (the data lives in host memory), and what else the step
    copies from host memory (stnn's offloaded relation rows, `streamed_bytes`),
  - its kernel launches at the published per-launch floor,
  - the host's own time of the step (Python, the optimizer's loop, autograd's engine: what its
    thread does between its operators, measured here) and its data loading where that runs in
    the step's own thread (no loader workers, the data in host memory: `serial_data_s`,
    measured here), the first at
    HOST_SPEEDUP, the loading at DATA_SPEEDUP times this CPU's speed (a GPU's host may be
    faster; for a card on this very machine, `Gpu.measured_here`, the host's own time as
    measured and at least the least loading measured), and then
    each operator at eager PyTorch's least host cost of a CUDA operator
    measured on a GPU's host (`eager_op_us`: an in-place add on one element, whose host path
    holds Python's call, the dispatch below it and the launch) and each further
    kernel at the launch floor (one thread does all of it in turn); where the loading is most
    of that, the bound is named the host's data loading, where the operators' dispatch and
    launches are, launches;
  whichever is longest names what bounds the size, and the lever that would move it;
- **an estimate**: the host's time (its own share of a step and its data loading, measured
  here, and eager PyTorch's host cost of each kernel it launches, `launch_s`) against the GPU's
  (its FLOPs at FLOP_EFFICIENCY of the fp32 peak, its bytes at BANDWIDTH_EFFICIENCY of the
  bandwidth, each launch's floor), the longer of the two: eager PyTorch runs the host ahead of
  the GPU, so the slower side sets the pace. `launch_s` is fitted on measured GPU rows
  (benchmarks/predict_check.py, EAGER_LAUNCH_S) and checked on rows it was not fitted on.

And whether the size fits the card's memory: the workload's own memory prediction where it has
one, else the step's (`Anatomy.memory_bytes`: the most tensor bytes alive at once in a step,
counted here, the batch and the data the workload keeps on the device) and the CUDA
libraries' allocations a training process holds (contract.memory.cuda_library_bytes, the one
stnn's own prediction adds too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import tomllib

from ..contract.memory import cuda_library_bytes
from ..errors import StbenchError

HOST_SPEEDUP = 2.0  # the bound takes a GPU's host as up to 2x this CPU's speed per thread
# and its loading of a batch as up to 4x this CPU's (gathers that torch spreads over threads and
# memory bandwidth): the first H100 run's 16-core host loaded cnn-strain's batches 2.3x as fast as
# this project's 2-vCPU VM did (benchmarks/predict_check.py)
DATA_SPEEDUP = 4.0
FLOP_EFFICIENCY = 0.5  # the estimate's share of the fp32 peak a step's math reaches
BANDWIDTH_EFFICIENCY = 0.7  # and of the memory bandwidth its bytes reach
# eager PyTorch's host time per operator on a GPU's host (its dispatch, the caching allocator,
# the launch), fitted on the first H100 run's lstm-era5 rows (those of its fitted workloads
# whose host thread loads no data) by `python benchmarks/predict_check.py` (its other rows
# judge it)
EAGER_LAUNCH_S = 39.2e-6
MEMORY_SHARE = 0.9  # of a card's memory a step may use (the CUDA context, the allocator's slack)
SHIPPED = Path(__file__).resolve().parents[1] / "store" / "gpus.toml"
DEFAULT_GPUS = ("T4", "A100-80GB", "H100")  # the answer's cards where none is asked


@dataclass(frozen=True)
class Anatomy:
    """What one configuration's step is made of, counted on the CPU (child/anatomy.py; linear
    in the batch where it says so): anatomy.json."""

    workload: str
    batches: tuple[int, int]
    launches: float  # kernels a step launches on a GPU, at least (an epoch's mean of its kinds)
    operators: float  # the dispatcher's operators (a foreach operator once)
    state_bytes: float  # parameters + gradients + optimizer state
    saved_fixed: float  # activations saved for backward: fixed part, bytes
    saved_per_sample: float  # and per sample
    batch_fixed: float  # the batch (inputs and targets): fixed part, bytes
    batch_per_sample: float  # and per sample
    host_step_s: float  # a step's host time at the smaller batch, one thread
    flops_per_sample: float | None  # the workload's own count where it has one
    # the loader builds batches on the host (not sliced where the data lives, on the device):
    # with no workers, in the step's own thread (False for an anatomy.json written before it)
    data_on_host: bool = False
    # the tensor bytes alive at once in a step, as lines (fixed, per sample) whose highest at a
    # batch is the step's peak there (upper_envelope; () for an anatomy.json written before it)
    peak_lines: tuple[tuple[float, float], ...] = ()
    resident_bytes: float = 0.0  # held before a step: parameters, optimizer state, device data

    def memory_bytes(self, batch: int) -> float | None:
        """The most tensor bytes a step holds at once at `batch`: what it holds before, its
        peak inside, the batch (None where the anatomy did not count it)."""
        if not self.peak_lines:
            return None
        inside = max(fixed + per * batch for fixed, per in self.peak_lines)
        return self.resident_bytes + max(inside, 0.0) + self.batch_bytes(batch)

    def saved_bytes(self, batch: int) -> float:
        return max(self.saved_fixed + self.saved_per_sample * batch, 0.0)

    def batch_bytes(self, batch: int) -> float:
        return max(self.batch_fixed + self.batch_per_sample * batch, 0.0)


@dataclass(frozen=True)
class Gpu:
    """One GPU model's vendor peaks (dense), as gpus.toml holds them."""

    name: str
    variant: str
    fp32_tflops: float
    tf32_tflops: float
    bf16_tflops: float
    memory_gbps: float
    memory_gb: float
    l2_mb: float
    host_link_gbps: float
    source: str
    launch_floor_us: float = 0.0  # from the file's [launch]
    launch_source: str = ""
    # eager PyTorch's host cost of an operator on a GPU's host, at its least (the file's
    # [launch] eager_op_us where the card has none of its own; 0: the launch floor stands in)
    eager_op_us: float = 0.0
    eager_source: str = ""
    # the card is on the machine that measured the step (runner/predictions.on_this_host): its
    # host's own time and loading count as measured there (`loading_s`), not at the speedups a
    # card on another host may have; never read from a file
    measured_here: bool = False

    def host_speedup(self) -> float:
        """How much faster than the measuring CPU the bound lets this card's host run a step's
        own time: HOST_SPEEDUP, or 1 where the card is on the machine that measured it."""
        return 1.0 if self.measured_here else HOST_SPEEDUP

    def peak_flops(self, precision: str, best: bool) -> float:
        """FLOP/s for a precision: bf16 on its units; fp32 at TF32 where `best` and the card
        has TF32, else at fp32."""
        if precision == "bf16" and self.bf16_tflops:
            return self.bf16_tflops * 1e12
        if best and self.tf32_tflops:
            return max(self.tf32_tflops, self.fp32_tflops) * 1e12
        return self.fp32_tflops * 1e12


@dataclass(frozen=True)
class Step:
    """A step at one size, as the CPU measured it (anatomy and the CPU's own rows)."""

    size: str
    batch: int
    flops: float  # forward + backward, the step
    launches: float
    state_bytes: float
    saved_bytes: float
    batch_bytes: float
    host_s: float  # the host's own time of a step here: between its operators (child/anatomy.py)
    data_s: float = 0.0  # the loader's time of a step here (the CPU's rows), 0 where unknown
    # of which in the step's own thread (no loader workers, the data on the host): the bound's
    serial_data_s: float = 0.0
    # the least of it any row took (a cell's loading varies from window to window: the H200's
    # stnn at 10,000 pairs 8.0-14 ms a step): what this host needs at least (loading_s)
    least_serial_data_s: float = 0.0
    streamed_bytes: float = 0.0  # copied from host memory a step besides the batch (offload)
    predicted_mb: float | None = None  # the workload's memory prediction of the step
    cpu_step_s: float | None = None  # the CPU's fastest measured step at this size
    # the operators eager PyTorch dispatches a step (a cuDNN LSTM layer once, however many
    # kernels it launches): what the host pays its per-operator cost for; 0 where unknown (the
    # launches stand in)
    operators: float = 0.0


@dataclass(frozen=True)
class Prediction:
    gpu: str
    size: str
    bound_s: float
    estimate_s: float
    bound_by: str  # launches, FLOPs, memory bandwidth, the host link, the host
    lever: str  # what would move it
    fits: bool | None  # the step fits the card's memory (None: no prediction of it)
    terms: Mapping[str, float]  # each term of the bound, seconds
    most_gain: float | None  # the CPU's step over the bound: the most the GPU could gain
    estimated_gain: float | None


LEVERS = {
    "launches": "CUDA graphs (--cuda-graphs), torch.compile (fused kernels) or a bigger batch: "
    "fewer launches per sample",
    "the host": "CUDA graphs or torch.compile (less Python a step), or a bigger batch",
    "the host's data loading": "loader workers (--set workers=N) or the data on the GPU",
    "FLOPs": "bf16 autocast on the tensor cores",
    "memory bandwidth": "bf16 (half the bytes) or a bigger batch (the weights read once per step)",
    "the host link": "keep the data on the GPU (a device-resident dataset, index batching)",
}


def at_floor(kernels: float, gpu: Gpu) -> float:
    """Seconds of `kernels` launches at the card's per-launch floor."""
    return kernels * gpu.launch_floor_us * 1e-6


def host_launch_s(step: Step, gpu: Gpu, per_operator_s: float) -> float:
    """The host time of a step's operators and launches on a GPU's host: each operator eager
    PyTorch dispatches at `per_operator_s`, each kernel it launches beyond its first (cuDNN's,
    from C++: the driver's call) at the launch floor."""
    operators = step.operators or step.launches
    return operators * per_operator_s + at_floor(max(step.launches - operators, 0.0), gpu)


def least_operator_s(gpu: Gpu) -> float:
    """Eager PyTorch's least host cost of an operator on the card's host (never below a launch)."""
    return max(gpu.eager_op_us, gpu.launch_floor_us) * 1e-6


def _moved_bytes(step: Step) -> float:
    """What a step moves through the card's memory at least: the state written once, every
    saved activation written and read once, the batch read once."""
    return 2 * step.state_bytes + 2 * step.saved_bytes + step.batch_bytes


def _link_s(step: Step, gpu: Gpu) -> float:
    """The batch and whatever else is streamed from host memory, over the host link."""
    return (step.batch_bytes + step.streamed_bytes) / (gpu.host_link_gbps * 1e9)


def loading_s(step: Step, gpu: Gpu) -> float:
    """The loading in the step's own thread the bound charges: the median here at DATA_SPEEDUP
    times this host's speed, which any host may reach; on the card's own host, at least the
    least it took here (never its median: the H200's own cuda cells loaded stnn's 10,000 pairs
    in 9.1 ms a step, its CPU rows' median 10.2)."""
    anywhere = step.serial_data_s / DATA_SPEEDUP
    return max(anywhere, step.least_serial_data_s) if gpu.measured_here else anywhere


def bound_terms(step: Step, gpu: Gpu, precision: str = "default") -> dict[str, float]:
    moved = _moved_bytes(step)
    in_l2 = moved / 2 <= gpu.l2_mb * 1e6  # the working set, each byte once
    return {
        "FLOPs": step.flops / gpu.peak_flops(precision, best=True),
        "memory bandwidth": 0.0 if in_l2 else moved / (gpu.memory_gbps * 1e9),
        "the host link": _link_s(step, gpu),
        "launches": at_floor(step.launches, gpu),
        # one thread does it all, one after the other: the step's Python and autograd work, its
        # batch where no worker loads it, and each operator's dispatch and launch (measured on a
        # GPU's host: what runs below Python here is this CPU's kernels, not the GPU's path)
        "the host": step.host_s / gpu.host_speedup()
        + loading_s(step, gpu)
        + host_launch_s(step, gpu, least_operator_s(gpu)),
    }


def estimated_step_s(step: Step, gpu: Gpu, launch_s: float = EAGER_LAUNCH_S) -> float:
    # eager PyTorch's cost is per operator it dispatches, at its fitted cost in a real step
    host = step.host_s + step.data_s + host_launch_s(step, gpu, launch_s)
    device = (
        step.flops / (gpu.peak_flops("default", best=False) * FLOP_EFFICIENCY)
        + _moved_bytes(step) / (gpu.memory_gbps * 1e9 * BANDWIDTH_EFFICIENCY)
        + at_floor(step.launches, gpu)
    )
    return max(host, device, _link_s(step, gpu))


def bounded_by(step: Step, gpu: Gpu, terms: Mapping[str, float]) -> str:
    """What bounds the step: the longest term, the host's named for its data loading or its
    launches (each operator's dispatch and launch) where that is most of it."""
    by = max(terms, key=lambda k: terms[k])
    if by == "the host" and loading_s(step, gpu) > terms[by] / 2:
        return "the host's data loading"
    if by == "the host" and host_launch_s(step, gpu, least_operator_s(gpu)) > terms[by] / 2:
        return "launches"
    return by


def upper_envelope(
    lines: Sequence[tuple[float, float]], start: float
) -> tuple[tuple[float, float], ...]:
    """The lines (fixed, per sample) that are the highest at some batch from `start` on, by
    slope: the rest never set a peak there (the convex hull trick)."""
    best: dict[float, float] = {}
    for fixed, per in lines:
        best[per] = max(best.get(per, fixed), fixed)
    hull: list[tuple[float, float]] = []
    for per in sorted(best):
        fixed = best[per]
        while hull:
            top_fixed, top_per = hull[-1]
            overtakes = (top_fixed - fixed) / (per - top_per)  # where the new line passes the top
            below = len(hull) > 1 and overtakes <= _crossing(hull[-2], hull[-1])
            if overtakes <= start or below:
                hull.pop()
            else:
                break
        hull.append((fixed, per))
    return tuple(hull)


def _crossing(a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - b[0]) / (b[1] - a[1])


def anatomy_memory_mb(found: Anatomy, batch: int) -> float | None:
    """A GPU step's memory from its anatomy, MiB: its tensors and the CUDA libraries'
    allocations, at an unknown card's (the larger: the table holds no capability, so "fits"
    errs toward no; the first H100 run's peaks lay 64-65 MiB above cnn-strain's and
    dcrnn-pems' tensors, those two 32 MiB cuBLAS workspaces)."""
    held = found.memory_bytes(batch)
    return None if held is None else (held + cuda_library_bytes(None)) / 2**20


def predict(step: Step, gpu: Gpu, launch_s: float = EAGER_LAUNCH_S) -> Prediction:
    terms = bound_terms(step, gpu)
    by = bounded_by(step, gpu, terms)
    bound = max(terms.values())
    estimate = max(estimated_step_s(step, gpu, launch_s), bound)  # never below the bound
    fits = (
        None
        if step.predicted_mb is None
        else step.predicted_mb <= gpu.memory_gb * 1024 * MEMORY_SHARE
    )
    cpu = step.cpu_step_s
    return Prediction(
        gpu.name,
        step.size,
        bound,
        estimate,
        by,
        LEVERS[by],
        fits,
        terms,
        cpu / bound if cpu and bound > 0 else None,
        cpu / estimate if cpu and estimate > 0 else None,
    )


# --- the table of GPU models --------------------------------------------------------------------

_OPTIONAL = ("launch_floor_us", "eager_op_us")  # the [launch] section's, where a card has none
_NUMBERS = [f.name for f in fields(Gpu) if f.type == "float" and f.name not in _OPTIONAL]


def read_gpus(path: Path = SHIPPED, base: Mapping[str, Gpu] | None = None) -> dict[str, Gpu]:
    """The GPU models of a gpus.toml file (the shipped one, or a user's: its cards added to
    `base`, a name already there replaced; a card without a launch floor or an eager operator's
    cost of its own, in a file without [launch], takes the shipped one); a card missing a figure
    is one line naming it."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StbenchError(f"GPU models file {path}: not a readable TOML file ({exc})") from None
    launch = data.get("launch") or {}
    shipped = next(iter(base.values()), None) if base else None
    floor = launch.get("floor_us", shipped.launch_floor_us if shipped else None)
    floor_source = launch.get("source", shipped.launch_source if shipped else "")
    eager = launch.get("eager_op_us", shipped.eager_op_us if shipped else 0.0)
    eager_source = launch.get("eager_source", shipped.eager_source if shipped else "")
    out = dict(base or {})
    for i, card in enumerate(data.get("gpu") or []):
        name = str(card.get("name") or f"card {i + 1}")
        missing = [k for k in ("name", *_NUMBERS, "source") if k not in card]
        if floor is None and "launch_floor_us" not in card:
            missing.append("launch_floor_us (or a [launch] floor_us)")
        if missing:
            raise StbenchError(
                f"--gpus {path}: {name} lacks {', '.join(missing)} (the format: "
                "docs/gpu-predictions.md)"
            )
        try:
            numbers = {k: float(card[k]) for k in (*_NUMBERS, *_OPTIONAL) if k in card}
        except (TypeError, ValueError):
            raise StbenchError(f"--gpus {path}: {name} has a figure that is not a number") from None
        out[name] = Gpu(
            name=name,
            variant=str(card.get("variant", "")),
            source=str(card["source"]),
            launch_source=str(card.get("launch_source", floor_source)),
            eager_source=str(card.get("eager_source", eager_source)),
            **{"launch_floor_us": floor, "eager_op_us": float(eager), **numbers},
        )
    if not out:
        raise StbenchError(f"--gpus {path}: no [[gpu]] table in it")
    return out


def chosen(gpus: Mapping[str, Gpu], names: Sequence[str] = ()) -> list[Gpu]:
    """The cards an answer predicts: those named (a user's file's), else DEFAULT_GPUS."""
    wanted = list(names) or [n for n in DEFAULT_GPUS if n in gpus]
    return [gpus[n] for n in dict.fromkeys(wanted) if n in gpus]


def table_name(device_name: str, gpus: Mapping[str, Gpu]) -> str | None:
    """The table's card for a device's name ('NVIDIA H100 80GB HBM3' -> 'H100', 'NVIDIA H100
    PCIe' -> 'H100-PCIe', 'NVIDIA A100-SXM4-80GB' -> 'A100-80GB'); None where none matches."""
    words = device_name.upper().replace("-", " ").split()
    found = []
    for name in gpus:
        parts = name.upper().split("-")
        if parts[0] in words and all(p in words or p in device_name.upper() for p in parts[1:]):
            found.append(name)
    return max(found, key=len) if found else None

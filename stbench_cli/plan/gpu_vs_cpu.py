"""`stbench gpu-vs-cpu`: is the GPU worth it for this workload, and from what size. Pure: the
question in, the configurations each size measures and the pairs its answer judges out.

At each size of the workload's size axis (`Workload.size`, or the sizes asked; a size is a size
of the work, the FLOPs of a step grow along it) the question measures, as windows inside warm
processes (the engine: plan/pairs.py, runner/windows.py):

- the CPU at its defaults (the workload's preset as it is: stbench's threads, its loader workers),
- the CPU's quick levers, one candidate each: one thread, half the physical cores, no loader
  workers where the preset has some, bf16 autocast where the CPU has bf16 units, and
  torch.compile where the budget can pay a compilation in every process (`cpu_candidates`,
  `pays_compile`; the compilation runs untimed, never in samples/s); the CPU's fastest is the
  tuned CPU,
- on a GPU machine, the GPU with each of its levers (`gpu_levers`: torch's default precision,
  which is TF32 in cuDNN and strict fp32 in cuBLAS; TF32 in both; bf16 autocast; CUDA graphs
  where the budget pays their compilation beside the CPU's, or `--cuda-graphs` asks: they pay
  where steps are launch-bound, and where they are not the windows say so).

The pairs each size judges (`comparisons`): the GPU's fastest against the CPU's fastest and
against the CPU at its defaults; without a GPU, the CPU's fastest other configuration against its
defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from ..comparison import MARGIN, SPS, by_round
from ..contract import BATCH, Workload
from ..device import is_cuda
from ..errors import StbenchError
from ..store.manifest import GPU_VS_CPU_KIND, LEVER_KIND, RUN_KIND
from .pairs import COMPILE_S, FIRST_ROUNDS, PROCESSES, Comparison, budget_floor, compared
from .spec import LIVE_LEVERS, RunSpec, once

# the CPU's quick levers: each changes inside a running process (no preload, no binding)
CPU_LEVERS = LIVE_LEVERS


@dataclass(frozen=True)
class Question:
    """What `stbench gpu-vs-cpu` was asked."""

    workload: str
    sizes: tuple[Any, ...] = ()  # values of the size axis (empty: the workload's own)
    budget_s: float = 300.0  # wall seconds for the whole study, every round included
    window_s: float | None = None  # a window's floor in timed seconds (None: from the budget)
    gpu: str = "cuda"  # the GPU device; "" where the machine has none (the CPU's configurations)
    cuda_graphs: bool = False  # also compile=reduce-overhead on the GPU
    smoke: bool = False
    preset: str | None = None
    seed: int = 0
    out: Path = Path("results")
    full_rounds: int = FIRST_ROUNDS  # paired rounds of every configuration at each size first
    sets: tuple[str, ...] = ()  # --set key=value: one value each, in every cell


@dataclass(frozen=True)
class Config:
    """One configuration of a size: its device, the role it plays and its parameters."""

    device: str
    role: str  # "defaults", "candidate" (a CPU lever) or "gpu"
    sets: Mapping[str, Any] = field(default_factory=dict)


def axis_values(w: Workload, q: Question) -> tuple[Any, ...]:
    """The sizes asked: --sizes (checked against the parameter, each once, small to large), else
    the workload's own (its smoke pair with --smoke)."""
    if w.size is None:
        raise StbenchError(
            f"{w.name} declares no size axis (Workload.size): name the parameter and its values "
            "with `stbench run --set NAME=V1,V2 --device cpu cuda` instead"
        )
    if not q.sizes:
        return tuple((w.size.smoke or w.size.values[:2]) if q.smoke else w.size.values)
    if w.size.param == BATCH:
        values = [_positive_int(v) for v in q.sizes]
    else:
        param = w.all_params[w.size.param]
        try:
            values = [param.parse(str(v)) for v in q.sizes]
        except ValueError as exc:
            raise StbenchError(f"--sizes: {exc}") from None
    once("--sizes", values)
    # small to large, as the workload's own run: the engine measures them in this order, the
    # smallest first, and reads a lever falling behind as the work grows from the last two
    return tuple(sorted(values, key=w.size.counted))


def _positive_int(value) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise StbenchError(f"--sizes {value!r}: a batch size is a positive integer")
    return n


def cpu_candidates(
    base: Mapping[str, Any], physical: int, bf16: bool = False, compile_: bool = False
) -> list[dict]:
    """The CPU's quick levers against the defaults (`base`): one thread, half the physical cores,
    all of them where the defaults fix fewer, no loader workers where the defaults have some,
    bf16 autocast where the CPU has bf16 units (`bf16`), torch.compile's default mode where the
    budget pays for it (`compile_`); none that repeats the defaults."""
    threads, workers = int(base.get("threads", 0)), int(base.get("workers", 0))
    tried = [{"threads": 1}, {"threads": max(physical // 2, 1)}]
    if threads:  # the preset fixes a count (a smoke's one thread): the machine's choice too
        tried.append({"threads": 0})
    if workers:
        tried.append({"workers": 0})
    if bf16 and base.get("precision", "default") != "bf16":
        tried.append({"precision": "bf16"})
    if compile_:
        tried.append({"compile": "default"})
    out = []
    for sets in tried:
        if all(base.get(k) == v for k, v in sets.items()) or sets in out:
            continue
        out.append(sets)
    return out


def gpu_levers(cuda_graphs: bool) -> list[dict]:
    """The GPU's own levers: torch's default precision (cuBLAS's products in strict fp32), TF32
    (cuBLAS's too: a matmul-heavy step's fp32 at up to 8x the rate on an H100) and bf16
    autocast; CUDA graphs (torch.compile's reduce-overhead mode: a launch-bound step's kernels
    replayed from one graph, ~1 us each where eager PyTorch's host took 8.7 us on the H200 run)
    where the budget pays their compilation, or `--cuda-graphs` asks."""
    levers = [{"precision": "default"}, {"precision": "tf32"}, {"precision": "bf16"}]
    if cuda_graphs:
        # at TF32, the eager fastest on every H200 size (bf16 autocast adds its casts' kernels)
        levers.append({"precision": "tf32", "compile": "reduce-overhead"})
    return levers


def pays_compile(q: Question, sizes: int, configs: int, window_s: float, compiled: int = 1) -> bool:
    """Whether the budget can pay `compiled` compiled configurations beside `configs` others:
    the least budget that measures every size twice with them, and a compilation of each
    (pairs.COMPILE_S until one is measured) in each of the two processes that measure each size.
    Where it cannot, the question leaves them out before anything runs (`tune` tries compile on
    one size); the engine leaves one out of a larger size whose compilations do not fit."""
    floor = budget_floor(sizes, configs + compiled, window_s)
    return q.budget_s >= floor + compiled * PROCESSES * sizes * COMPILE_S


def configs(
    q: Question,
    base: Mapping[str, Any],
    physical: int,
    bf16: bool = False,
    compile_: bool = False,
    cuda_graphs: bool = False,
) -> list[Config]:
    """Every configuration each size runs, the CPU at its defaults first: the CPU compiled
    where `compile_`, the GPU's CUDA graphs where `cuda_graphs` or the question asks them."""
    out = [Config("cpu", "defaults")]
    out += [Config("cpu", "candidate", c) for c in cpu_candidates(base, physical, bf16, compile_)]
    if q.gpu:
        out += [Config(q.gpu, "gpu", g) for g in gpu_levers(q.cuda_graphs or cuda_graphs)]
    return out


def window_sets(q: Question, w: Workload) -> dict[str, Any]:
    """What every cell of the question sets besides its configuration: the size axis' fixed
    parameters, and an evaluation cut to two batches (a window trains; it never evaluates)."""
    assert w.size is not None
    return {**dict(w.size.fixed), "max_eval_batches": 2}


def record(
    q: Question, w: Workload, sizes: Sequence, base: Mapping[str, Any], window_s: float
) -> dict:
    """The question as the manifest keeps it: what the report needs to read the study as an
    answer (the size axis, each size's count of its unit, the CPU's defaults)."""
    assert w.size is not None
    return {
        "kind": GPU_VS_CPU_KIND,
        "size": {
            "param": w.size.param,
            "unit": w.size.unit,
            "values": [str(v) for v in sizes],
            "counts": [w.size.counted(v) for v in sizes],
        },
        # compile too: a compiled configuration's quick levers are the defaults'
        "defaults": {
            **{k: base.get(k) for k in CPU_LEVERS},
            "compile": base.get("compile", "none"),
        },
        "window_s": window_s,
        "budget_s": q.budget_s,
        "rounds": q.full_rounds,
        # what the answer judges: at each size, these roles against each other
        "pairs": [["cpu fastest", "gpu fastest"], ["cpu defaults", "gpu fastest"]]
        if q.gpu
        else [["cpu defaults", "cpu fastest other"]],
        "margin": MARGIN,
        "gpu": q.gpu,
    }


# --- the pairs --------------------------------------------------------------------------------


def size_of(spec: RunSpec, param: str) -> str:
    """A cell's size as the question's record names it ('' where the record has no size axis:
    `run --budget`'s windows, every cell one size)."""
    if not param:
        return ""
    return str(spec.batch_size if param == BATCH else spec.param_dict.get(param))


def first_rounds(cells: Sequence[RunSpec]) -> dict[str, str]:
    """Each cell's run id -> its first round's (what plan_round repeats): one key per cell over
    its rounds."""
    firsts = {(c.device, c.batch_size, c.params): c.run_id for c in cells if c.repeat == 0}
    return {c.run_id: firsts[(c.device, c.batch_size, c.params)] for c in cells}


def _by_cell(cells: Sequence[RunSpec], rows: Sequence[dict]) -> dict[str, dict[int, float]]:
    """Each first-round cell's samples/s by round (its ok rows only)."""
    firsts = first_rounds(cells)
    grouped: dict[str, list[dict]] = {first: [] for first in set(firsts.values())}
    for r in rows:
        if r["run_id"] in firsts:
            grouped[firsts[r["run_id"]]].append(r)
    return {first: by_round(group, SPS) for first, group in grouped.items()}


def comparisons(
    cells: Sequence[RunSpec], rows: Sequence[dict], param: str, defaults: Mapping[str, Any]
) -> list[Comparison]:
    """At each size: the GPU's fastest cell against the CPU's fastest and against the CPU at its
    defaults; without a GPU, the CPU's fastest configuration other than its defaults against
    them (each by its median samples/s over the rounds it ran, paired round by round)."""
    values = _by_cell(cells, rows)
    out = []
    for size in dict.fromkeys(size_of(c, param) for c in cells if c.repeat == 0):
        here = [c for c in cells if c.repeat == 0 and size_of(c, param) == size]
        cpu = [c for c in here if not is_cuda(c.device) and values[c.run_id]]
        gpu = [c for c in here if is_cuda(c.device) and values[c.run_id]]
        plain = [c for c in cpu if all(c.param_dict.get(k) == v for k, v in defaults.items())]
        if not cpu:
            continue

        def fastest(found: list[RunSpec]) -> RunSpec:
            return max(found, key=lambda c: median(values[c.run_id].values()))

        top = fastest(cpu)
        others = [c for c in cpu if not plain or c is not plain[0]]
        if gpu:
            pairs = [(top, fastest(gpu))]
            pairs += [(plain[0], fastest(gpu))] if plain and plain[0] is not top else []
        else:  # the CPU's fastest other configuration stands in for the GPU
            pairs = [(plain[0], fastest(others))] if plain and others else []
        out += [_paired_comparison(size, a, b, values) for a, b in pairs]
    return out


def _takes_away(sets: Mapping[str, Any], defaults: Mapping[str, Any], physical: int) -> bool:
    """Whether a CPU configuration only takes resources from the defaults: fewer threads (auto,
    0, is every physical core), or no loader workers where the defaults have some. Such a lever
    loses more as the work grows; a precision can turn from a loss to a gain (where a step
    becomes compute-bound) and is never judged so."""
    moved = {k: v for k, v in sets.items() if defaults.get(k) != v}
    if not moved or set(moved) - {"threads", "workers"}:
        return False
    base_threads = int(defaults.get("threads") or 0) or physical
    fewer = "threads" not in moved or 0 < int(moved["threads"] or 0) < base_threads
    fewer_workers = "workers" not in moved or int(moved["workers"] or 0) < int(
        defaults.get("workers") or 0
    )
    return fewer and fewer_workers


@dataclass(frozen=True)
class Outgrown:
    """A CPU lever a larger size does not measure: slower than the CPU at its defaults at the
    two sizes before (`seen`: the comparisons, lever over defaults), concluded, and more so at
    the larger."""

    sets: tuple[tuple[str, Any], ...]  # what the lever sets apart from the defaults
    seen: tuple[Comparison, Comparison]


def outgrown(
    cells: Sequence[RunSpec],
    rows: Sequence[dict],
    param: str,
    last_two: Sequence[str],
    defaults: Mapping[str, Any],
    physical: int,
) -> list[Outgrown]:
    """The CPU levers that only take resources from the defaults (`_takes_away`) and measured
    slower than them at both of the `last_two` sizes (each interval below 1), the ratio lower
    at the second: measuring them at a larger size would buy a window that cannot be the CPU's
    fastest, where it costs the most (a one-thread window at the largest size is most of a
    round)."""
    values = _by_cell(cells, rows)
    seen: dict[tuple, list[Comparison]] = {}
    for size in last_two:
        here = [c for c in cells if c.repeat == 0 and size_of(c, param) == size]
        cpu = [c for c in here if not is_cuda(c.device) and values[c.run_id]]
        plain = [c for c in cpu if all(c.param_dict.get(k) == v for k, v in defaults.items())]
        if not plain:
            return []
        for c in cpu:
            sets = {k: c.param_dict.get(k) for k in CPU_LEVERS}
            if c is plain[0] or not _takes_away(sets, defaults, physical):
                continue
            moved = tuple(sorted((k, v) for k, v in sets.items() if defaults.get(k) != v))
            seen.setdefault(moved, []).append(_paired_comparison(size, plain[0], c, values))
    out = []
    for moved, (before, last) in ((k, v) for k, v in seen.items() if len(v) == 2):
        slower = all(x.rounds >= 2 and x.high is not None and x.high < 1 for x in (before, last))
        if slower and last.ratio is not None and last.ratio <= (before.ratio or 0):
            out.append(Outgrown(moved, (before, last)))
    return out


def against_reference(
    cells: Sequence[RunSpec], rows: Sequence[dict], param: str, reference: Mapping[str, Any]
) -> list[Comparison]:
    """At each size, every other configuration against the reference (the one whose
    parameters hold `reference`): a tune's step, each value tried against the best so far."""
    values = _by_cell(cells, rows)
    out = []
    for size in dict.fromkeys(size_of(c, param) for c in cells if c.repeat == 0):
        here = [c for c in cells if c.repeat == 0 and size_of(c, param) == size]
        held = [c for c in here if all(c.param_dict.get(k) == v for k, v in reference.items())]
        if not held or not values[held[0].run_id]:
            continue
        out += [
            _paired_comparison(size, held[0], c, values)
            for c in here
            if c is not held[0] and values[c.run_id]
        ]
    return out


def against_first(cells: Sequence[RunSpec], rows: Sequence[dict]) -> list[Comparison]:
    """Every other configuration against the study's first (`run --budget`'s windows: the first
    of each axis as given, as a run's comparisons are read)."""
    values = _by_cell(cells, rows)
    firsts = [c for c in cells if c.repeat == 0 and values[c.run_id]]
    if not firsts or firsts[0] is not next(c for c in cells if c.repeat == 0):
        return []  # the first has no ok window yet: nothing to hold the others against
    return [_paired_comparison("", firsts[0], c, values) for c in firsts[1:]]


def judged(record: Mapping, cells: Sequence[RunSpec], rows: Sequence[dict]) -> list[Comparison]:
    """The pairs a question's record judges: gpu-vs-cpu's (`comparisons`), a tune step's
    (`against_reference`, kind "lever"), or `run --budget`'s (`against_first`, kind "run")."""
    param = record["size"]["param"]
    if record.get("kind") == RUN_KIND:
        return against_first(cells, rows)
    if record.get("kind") == LEVER_KIND:
        return against_reference(cells, rows, param, record["reference"])
    return comparisons(cells, rows, param, record["defaults"])


def _paired_comparison(size: str, a: RunSpec, b: RunSpec, values: Mapping) -> Comparison:
    return compared(size, a.run_id, b.run_id, values[a.run_id], values[b.run_id])

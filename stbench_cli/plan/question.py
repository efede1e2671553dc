"""`stbench gpu-vs-cpu`: is the GPU worth it for this workload, and from what size (issue 37).
Pure: the question in, the study that answers it and the decision to run another round out.

One study, one folder. At each size of the workload's size axis (`Workload.size`, or the sizes
asked), every cell trains for the same window of timed seconds after its warm-up (`time_budget`:
a fixed window, not an epoch count, so that a small and a large size cost the same wall time):

- the CPU at its defaults (the workload's preset as it is: stbench's threads, its loader workers),
- the CPU's quick levers, one candidate each: one thread, half the physical cores, no loader
  workers where the preset has some (`cpu_candidates`); the CPU's fastest is the tuned CPU,
- on a GPU machine, the GPU with each of its levers (`gpu_levers`: torch's default precision,
  which is TF32 in cuDNN and strict fp32 in cuBLAS, and bf16 autocast; CUDA graphs with
  `--cuda-graphs`, where steps are launch-bound).

The first two rounds run every cell (repeats are the study's outer loop, so a round's cells saw
the same machine and pair), the second only where the budget can pay for it. After that,
`decide` asks at each size whether the GPU's fastest cell can be told from the CPU's fastest and
from the CPU at its defaults (without a GPU: the CPU's fastest other configuration from its
defaults), paired round by round; while one cannot and a round of the cells those comparisons
need fits in what is left of the budget, one more round of just those cells runs. A size
concludes, or the budget ends; the answer (report/question.py) says which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from ..comparison import SPS, by_round
from ..comparison import judge as compare
from ..contract import BATCH, Workload
from ..device import is_cuda
from ..errors import StbenchError
from .spec import RunSpec

NEVER = 1000  # stats.rounds_needed's cap: the per-round ratios average 1
FULL_ROUNDS = 2  # rounds of every cell before any is left out (a paired interval needs two)
CPU_LEVERS = ("threads", "workers")  # the CPU's quick levers: no restart, no preload, no compile


@dataclass(frozen=True)
class Question:
    """What `stbench gpu-vs-cpu` was asked."""

    workload: str
    sizes: tuple[Any, ...] = ()  # values of the size axis (empty: the workload's own)
    budget_s: float = 300.0  # wall seconds for the whole study, every round included
    window_s: float = 2.0  # timed training seconds per cell, after its warm-up
    gpu: str = "cuda"  # the GPU device; "" where the machine has none (the CPU's configurations)
    cuda_graphs: bool = False  # also compile=reduce-overhead on the GPU
    smoke: bool = False
    preset: str | None = None
    seed: int = 0
    out: Path = Path("results")
    rounds: int = 1  # rounds planned at first (each later one is decided, within the budget)
    full_rounds: int = FULL_ROUNDS  # rounds of every cell before any is left out
    sets: tuple[str, ...] = ()  # --set key=value: one value each, in every cell


@dataclass(frozen=True)
class Config:
    """One configuration of a size: its device, the role it plays and its parameters."""

    device: str
    role: str  # "defaults", "candidate" (a CPU lever) or "gpu"
    sets: Mapping[str, Any] = field(default_factory=dict)


def axis_values(w: Workload, q: Question) -> tuple[Any, ...]:
    """The sizes asked: --sizes (checked against the parameter), else the workload's own (its
    smoke pair with --smoke)."""
    if w.size is None:
        raise StbenchError(
            f"{w.name} declares no size axis (Workload.size): name the parameter and its values "
            "with `stbench run --set NAME=V1,V2 --device cpu cuda` instead"
        )
    if not q.sizes:
        return tuple((w.size.smoke or w.size.values[:2]) if q.smoke else w.size.values)
    if w.size.param == BATCH:
        return tuple(_positive_int(v) for v in q.sizes)
    param = w.all_params[w.size.param]
    try:
        return tuple(dict.fromkeys(param.parse(str(v)) for v in q.sizes))
    except ValueError as exc:
        raise StbenchError(f"--sizes: {exc}") from None


def _positive_int(value) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise StbenchError(f"--sizes {value!r}: a batch size is a positive integer")
    return n


def cpu_candidates(base: Mapping[str, Any], physical: int) -> list[dict]:
    """The CPU's quick levers against the defaults (`base`): one thread, half the physical cores,
    all of them where the defaults fix fewer, no loader workers where the defaults have some;
    none that repeats the defaults."""
    threads, workers = int(base.get("threads", 0)), int(base.get("workers", 0))
    tried = [{"threads": 1}, {"threads": max(physical // 2, 1)}]
    if threads:  # the preset fixes a count (a smoke's one thread): the machine's choice too
        tried.append({"threads": 0})
    if workers:
        tried.append({"workers": 0})
    out = []
    for sets in tried:
        if all(base.get(k) == v for k, v in sets.items()) or sets in out:
            continue
        out.append(sets)
    return out


def gpu_levers(cuda_graphs: bool) -> list[dict]:
    """The GPU's own levers: torch's default precision and bf16 autocast; CUDA graphs
    (torch.compile's reduce-overhead mode) where asked."""
    levers = [{"precision": "default"}, {"precision": "bf16"}]
    if cuda_graphs:
        levers.append({"precision": "bf16", "compile": "reduce-overhead"})
    return levers


def configs(q: Question, base: Mapping[str, Any], physical: int) -> list[Config]:
    """Every configuration each size runs, the CPU at its defaults first."""
    out = [Config("cpu", "defaults")]
    out += [Config("cpu", "candidate", c) for c in cpu_candidates(base, physical)]
    if q.gpu:
        out += [Config(q.gpu, "gpu", g) for g in gpu_levers(q.cuda_graphs)]
    return out


def window_sets(q: Question, w: Workload) -> dict[str, Any]:
    """What every cell of the question sets: the size axis' fixed parameters, the window, and an
    evaluation cut to two batches (a fixed window spends its seconds training)."""
    assert w.size is not None
    return {
        **dict(w.size.fixed),
        "time_budget": q.window_s,
        # one step out of samples/s (the optimizer's state is made in it): the untimed warm-up
        # pass made the libraries' first calls already, and a slow cell keeps steady steps
        "warmup_steps": 1,
        "max_eval_batches": 2,
    }


def record(q: Question, w: Workload, sizes: Sequence, base: Mapping[str, Any]) -> dict:
    """The question as the manifest keeps it: what the report needs to read the study as an
    answer (the size axis, each size's count of its unit, the CPU's defaults)."""
    assert w.size is not None
    return {
        "kind": "gpu-vs-cpu",
        "size": {
            "param": w.size.param,
            "unit": w.size.unit,
            "values": [str(v) for v in sizes],
            "counts": [w.size.counted(v) for v in sizes],
        },
        "defaults": {k: base.get(k) for k in CPU_LEVERS},
        "window_s": q.window_s,
        "budget_s": q.budget_s,
        "rounds": q.full_rounds,
        "gpu": q.gpu,
    }


# --- the rounds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """One comparison a size's answer needs, and where it stands."""

    size: str
    base: str  # run id of the first round's cell held against (the CPU's)
    other: str  # the GPU's fastest (or the tuned CPU, without a GPU)
    ratio: float | None
    low: float | None
    high: float | None
    rounds: int  # common rounds so far
    needs: int = 0  # rounds that could conclude it (comparison.judge; NEVER: they look equal)

    @property
    def concluded(self) -> bool:
        return self.rounds >= 2 and self.low is not None and (self.low > 1 or self.high < 1)


@dataclass(frozen=True)
class Decision:
    """Another round of these cells (their first round's run ids), or none, and why."""

    cells: tuple[str, ...]
    why: str


def size_of(spec: RunSpec, param: str) -> str:
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
        for a, b in pairs:
            v = compare(size, SPS, values[a.run_id], values[b.run_id])
            out.append(
                Comparison(size, a.run_id, b.run_id, v.ratio, v.low, v.high, v.rounds, v.needs)
            )
    return out


def decide(
    cells: Sequence[RunSpec],
    rows: Sequence[dict],
    param: str,
    defaults: Mapping[str, Any],
    left_s: float,
    cell_s: float,
    full: int = FULL_ROUNDS,
) -> Decision:
    """Rounds of every cell until there are `full` of them, then one more round of the cells of
    every open comparison that more rounds can close, while such a round (`cell_s` a cell, as
    measured) fits in the `left_s` seconds of the budget."""
    have = 1 + max(c.repeat for c in cells)
    if have < full:  # every cell again first: no interval without two rounds
        every = tuple(c.run_id for c in cells if c.repeat == 0)
        if len(every) * cell_s > left_s:
            return Decision(
                (),
                f"a second round of {len(every)} cells takes ~{len(every) * cell_s:.0f} s and "
                f"the budget has {max(left_s, 0):.0f} s left: stopping after {have} round(s)",
            )
        return Decision(every, f"round {have + 1} of every cell ({len(every)})")
    found = comparisons(cells, rows, param, defaults)
    if not found:
        return Decision((), "no size has two cells to compare")
    open_ = [c for c in found if not c.concluded]
    if not open_:
        return Decision((), f"every size concluded in {have} rounds")
    hopeful = [c for c in open_ if c.needs < NEVER]
    if not hopeful:
        sizes = ", ".join(dict.fromkeys(c.size for c in open_))
        return Decision((), f"at {sizes} the cells compared look equal after {have} rounds")
    keep = tuple(dict.fromkeys(x for c in hopeful for x in (c.base, c.other)))
    cost = len(keep) * cell_s
    sizes = ", ".join(dict.fromkeys(c.size for c in hopeful))
    if cost > left_s:
        return Decision(
            (),
            f"{sizes} not yet concluded after {have} rounds; a round of {len(keep)} cells takes "
            f"~{cost:.0f} s and the budget has {max(left_s, 0):.0f} s left: stopping",
        )
    return Decision(keep, f"{sizes} not yet concluded: round {have + 1} of {len(keep)} cells")

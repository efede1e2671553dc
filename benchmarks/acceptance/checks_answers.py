"""The acceptance's checks on what a GPU question answers: whether it concluded, and whether the
predictions made for the card it ran on (by the question, and for the largest sizes' cells as a
question would make them) hold against what that card measured. Each reads a step's folder and
feeds a pure judge (`judge_*`: numbers in, a `Check` out), as checks_rows.py's do."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from stbench.runner.doctor import Check
from stbench.store.files import read_runs
from stbench.store.rows import Run

from .verdicts import (
    NothingToJudge,
    anatomy_of,
    cuda_rows,
    number,
    param,
    rows_ok,
    studies,
    untested,
    verdict,
)


def judge_question(
    sizes: list[str],
    left_out: list[str],
    rounds: dict[str, int],
    concluded: dict[str, bool],
    least: int = 5,
) -> Check:
    """A gpu-vs-cpu study on a GPU: every size asked measured (none left out by the budget), at
    least `least` paired rounds of the GPU against the CPU at each, and the largest size's
    comparisons concluded (apart, or equal within the margin)."""
    missing = [s for s in sizes if s in left_out or s not in rounds]
    few = [f"{s}: {rounds[s]}" for s in sizes if s in rounds and rounds[s] < least]
    largest = sizes[-1] if sizes else None
    problems = []
    if missing:
        problems.append(f"not measured: {', '.join(missing)}")
    if few:
        problems.append(f"fewer than {least} paired rounds at {', '.join(few)}")
    if largest is not None and largest in rounds and not concluded.get(largest):
        problems.append(f"not concluded at the largest size, {largest}")
    said = ", ".join(f"{s}: {n} rounds" for s, n in rounds.items())
    return verdict("question-concluded", not problems, "; ".join(problems) or said, rounds)


def question_concluded(folder: Path) -> Check:
    """The question's study (judge_question): its GPU windows must have ended ok first."""
    from stbench.plan.gpu_vs_cpu import comparisons
    from stbench.plan.spec import RunSpec
    from stbench.store.manifest import read_manifest

    (study,) = studies(folder)
    rows = rows_ok(folder)  # a GPU window that failed names itself here (in a rehearsal: CUDA)
    cuda_rows(rows)
    record = read_manifest(study)
    asked = record["question"]
    cells = [RunSpec.from_dict(c) for c in record["cells"]]
    found = comparisons(cells, rows, asked["size"]["param"], asked["defaults"])
    rounds: dict[str, int] = {}
    concluded: dict[str, bool] = {}
    for c in found:
        rounds[c.size] = min(rounds.get(c.size, c.rounds), c.rounds)
        concluded[c.size] = concluded.get(c.size, True) and c.concluded
    left = [x["size"] for x in asked.get("left_out") or ()]
    return judge_question(asked["size"]["values"], left, rounds, concluded)


def judge_prediction(
    card: str, sizes: dict[str, tuple[float, float, float]], by: Mapping[str, str] | None = None
) -> Check:
    """A GPU question's own predictions for the card it ran on against its measured steps:
    sizes maps a size to (bound ms, estimate ms, measured ms), `by` to the term that sets its
    bound. A bound above its measured step is wrong (a lower bound a measurement beats); the
    figures say how tight each bound is (measured / bound, the goal at most 3) and each
    estimate's error."""
    if not sizes:
        return verdict("prediction-holds", False, f"no size predicted for {card} and measured")
    beaten = [s for s, (bound, _, measured) in sizes.items() if not bound <= measured]
    said = ", ".join(
        f"{s}: {measured / bound:.1f}x, estimate {estimate / measured - 1:+.0%}"
        for s, (bound, estimate, measured) in sizes.items()
    )
    detail = f"{card}, measured step / bound and the estimate's error by size: {said}"
    if beaten:
        detail = f"the bound exceeds the measured step at {', '.join(beaten)} ({detail})"
    figures = {
        s: {"bound_ms": b, "estimate_ms": e, "measured_ms": m, "bound_by": (by or {}).get(s, "")}
        for s, (b, e, m) in sizes.items()
    }
    return verdict("prediction-holds", not beaten, detail, figures)


def prediction_holds(folder: Path) -> Check:
    """The question's predicted.csv for the card its cuda windows ran on (gpus.toml's name of
    the device), against the step those windows measured eagerly at torch's default precision
    (the bound's: its FLOPs at fp32/TF32 peaks, each operator dispatched from Python; a CUDA
    graph replays without that): the batch over the median samples/s at each size."""
    import statistics

    from stbench.plan.predict import read_gpus, table_name
    from stbench.store.files import read_lines
    from stbench.store.rows import PredictedLine

    (study,) = studies(folder)
    measured = [
        r
        for r in cuda_rows(rows_ok(folder))
        if param(r, "precision") == "default" and param(r, "compile") in (None, "none")
    ]
    if not measured:
        raise NothingToJudge("no eager cuda row at torch's default precision")
    card = table_name(str(measured[0]["device_name"]), read_gpus())
    if card is None:
        return untested(
            "prediction-holds", f"stbench's GPU table has no card for {measured[0]['device_name']}"
        )
    predicted = {
        str(p.batch): p for p in read_lines(study / "predicted.csv", PredictedLine) if p.gpu == card
    }
    by_size: dict[str, list[float]] = {}
    for r in measured:
        by_size.setdefault(str(int(number(r, "batch_size"))), []).append(number(r, "samples_per_s"))
    sizes = {
        size: (
            predicted[size].bound_ms,
            predicted[size].estimate_ms,
            int(size) / statistics.median(speeds) * 1e3,
        )
        for size, speeds in by_size.items()
        if size in predicted
    }
    return judge_prediction(card, sizes, {s: predicted[s].bound_by for s in sizes})


@functools.cache
def _cards_here() -> tuple:
    """stbench's cards, the one this machine has marked measured here (on the GPU machine: its
    host's own time, loading and operator cost; elsewhere, a test of committed rows, the
    table's): once a process, the launches check a CUDA start in a child."""
    from stbench.plan.predict import read_gpus
    from stbench.runner.envinfo import inventory
    from stbench.runner.predictions import on_this_host

    return tuple(on_this_host(list(read_gpus().values()), inventory().gpus, "cuda"))


def cells_prediction(folder: Path, may_skip: bool = False) -> Check:
    """The cuda cells of a `stbench run` step with no CPU rows beside them (the workloads'
    largest sizes, which a question's CPU windows cannot pay for in a lease), each predicted on
    this host as `gpu-vs-cpu` predicts a size (runner/predictions.rows_step) for the card it ran
    on, against the step it measured eagerly at torch's default precision (judge_prediction).
    As a question on a GPU machine charges its own card: the anatomy measured on this host's
    CPU, this host's cost of an operator (the doctor's launches check), its host time and its
    loading at 1x (Gpu.measured_here); the loading in the step's own thread from the cell's own
    rows, this host's, where a question takes it from its CPU rows on the same host. Each cell
    is named by its workload, batch and whatever sets it apart from the folder's others."""
    import statistics

    from stbench.plan.predict import predict, read_gpus, table_name
    from stbench.plan.registry import get
    from stbench.runner.predictions import rows_step

    measured = [
        r
        for r in cuda_rows(rows_ok(folder, may_skip=may_skip))
        if param(r, "precision") == "default" and param(r, "compile") in (None, "none")
    ]
    if not measured:
        raise NothingToJudge("no eager cuda row at torch's default precision")
    cards = read_gpus()
    name = str(measured[0]["device_name"])
    card = table_name(name, cards)
    if card is None:
        return untested("prediction-holds", f"stbench's GPU table has no card for {name}")
    (gpu,) = [c for c in _cards_here() if c.name == card]
    cells: dict[tuple[str, str, int], list[Run]] = {}
    for r in measured:
        config = json.dumps(dict(r.params), sort_keys=True, default=str)
        cells.setdefault((r["workload"], config, int(number(r, "batch_size"))), []).append(r)
    configs = [dict(here[0].params) for here in cells.values()]
    apart = sorted(k for k in set().union(*configs) if len({str(c.get(k)) for c in configs}) > 1)
    sizes, by = {}, {}
    for (workload, _, batch), here in cells.items():
        found, params = anatomy_of(here[0]), dict(here[0].params)
        label = " ".join([workload, f"{batch:,}", *(f"{k}={params.get(k)}" for k in apart)])
        serial = here if found.data_on_host and not params.get("workers") else []
        p = predict(rows_step(label, here, serial, found, get(workload), params), gpu)
        speed = statistics.median(number(r, "samples_per_s") for r in here)
        sizes[label] = (p.bound_s * 1e3, p.estimate_s * 1e3, batch / speed * 1e3)
        by[label] = p.bound_by
    found = judge_prediction(card, sizes, by)
    skipped = [
        f"batch {r['batch_size']}: {r['reason']}"
        for study in studies(folder)
        for r in read_runs(study)
        if r["status"] == "skipped"
    ]
    if not skipped:
        return found
    return replace(found, detail=f"{found.detail}; not run here: {'; '.join(skipped)}")

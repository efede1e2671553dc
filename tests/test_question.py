"""`stbench gpu-vs-cpu` (issue 37): the question planned (sizes, the CPU's quick levers, the
GPU's), the decision to run another round, and the answer read from hand-made rows of a CPU at
its defaults, a tuned CPU and a GPU over three sizes: each ratio with its paired interval, the
size from which the GPU pays, and the picture of it."""

import json
import math
import statistics

import pytest

from stbench.errors import StbenchError
from stbench.plan import question
from stbench.plan.planner import plan_question
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec, identify
from stbench.report.labels import format_number
from stbench.report.model import study
from stbench.report.question import crossover, figure, points, words
from stbench.report.read import asked
from stbench.report.view import finding_of
from stbench.runner.envinfo import collect
from stbench.stats import paired
from stbench.store.rows import run_of

UNIT = "series"
SIZES = {"s2": 2.0, "s121": 121.0, "s1089": 1089.0}
QUESTION = {
    "kind": "gpu-vs-cpu",
    "size": {"param": "grid", "unit": UNIT, "values": list(SIZES), "counts": list(SIZES.values())},
    "defaults": {"threads": 0, "workers": 2},
    "window_s": 2.0,
    "budget_s": 300.0,
    "gpu": "cuda",
}
# samples/s by size and configuration over three rounds: the GPU loses at 2 series, wins at 121
# and 1,089; the tuned CPU (1 thread, no workers) beats the defaults at every size
SPEED = {
    "s2": {"default": (900, 1000, 950), "tuned": (2000, 2100, 1900), "gpu": (1000, 1100, 950)},
    "s121": {"default": (500, 520, 480), "tuned": (800, 840, 760), "gpu": (4000, 4300, 3900)},
    "s1089": {"default": (90, 95, 85), "tuned": (100, 104, 97), "gpu": (3000, 3100, 2950)},
}
CONFIG = {
    "default": ("cpu", {"threads": 0, "workers": 2}),
    "tuned": ("cpu", {"threads": 1, "workers": 0}),
    "gpu": ("cuda", {"threads": 0, "workers": 2, "precision": "bf16"}),
}


def _row(size: str, config: str, repeat: int, sps: float) -> dict:
    device, params = CONFIG[config]
    params = {"grid": size, "precision": "default", **params}
    return {
        "schema": "3",
        "run_id": f"{size}-{config}-{repeat}",
        "workload": "lstm-era5",
        "device": device,
        "device_name": "NVIDIA H100 80GB HBM3" if device == "cuda" else "cpu",
        "cores": 16,
        "strategy": "single",
        "world_size": 1,
        "nodes": 1,
        "nproc_per_node": 1,
        "batch_size": 128,
        "global_batch_size": 128,
        "epochs": 1,
        "repeat": repeat,
        "params": json.dumps(params),
        "status": "ok",
        "host": "h",
        "wall_s": 2.0,
        "train_s": 2.0,
        "samples_per_s": sps,
        "steps_done": round(sps * 2 / 128),
        "gpu_energy_j": 600.0 if device == "cuda" else None,
        "cpu_energy_j": 300.0,
        "threads": params["threads"] or 16,
    }


def _study(speed=SPEED):
    rows = [
        _row(size, config, r, v)
        for size, configs in speed.items()
        for config, values in configs.items()
        for r, v in enumerate(values)
    ]
    return study([asked(run_of(r, "f"), QUESTION) for r in rows]).runs


def _paired(size: str, base: str, other: str) -> tuple:
    a, b = (dict(enumerate(SPEED[size][c])) for c in (base, other))
    return paired(a, b, False)


def test_the_answer_states_each_sizes_ratio_with_its_interval_and_where_the_gpu_starts_to_pay():
    s = _study()
    found = points(s)
    assert [p.size for p in found] == ["s2", "s121", "s1089"]
    for p in found:
        r, lo, hi, n = _paired(p.size, "tuned", "gpu")
        assert (p.vs_tuned.value, p.vs_tuned.low, p.vs_tuned.high, n) == pytest.approx(
            (r, lo, hi, 3)
        )
        r, lo, hi, _ = _paired(p.size, "default", "gpu")
        assert (p.vs_default.value, p.vs_default.low) == pytest.approx((r, lo))
    assert not found[0].vs_tuned.pays and found[1].vs_tuned.pays and found[2].vs_tuned.pays
    assert crossover(found).size == "s121"
    text = words(s)
    r2, lo2, hi2, _ = _paired("s2", "tuned", "gpu")
    r121, lo121, hi121, _ = _paired("s121", "tuned", "gpu")
    assert text.startswith(
        f"The H100 80GB HBM3 trains {r2:.2f}x ({lo2:.2f}-{hi2:.2f}x) the samples/s of the "
        f"tuned 16-core CPU at 2 series, {r121:.2f}x ({lo121:.2f}-{hi121:.2f}x) at 121 series"
    )
    assert "; it starts to pay at 121 series." in text
    r, lo, hi, _ = _paired("s1089", "default", "gpu")
    assert "Against the 16-core CPU at its defaults: " in text
    assert f"{r:.2f}x ({lo:.2f}-{hi:.2f}x) at 1,089 series." in text
    # energy per million samples at 1,089 series, GPU vs tuned CPU: a run's joules over its samples
    gpu = statistics.median(900 / (round(v * 2 / 128) * 128) * 1e6 for v in SPEED["s1089"]["gpu"])
    cpu = statistics.median(300 / (round(v * 2 / 128) * 128) * 1e6 for v in SPEED["s1089"]["tuned"])
    assert f"{format_number(gpu)} vs {format_number(cpu)} J at 1,089 series" in text


def test_the_finding_of_a_question_study_is_its_answer():
    f = finding_of(_study())
    assert f.kind == "gpu-vs-cpu" and "starts to pay at 121 series" in f.text
    assert list(f.table["series"]) == ["2", "121", "1,089"]
    assert set(f.table["GPU ran"]) == {"precision=bf16"}
    assert set(f.table["CPU tuned"]) == {"threads=1, workers=0"}


def test_a_gpu_that_wins_everywhere_or_nowhere_says_so():
    everywhere = {k: {**v, "gpu": tuple(x * 10 for x in v["tuned"])} for k, v in SPEED.items()}
    assert "it pays at every size, from 2 series" in words(_study(everywhere))
    nowhere = {k: {**v, "gpu": tuple(x / 2 for x in v["tuned"])} for k, v in SPEED.items()}
    assert "it does not pay significantly at any size up to 1,089 series" in words(_study(nowhere))


def test_without_a_gpu_the_cpus_fastest_configuration_stands_in_against_its_defaults():
    cpu_only = {k: {c: v[c] for c in ("default", "tuned")} for k, v in SPEED.items()}
    s = _study(cpu_only)
    text = words(s)
    r, lo, hi, _ = _paired("s2", "default", "tuned")
    assert text.startswith(
        "The 16-core CPU's best configuration besides its defaults trains "
        f"{r:.2f}x ({lo:.2f}-{hi:.2f}x) the "
        "samples/s of the 16-core CPU at its defaults at 2 series"
    )
    assert "No GPU ran" in text


def test_the_picture_draws_both_ratios_with_bands_and_marks_the_crossover():
    s = _study()
    drawn = figure(s, "lstm-era5")
    assert drawn.png.startswith(b"\x89PNG") and len(drawn.png) > 10_000
    assert "where it starts to pay (121 series)" in drawn.caption
    import io

    from matplotlib import image

    pixels = image.imread(io.BytesIO(drawn.png))
    assert pixels.shape[0] > 300 and pixels.shape[1] > 500


def test_sizes_candidates_and_levers_are_planned_from_the_workload():
    w = get("lstm-era5")
    assert question.axis_values(w, question.Question("lstm-era5", smoke=True)) == w.size.smoke
    with pytest.raises(StbenchError, match="--sizes"):
        question.axis_values(get("dcrnn-pems"), question.Question("dcrnn-pems", sizes=("5k",)))
    with pytest.raises(StbenchError, match="positive integer"):
        question.axis_values(get("cnn-strain"), question.Question("cnn-strain", sizes=("abc",)))
    assert question.cpu_candidates({"threads": 0, "workers": 2}, 16) == [
        {"threads": 1},
        {"threads": 8},
        {"workers": 0},
    ]
    assert question.cpu_candidates({"threads": 1, "workers": 0}, 2) == [{"threads": 0}]
    assert question.gpu_levers(False) == [{"precision": "default"}, {"precision": "bf16"}]


def test_the_question_plans_a_round_of_every_configuration_at_every_size(tmp_path):
    q = question.Question("cnn-strain", ("64", "256"), gpu="", smoke=True, out=tmp_path)
    plan = plan_question(q, collect(), physical=2)
    first = [c for c in plan.cells if c.repeat == 0]
    assert len(plan.cells) == len(first) == 4 and {c.batch_size for c in first} == {64, 256}
    assert {c.param_dict["threads"] for c in first} == {0, 1}  # the smoke's 1 and the machine's
    assert all(c.param_dict["time_budget"] == q.window_s for c in plan.cells)
    record = plan.manifest["question"]
    assert record["size"] == {
        "param": "batch_size",
        "unit": "curves a batch",
        "values": ["64", "256"],
        "counts": [64.0, 256.0],
    }
    assert record["defaults"] == {"threads": 1, "workers": 0}


def _cells_and_rows(values: dict) -> tuple[list[RunSpec], list[dict]]:
    cells, rows = [], []
    for (size, threads), by_round in values.items():
        for r, v in enumerate(by_round):
            c = identify(
                RunSpec("w", "cpu", "single", size, 1, repeat=r, params=(("threads", threads),))
            )
            cells.append(c)
            if v is not None:
                rows.append({"run_id": c.run_id, "repeat": r, "status": "ok", "samples_per_s": v})
    return cells, rows


def test_another_round_runs_only_the_cells_of_a_size_that_has_not_concluded():
    cells, rows = _cells_and_rows(
        {
            (64, 0): (100, 101, 99),
            (64, 1): (200, 203, 198),  # concluded: 2x
            (256, 0): (100, 90, 110),
            (256, 1): (120, 95, 118),  # open: the interval holds 1
        }
    )
    d = question.decide(cells, rows, "batch_size", {"threads": 0}, left_s=100, cell_s=2)
    first = {c.run_id: c for c in cells if c.repeat == 0}
    assert {(first[x].batch_size, first[x].param_dict["threads"]) for x in d.cells} == {
        (256, 0),
        (256, 1),
    }
    assert "256 not yet concluded: round 4 of 2 cells" == d.why
    broke = question.decide(cells, rows, "batch_size", {"threads": 0}, left_s=3, cell_s=2)
    assert broke.cells == () and "stopping" in broke.why


def test_a_second_round_of_every_cell_runs_first_where_the_budget_can_pay_for_it():
    cells, rows = _cells_and_rows({(64, 0): (100,), (64, 1): (200,), (256, 0): (90,)})
    d = question.decide(cells, rows, "batch_size", {"threads": 0}, left_s=10, cell_s=2)
    assert len(d.cells) == 3 and d.why == "round 2 of every cell (3)"
    short = question.decide(cells, rows, "batch_size", {"threads": 0}, left_s=5, cell_s=2)
    assert short.cells == () and short.why.endswith("stopping after 1 round(s)")


def test_no_round_is_added_once_every_size_concluded_or_looks_equal():
    done, rows = _cells_and_rows({(64, 0): (100, 101, 99), (64, 1): (200, 203, 198)})
    assert question.decide(done, rows, "batch_size", {"threads": 0}, 100, 2).why == (
        "every size concluded in 3 rounds"
    )
    equal, rows = _cells_and_rows({(64, 0): (100, 110, 90), (64, 1): (110, 90, 100)})
    d = question.decide(equal, rows, "batch_size", {"threads": 0}, 100, 2)
    assert d.cells == () and "look equal" in d.why and math.isfinite(len(d.why))


def test_a_size_where_a_side_has_no_steady_step_is_named_as_unanswered():
    missing = {**SPEED, "s1089": {k: v for k, v in SPEED["s1089"].items() if k != "gpu"}}
    text = words(_study(missing))
    assert "at 1,089 series" not in text.split(" No answer")[0]
    assert text.endswith(
        "No answer at 1,089 series: a side had no steady step in its window (--window)."
    )


def test_a_gpu_that_wins_at_a_small_size_but_not_the_largest_has_no_crossover_and_says_so():
    mixed = {**SPEED, "s1089": {**SPEED["s1089"], "gpu": (100, 99, 103)}}
    text = words(_study(mixed))
    assert "it pays significantly at 121 series but not at 1,089 series" in text


def test_a_side_wins_from_the_first_size_of_its_last_unbroken_run_of_wins():
    """The one rule both the device finding and gpu-vs-cpu's answer state (comparison)."""
    from stbench.comparison import wins_from

    assert wins_from([False, True, True]) == 1
    assert wins_from([True, False, True]) == 2  # a win at a small size does not count
    assert wins_from([True, True]) == 0
    assert wins_from([True, True, False]) is None and wins_from([]) is None

"""`stbench gpu-vs-cpu`: the question planned (sizes, the CPU's quick levers, the
GPU's), the decision to run another round, and the answer read from hand-made rows of a CPU at
its defaults, a tuned CPU and a GPU over three sizes: each ratio with its paired interval, the
size from which the GPU pays, and the picture of it."""

import json
import statistics
import time
from dataclasses import replace

import pytest

from stbench.errors import StbenchError
from stbench.plan import gpu_vs_cpu, pairs
from stbench.plan.planner import plan_question
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec, identify
from stbench.report.gpu_vs_cpu import crossover, points, view, words
from stbench.report.gpu_vs_cpu_picture import figure
from stbench.report.labels import format_number
from stbench.report.model import study, with_context
from stbench.report.read import Context
from stbench.report.view import finding_of
from stbench.runner.engine import Segment
from stbench.runner.envinfo import collect
from stbench.stats import paired
from stbench.store.manifest import LEVER_KIND
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


def _question_study(speed=SPEED):
    rows = [
        _row(size, config, r, v)
        for size, configs in speed.items()
        for config, values in configs.items()
        for r, v in enumerate(values)
    ]
    return study([run_of(r, "f") for r in rows], context=Context(question=QUESTION))


def _study(speed=SPEED):
    return asked(_question_study(speed))


def asked(found):
    """A question study's table as its answer reads it: the question beside each row."""
    return with_context(found, question=True)


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


def test_an_interval_apart_from_1x_never_reads_as_touching_it():
    """Two decimals, more where a bound would round to 1.00 without being 1: "1.00-1.19x" on a
    size the answer calls faster read as not apart from 1x."""
    from stbench.comparison import interval_text

    assert interval_text(0.93, 0.99) == "0.93-0.99x"
    assert interval_text(1.0003, 1.19) == "1.0003-1.19x"
    assert interval_text(0.9964, 1.07) == "0.996-1.07x"
    assert interval_text(1.0, 1.2) == "1.00-1.20x"


def test_the_finding_of_a_question_study_is_its_answer():
    f = finding_of(_question_study())
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
    assert gpu_vs_cpu.axis_values(w, gpu_vs_cpu.Question("lstm-era5", smoke=True)) == w.size.smoke
    with pytest.raises(StbenchError, match="--sizes"):
        gpu_vs_cpu.axis_values(get("dcrnn-pems"), gpu_vs_cpu.Question("dcrnn-pems", sizes=("5k",)))
    with pytest.raises(StbenchError, match="positive integer"):
        gpu_vs_cpu.axis_values(get("cnn-strain"), gpu_vs_cpu.Question("cnn-strain", sizes=("abc",)))
    # each size once (75 75 was one size, silently), small to large whatever the order typed
    with pytest.raises(StbenchError, match="--sizes: 75 is named twice"):
        gpu_vs_cpu.axis_values(
            get("cnn-strain"), gpu_vs_cpu.Question("cnn-strain", sizes=("75", "75"))
        )
    cnn = gpu_vs_cpu.Question("cnn-strain", sizes=("600", "75", "4096"))
    assert gpu_vs_cpu.axis_values(get("cnn-strain"), cnn) == (75, 600, 4096)
    assert gpu_vs_cpu.cpu_candidates({"threads": 0, "workers": 2}, 16) == [
        {"threads": 1},
        {"threads": 8},
        {"workers": 0},
    ]
    assert gpu_vs_cpu.cpu_candidates({"threads": 1, "workers": 0}, 2) == [{"threads": 0}]
    assert gpu_vs_cpu.gpu_levers(False) == [
        {"precision": "default"},
        {"precision": "tf32"},
        {"precision": "bf16"},
    ]


def test_the_question_plans_each_sizes_configurations_once_and_its_window_from_the_budget(
    tmp_path,
):
    q = gpu_vs_cpu.Question("cnn-strain", ("64", "256"), 30, gpu="", smoke=True, out=tmp_path)
    plan = plan_question(q, collect(), physical=2)
    assert all(c.repeat == 0 for c in plan.cells)  # the rounds are the engine's, added as they run
    assert len(plan.cells) == 4 and {c.batch_size for c in plan.cells} == {64, 256}
    assert {c.param_dict["threads"] for c in plan.cells} == {0, 1}  # the smoke's 1, the machine's
    assert all(
        "time_budget" not in c.param_dict or not c.param_dict["time_budget"] for c in plan.cells
    )
    record = plan.manifest["question"]
    assert record["size"] == {
        "param": "batch_size",
        "unit": "curves a batch",
        "values": ["64", "256"],
        "counts": [64.0, 256.0],
    }
    assert record["defaults"] == {
        "threads": 1,
        "workers": 0,
        "precision": "default",
        "compile": "none",
    }
    assert record["window_s"] == pairs.auto_window(30, 2, 2) and record["margin"] == pairs.MARGIN
    assert plan.manifest["matrix"]["seed_per_repeat"] is False  # one process, one seed


def test_a_cpu_with_bf16_units_tries_bf16_autocast_among_its_levers(tmp_path):
    q = gpu_vs_cpu.Question("cnn-strain", ("64",), gpu="", smoke=True, out=tmp_path)
    plan = plan_question(q, collect(), physical=2, bf16=True)
    assert {c.param_dict["precision"] for c in plan.cells} == {"default", "bf16"}


def test_a_budget_that_cannot_measure_every_size_twice_is_refused_before_anything_is_written(
    tmp_path,
):
    q = gpu_vs_cpu.Question("cnn-strain", ("64", "256"), 2, gpu="", smoke=True, out=tmp_path)
    with pytest.raises(StbenchError, match=r"--budget 2: too small .* give at least --budget \d+"):
        plan_question(q, collect(), physical=2)
    assert list(tmp_path.iterdir()) == []


def _cells_and_rows(values: dict) -> tuple[list[RunSpec], list[dict]]:
    cells, rows = [], []
    for (size, device, threads), by_round in values.items():
        for r, v in enumerate(by_round):
            c = identify(
                RunSpec("w", device, "single", size, 1, repeat=r, params=(("threads", threads),))
            )
            cells.append(c)
            if v is not None:
                rows.append({"run_id": c.run_id, "repeat": r, "status": "ok", "samples_per_s": v})
    return cells, rows


def _noisy(level: float, rounds: int, seed: int, noise: float = 0.03) -> tuple:
    import random

    rng = random.Random(seed)
    return tuple(level * (1 + rng.gauss(0, noise)) for _ in range(rounds))


def _cost(size: str) -> pairs.Cost:
    return pairs.Cost(size, float(size), {"a": 1.0, "b": 1.0}, {"a": 0.1, "b": 0.1}, 2.0)


# synthetic windows: the GPU 0.5x, 1.3x and 4x the CPU at three sizes, 3% noise, six rounds
SYNTHETIC = {
    (64, "cpu", 0): _noisy(1000, 6, 1),
    (64, "cuda", 0): _noisy(500, 6, 2),
    (256, "cpu", 0): _noisy(1000, 6, 3),
    (256, "cuda", 0): _noisy(1300, 6, 4),
    (1024, "cpu", 0): _noisy(1000, 6, 5),
    (1024, "cuda", 0): _noisy(4000, 6, 6),
}


def test_the_engine_asks_no_round_of_a_size_once_its_pairs_have_concluded():
    cells, rows = _cells_and_rows(SYNTHETIC)
    found = gpu_vs_cpu.comparisons(cells, rows, "batch_size", {"threads": 0})
    assert [(c.size, c.differs) for c in found] == [("64", True), ("256", True), ("1024", True)]
    d = pairs.decide(found, {c.size: _cost(c.size) for c in found}, left_s=1000)
    assert d.runs == ()
    # the same sizes after two rounds: 256 (1.3x at 3% noise) may still be open; 64 and 1024 not
    two = {k: v[:2] for k, v in SYNTHETIC.items()}
    cells, rows = _cells_and_rows(two)
    found = gpu_vs_cpu.comparisons(cells, rows, "batch_size", {"threads": 0})
    d = pairs.decide(found, {c.size: _cost(c.size) for c in found}, left_s=1000)
    asked = {m.size for m in d.runs}
    assert asked == {c.size for c in found if not c.concluded}
    assert not asked & {c.size for c in found if c.concluded}


def test_a_larger_size_leaves_the_open_pairs_of_the_smaller_what_could_conclude_them():
    """Three rounds of a side 1.05x the other at 3% noise leave its pair open, ~5 rounds from
    concluding, beside a 3x pair concluded: what those rounds cost is owed them before a larger
    size's first rounds, as far as it fits what is left; a concluded pair, or one no count of
    rounds would conclude, is owed nothing."""
    windows = {
        (64, "cpu", 0): _noisy(1000, 3, 20),
        (64, "cuda", 0): _noisy(1040, 3, 21),
        (256, "cpu", 0): _noisy(1000, 3, 22),
        (256, "cuda", 0): _noisy(3000, 3, 23),
    }
    found = gpu_vs_cpu.comparisons(*_cells_and_rows(windows), "batch_size", {"threads": 0})
    open_, closed = found
    assert not open_.concluded and 1 < open_.more < pairs.CAP and closed.concluded
    costs = {c.size: _cost(c.size) for c in found}
    owed = costs["64"].process_s(open_.more, (open_.base, open_.other))
    assert pairs.owed_s(found, costs, 1000.0) == pytest.approx(owed)
    assert pairs.owed_s(found, costs, owed - 0.01) == 0.0  # what does not fit is not owed
    # rounds already coming at its size (its later first rounds) are not owed again
    fewer = costs["64"].process_s(open_.more - 2, (open_.base, open_.other))
    assert pairs.owed_s(found, costs, 1000.0, {"64": 2}) == pytest.approx(fewer)
    assert pairs.owed_s(found, costs, 1000.0, {"64": open_.more}) == 0.0
    hopeless = replace(open_, to_differ=pairs.CAP, to_equal=pairs.CAP)
    assert pairs.owed_s([hopeless, closed], costs, 1000.0) == 0.0


def test_a_larger_sizes_first_rounds_wait_for_what_the_smallers_open_pair_needs(
    tmp_path, monkeypatch
):
    """The engine's side of the rule above: a larger size whose first rounds fit what is left,
    but not beside what the smaller size's open pair needs to conclude, is not started; named,
    it needs the budget for both."""
    from stbench.runner.engine import Engine

    q = gpu_vs_cpu.Question("cnn-strain", ("32", "64"), 600, gpu="", smoke=True, out=tmp_path)
    plan = plan_question(q, collect(), physical=2)
    plan.folder.mkdir(parents=True)
    at32 = [c.run_id for c in plan.cells if c.batch_size == 32 and c.repeat == 0]
    at64 = [c.run_id for c in plan.cells if c.batch_size == 64 and c.repeat == 0]
    said: list[str] = []

    def engine(left_s: float) -> Engine:
        made = Engine(plan, collect(), time.time() + left_s, said.append, lambda s, r: None)
        made.costs["32"] = pairs.Cost("32", 32.0, dict.fromkeys(at32, 1.0),
                                      dict.fromkeys(at32, 0.01), 2.0)  # fmt: skip
        return made

    # the least of its first rounds a process can run: one each
    first_rounds = pairs.PROCESSES * engine(60)._predicted("64", at64).process_s(1)
    open_ = pairs.Comparison("32", at32[0], at32[1], 1.03, 0.97, 1.09, 6, to_differ=11)
    owed = engine(60).costs["32"].process_s(open_.more, at32[:2])
    assert owed > 2
    left = first_rounds + owed / 2  # the larger size's first rounds fit, but not beside it
    assert isinstance(engine(left)._first_half("64", None), Segment)  # nothing open: it runs
    monkeypatch.setattr(gpu_vs_cpu, "judged", lambda record, cells, rows: [open_])
    assert engine(left)._first_half("64", None) is False
    assert engine(first_rounds + owed + 5)._first_half("64", None)  # both fit: it runs
    late = engine(left)
    late._leave_out(["64"])
    (named,) = late.left_out
    spent = plan.manifest["question"]["budget_s"] - left
    assert named["needs_s"] >= spent + owed + first_rounds - 1


def test_the_crossover_sentence_of_synthetic_windows_names_the_size_the_gpu_starts_to_pay():
    speed = {
        f"s{size}": {
            "default": SYNTHETIC[(size, "cpu", 0)],
            "tuned": SYNTHETIC[(size, "cpu", 0)],
            "gpu": SYNTHETIC[(size, "cuda", 0)],
        }
        for size in (64, 256, 1024)
    }
    record = {
        **QUESTION,
        "size": {**QUESTION["size"], "values": list(speed), "counts": [64.0, 256.0, 1024.0]},
    }
    rows = [
        run_of(_row(size, config, r, v), "f")
        for size, configs in speed.items()
        for config, values in configs.items()
        for r, v in enumerate(values)
    ]
    text = words(asked(study(rows, context=Context(question=record))))
    assert "it starts to pay at 256 series" in text
    assert "0.50x (0.48-0.53x)" in text and "1.31x (1.27-1.34x)" in text


def test_a_pair_is_equal_only_when_its_interval_lies_inside_the_margin():
    tight = {(64, "cpu", 0): _noisy(1000, 6, 7, 0.005), (64, "cpu", 1): _noisy(1002, 6, 8, 0.005)}
    cells, rows = _cells_and_rows(tight)
    (c,) = gpu_vs_cpu.comparisons(cells, rows, "batch_size", {"threads": 0})
    # within the margin (it may also be significantly apart by a fraction of a percent): concluded
    assert c.equal and c.concluded
    assert pairs.MARGIN == 0.05 and c.low >= 0.95 and c.high <= 1.05
    # the same ratio at 20% noise: the interval leaves the margin, so the pair stays open and the
    # engine says how many rounds could conclude it
    loose = {(64, "cpu", 0): _noisy(1000, 3, 7, 0.2), (64, "cpu", 1): _noisy(1002, 3, 8, 0.2)}
    cells, rows = _cells_and_rows(loose)
    (c,) = gpu_vs_cpu.comparisons(cells, rows, "batch_size", {"threads": 0})
    assert not c.equal and not c.concluded
    d = pairs.decide([c], {"64": _cost("64")}, left_s=1.0)
    assert d.runs == () and "more round(s) could conclude it" in d.why[0]
    assert "s of the budget left" in d.why[0]


def test_a_configurations_build_is_a_process_cost_not_each_rounds():
    """A compiled configuration's first window ran 20 s untimed (its compilation); later ones
    re-warm a step. A round costs its windows and their switches, not the build again."""
    built = pairs.Window("c", 1.0, 20.0, 0.1)  # wall, untimed (the build), step
    later = [pairs.Window("c", 1.0, 0.1, 0.1) for _ in range(2)]
    assert pairs.cost_of_windows("75", 75.0, [built], 5.0).window_s["c"] == pytest.approx(2.0)
    cost = pairs.cost_of_windows("75", 75.0, [built, *later], 5.0)
    assert cost.window_s["c"] == pytest.approx(1.1)


def test_a_compiled_configurations_build_is_paid_in_every_process_that_measures_it():
    """A compilation is paid once a process, not each round; but in every process, at every
    size (its shapes change): a process of a compiled configuration costs its build besides its
    start and rounds, and a larger size is predicted with the same build."""
    built = pairs.Window("c", 1.0, 20.0, 0.1)
    later = [pairs.Window(k, 1.0, 0.1, 0.1) for k in ("c", "c", "e")]
    cost = pairs.cost_of_windows("75", 75.0, [built, *later], 5.0, compiled={"c"})
    assert cost.build_s == {"c": 20.0} and cost.window_s["c"] == pytest.approx(1.1)
    assert cost.process_s(2) == pytest.approx(5.0 + 20.0 + 2 * (1.1 + 1.1))
    assert cost.process_s(2, ["e"]) == pytest.approx(5.0 + 2 * 1.1)  # without it: no build
    bigger = pairs.predicted(cost, "750", 750.0, 0.3, {"x": "c", "y": "e"})
    assert bigger.build_s == {"x": 20.0}


def test_compile_joins_the_cpus_levers_only_where_the_budget_pays_its_compilations(tmp_path):
    """Two processes measure each size, and each compiles: the budget pays
    2 x sizes x COMPILE_S beside what measures every size twice, or compile stays out."""
    env = collect()
    sizes = ("64", "256")
    small = gpu_vs_cpu.Question("cnn-strain", sizes, 60, gpu="", smoke=True, out=tmp_path)
    plan = plan_question(small, env, physical=2)
    assert {c.param_dict["compile"] for c in plan.cells} == {"none"}
    big = gpu_vs_cpu.Question("cnn-strain", sizes, 600, gpu="", smoke=True, out=tmp_path)
    plan = plan_question(big, env, physical=2)
    compiled = [c for c in plan.cells if c.param_dict["compile"] == "default"]
    assert sorted(c.batch_size for c in compiled) == [64, 256]
    # the compiled configuration is the defaults' but for compile: never read as the defaults
    defaults = plan.manifest["question"]["defaults"]
    assert defaults["compile"] == "none"
    assert all(c.param_dict[k] == defaults[k] for c in compiled for k in gpu_vs_cpu.CPU_LEVERS)
    window = plan.manifest["question"]["window_s"]
    assert gpu_vs_cpu.pays_compile(big, 2, 2, window)
    assert not gpu_vs_cpu.pays_compile(small, 2, 2, window)


def test_cuda_graphs_join_the_gpus_levers_where_the_budget_pays_them_beside_the_cpus_compile(
    tmp_path,
):
    """The CPU compiled first (the side every GPU ratio divides by), then the GPU's CUDA graphs
    where the budget pays both compilations in every process of every size; `--cuda-graphs`
    asks for them whatever the budget; a machine without a GPU has none."""
    from stbench.plan.planner import check_question

    def compiled(budget, gpu="cuda", graphs=False):
        q = gpu_vs_cpu.Question("cnn-strain", ("64", "256"), budget, gpu=gpu, cuda_graphs=graphs,
                                smoke=True, out=tmp_path)  # fmt: skip
        checked = check_question(q, physical=2)
        found = [(c.device, dict(c.sets)) for c in checked.configs if "compile" in c.sets]
        others = len(checked.configs) - len(found)
        return found, q, others, checked.window_s

    graphs = ("cuda", {"precision": "tf32", "compile": "reduce-overhead"})
    cpu = ("cpu", {"compile": "default"})
    assert compiled(60)[0] == []
    found, q, others, window = compiled(200)
    assert found == [cpu] and not gpu_vs_cpu.pays_compile(q, 2, others, window, 2)
    found, q, others, window = compiled(400)
    assert found == [cpu, graphs] and gpu_vs_cpu.pays_compile(q, 2, others, window, 2)
    assert compiled(60, graphs=True)[0] == [graphs]
    assert compiled(900, gpu="")[0] == [cpu]


def test_a_compilation_the_budget_cannot_pay_leaves_the_larger_sizes_measured_without_it(
    tmp_path,
):
    """Where a size's first rounds fit what is left of the budget only without the compiled
    configuration (its build measured at the size before), it leaves that size and every larger
    one, said at once and kept for the answer; the size is measured, not left out."""
    from stbench.report.read import engine_note
    from stbench.runner.engine import Engine

    q = gpu_vs_cpu.Question("cnn-strain", ("32", "64", "128"), 600, gpu="", smoke=True,
                            out=tmp_path)  # fmt: skip
    plan = plan_question(q, collect(), physical=2)
    plan.folder.mkdir(parents=True)
    said: list[str] = []
    engine = Engine(plan, collect(), time.time() + 60, said.append, lambda spec, row: None)
    at32 = [c.run_id for c in plan.cells if c.batch_size == 32 and c.repeat == 0]
    compiled = next(c for c in at32 if "('compile', 'default')" in engine.config_key(c))
    windows = {c: 1.0 for c in at32}
    # its compilation took 50 s: two processes of it cost 100 s and more; without it ~10 s each
    engine.costs["32"] = pairs.Cost("32", 32.0, windows, {c: 0.01 for c in at32}, 2.0,
                                    build_s={compiled: 50.0})  # fmt: skip
    engine._leave_compile(["64", "128"], None)
    left = {(c.batch_size, c.param_dict["compile"]) for c in engine.plan.cells}
    assert left == {(32, "none"), (32, "default"), (64, "none"), (128, "none")}
    assert said and "cpu compile=default not measured from 64 curves a batch on" in said[0]
    assert "a compilation takes ~50 s in each of its processes" in said[0]
    manifest = json.loads((plan.folder / "manifest.json").read_text())
    assert manifest["question"]["unpaid"] == [
        {"sets": "compile=default", "from": "64", "build_s": 50.0}
    ]
    note = engine_note(manifest["question"])
    assert "cpu compile=default was not measured from 64 curves a batch on: a compilation " in note
    assert "took ~50 s in each process that measured it" in note
    # with the budget to pay it, it stays
    again = Engine(plan, collect(), time.time() + 600, said.append, lambda spec, row: None)
    again.costs = dict(engine.costs)
    again._leave_compile(["64", "128"], None)
    assert any(c.param_dict["compile"] == "default" for c in again.plan.cells if c.batch_size == 64)


def test_a_later_size_is_predicted_from_the_largest_measured_one_and_grows_with_its_count():
    known = pairs.Cost("64", 64.0, {"a": 0.5}, {"a": 0.01}, 2.0)
    big = pairs.predicted(known, "6400", 6400.0, 0.3, {"x": "a"})
    assert big.step_s["x"] == pytest.approx(1.0)
    # its floor in steps and the step that crosses it; one configuration never switches
    assert big.window_s["x"] == pytest.approx(pairs.MIN_STEPS * 1.0 + 1.0 + pairs.SWITCH_S)
    # three switch twice a round: each window of short steps re-warms 2/3 of a step on average,
    # one of long steps none (pairs.rewarm_steps)
    three = {"x": "a", "y": "a", "z": "a"}
    short = pairs.predicted(known, "320", 320.0, 0.3, three)
    assert short.window_s["y"] == pytest.approx(0.3 + (1 + 2 / 3) * 0.05 + pairs.SWITCH_S)
    long = pairs.predicted(known, "6400", 6400.0, 0.3, three)
    assert long.window_s["y"] == pytest.approx(pairs.MIN_STEPS + 1.0 + pairs.SWITCH_S)
    assert big.startup_s == pytest.approx(4.0) and not big.measured
    # a step that grew faster than the count between the two largest sizes measured grows so on
    steep = pairs.step_growth([(0.01, 0.04), (0.02, 0.05)], 2.0)  # 4x and 2.5x for 2x the count
    assert steep == pytest.approx(2.0)
    assert pairs.predicted(known, "128", 128.0, 0.3, {"x": "a"}, steep).step_s[
        "x"
    ] == pytest.approx(0.04)
    # never slower than the count: a launch-bound step that barely grew is still taken linearly
    assert pairs.step_growth([(0.01, 0.011)], 10.0) == 1.0 and pairs.step_growth([], 2.0) == 1.0
    order = [pairs.rotated(["a", "b", "c"], r) for r in range(4)]
    assert order[:2] == [["a", "b", "c"], ["c", "a", "b"]] and order[3] == order[0]
    # every configuration once in each place, and a round starts where the one before ended
    assert all(sorted(o[i] for o in order[:3]) == ["a", "b", "c"] for i in range(3))
    assert all(order[r][0] == order[r - 1][-1] for r in range(1, 4))


def test_a_size_where_a_side_has_no_steady_step_is_named_as_unanswered():
    missing = {**SPEED, "s1089": {k: v for k, v in SPEED["s1089"].items() if k != "gpu"}}
    text = words(_study(missing))
    assert "at 1,089 series" not in text.split(" No answer")[0]
    assert text.endswith(
        "No answer at 1,089 series: a side had no steady step in its window (--window)."
    )
    # every lever had left the largest size (outgrown): the defaults alone ran its rounds, on a
    # machine without a GPU; no window lacked a steady step
    cpu_only = {k: {c: v[c] for c in ("default", "tuned")} for k, v in SPEED.items()}
    alone = {**cpu_only, "s1089": {"default": SPEED["s1089"]["default"]}}
    assert words(_study(alone)).endswith(
        "No answer at 1,089 series: only the CPU at its defaults ran there, the others no "
        "longer measured (as said below)."
    )
    # the budget ended in the size's first round, one configuration measured: said so instead
    once = {**SPEED, "s1089": {"default": SPEED["s1089"]["default"][:1]}}
    assert words(_study(once)).endswith(
        "No answer at 1,089 series: one round only: the budget ended before the second "
        "(--resume it, or a larger --budget)."
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


def test_a_size_the_gpu_ran_out_of_memory_at_is_named_with_its_reason():
    rows = [
        run_of(_row(size, config, r, v), "f")
        for size, configs in SPEED.items()
        for config, values in configs.items()
        for r, v in enumerate(values)
        if not (size == "s1089" and config == "gpu")
    ]
    oom = {
        **_row("s1089", "gpu", 0, 1.0),
        "status": "oom",
        "reason": "OutOfMemoryError: CUDA out of memory",
        "samples_per_s": "",
    }
    rows.append(run_of(oom, "f"))
    text = words(asked(study(rows, context=Context(question=QUESTION))))
    assert text.endswith(
        "No answer at 1,089 series: cuda ended oom (OutOfMemoryError: CUDA out of memory)."
    )


def test_a_tune_step_judges_every_value_against_its_reference_in_the_same_engine():
    """A tune's windowed step (a question record of kind "lever"): each value tried against the
    reference value at the one size, never against each other; what concluded gets no round."""
    values = {
        (75, "cpu", 2): _noisy(1000, 6, 1),  # the reference
        (75, "cpu", 1): _noisy(700, 6, 2),  # clearly slower
        (75, "cpu", 3): _noisy(1005, 6, 3, noise=0.2),  # too noisy to tell at six rounds
    }
    cells, rows = _cells_and_rows(values)
    record = {"kind": LEVER_KIND, "size": {"param": "batch_size"}}
    found = gpu_vs_cpu.judged({**record, "reference": {"threads": 2}}, cells, rows)
    by_other = {
        dict(next(c for c in cells if c.run_id == f.other).params)["threads"]: f for f in found
    }
    assert sorted(by_other) == [1, 3]
    assert all(
        dict(next(c for c in cells if c.run_id == f.base).params)["threads"] == 2 for f in found
    )
    assert by_other[1].differs and by_other[1].ratio < 0.8
    assert not by_other[3].concluded
    d = pairs.decide(
        found,
        {"75": pairs.Cost("75", 75, {c.run_id: 1.0 for c in cells if c.repeat == 0}, {}, 2.0)},
        1000,
    )
    (more,) = d.runs
    assert set(more.configs) == {by_other[3].base, by_other[3].other}  # not the concluded value


def test_a_windowed_tune_step_is_answered_against_its_reference_not_as_a_gpu_question():
    """A tune's windowed step keeps the engine's record (kind "lever"): compare --full states each
    step as the best value tried against the configuration the search stood at."""
    speed = {"s2": {k: v for k, v in SPEED["s2"].items() if k != "gpu"}}
    rows = [
        run_of(_row(size, config, r, v), "f")
        for size, configs in speed.items()
        for config, values in configs.items()
        for r, v in enumerate(values)
    ]
    step = {**QUESTION, "kind": LEVER_KIND, "gpu": ""}
    text = words(asked(study(rows, context=Context(question=step))))
    assert text.startswith("The best value tried besides the reference trains 2.11x (1.85-2.40x)")
    assert "at the step's reference" in text and "A step of a tune" in text
    assert "No GPU ran" not in text and "defaults" not in text
    plain = words(asked(study(rows, context=Context(question={**QUESTION, "gpu": ""}))))
    assert "best configuration besides its defaults" in plain and "No GPU ran" in plain
    _, table = view(asked(study(rows, context=Context(question=step))))
    assert {"x reference", "best tried", "reference"} <= set(table.columns)
    assert "CPU defaults" not in table.columns


def _levers(one_thread: tuple, bf16: tuple) -> dict:
    """Three sizes of a 16-core CPU at its defaults (threads auto), one thread and bf16."""
    out = {}
    for size, (slow, half) in zip((64, 256, 1024), zip(one_thread, bf16)):
        out[(size, "cpu", 0)] = _noisy(1000, 6, size)
        out[(size, "cpu", 1)] = _noisy(1000 * slow, 6, size + 1)
        out[(size, "cpu", -1)] = _noisy(1000 * half, 6, size + 2)
    return out


def _lever_cells(values: dict) -> tuple[list[RunSpec], list[dict]]:
    """`_cells_and_rows` with threads -1 standing for bf16 autocast at the default threads."""
    cells, rows = [], []
    for (size, device, threads), by_round in values.items():
        params = (("precision", "bf16"), ("threads", 0)) if threads < 0 else (("threads", threads),)
        for r, v in enumerate(by_round):
            c = identify(RunSpec("w", device, "single", size, 1, repeat=r, params=params))
            cells.append(c)
            rows.append({"run_id": c.run_id, "repeat": r, "status": "ok", "samples_per_s": v})
    return cells, rows


def test_a_lever_that_takes_cores_away_and_falls_behind_is_outgrown_a_precision_never():
    """One thread against all 16 cores: slower at two sizes, more so at the larger, is not
    measured at larger sizes; bf16, slower at both and falling too, is kept (a precision can turn
    to a gain where the step becomes compute-bound); a lever slower but gaining is kept."""
    defaults = {"threads": 0}
    cells, rows = _lever_cells(_levers(one_thread=(0.5, 0.3, 0.2), bf16=(0.9, 0.8, 0.7)))
    found = gpu_vs_cpu.outgrown(cells, rows, "batch_size", ["64", "256"], defaults, 16)
    assert [o.sets for o in found] == [(("threads", 1),)]
    before, last = found[0].seen
    assert (before.size, last.size) == ("64", "256") and last.ratio < before.ratio < 1
    # slower at both sizes but by less at the larger: kept
    cells, rows = _lever_cells(_levers(one_thread=(0.3, 0.5, 0.6), bf16=(0.9, 0.8, 0.7)))
    assert gpu_vs_cpu.outgrown(cells, rows, "batch_size", ["64", "256"], defaults, 16) == []
    # faster at the first: kept
    cells, rows = _lever_cells(_levers(one_thread=(1.5, 0.5, 0.2), bf16=(0.9, 0.8, 0.7)))
    assert gpu_vs_cpu.outgrown(cells, rows, "batch_size", ["64", "256"], defaults, 16) == []


def test_only_fewer_threads_or_no_loader_workers_take_resources_away():
    takes = gpu_vs_cpu._takes_away
    defaults = {"threads": 0, "workers": 2, "precision": "default"}
    assert takes({"threads": 1, "workers": 2, "precision": "default"}, defaults, 16)
    assert takes({"threads": 8, "workers": 2, "precision": "default"}, defaults, 16)
    assert takes({"threads": 0, "workers": 0, "precision": "default"}, defaults, 16)
    assert not takes({"threads": 0, "workers": 2, "precision": "bf16"}, defaults, 16)
    assert not takes(defaults, defaults, 16)
    # a preset that fixes one thread: the machine's choice (0, every core) adds, never takes
    assert not takes({"threads": 0}, {"threads": 1}, 16)


def test_an_outgrown_lever_leaves_the_larger_sizes_and_the_answer_says_so(
    tmp_path, monkeypatch, capsys
):
    """The engine's side of the rule above, on a real question of three sizes (this VM cannot
    make a lever fall behind on demand, so the rule is told the smoke's one candidate thread
    count, the machine's, did after the first two): none of its windows runs at the third size,
    the manifest keeps why, and the answer says it."""
    from stbench.cli import main
    from stbench.report.read import engine_note

    def threads_fell(cells, rows, param, last_two, defaults, physical):
        def lever_at(size):  # the machine's threads' first-round cell at a size: the lever
            return next(
                c.run_id for c in cells if c.repeat == 0 and not c.device.startswith("cuda")
                and str(c.batch_size) == size and c.param_dict.get("threads") == 0
                and c.param_dict.get("precision") == defaults.get("precision")
            )  # fmt: skip

        seen = tuple(pairs.Comparison(s, "a", lever_at(s), r, r - 0.05, r + 0.05, 3) for s, r in
                     zip(last_two, (0.6, 0.4)))  # fmt: skip
        return [gpu_vs_cpu.Outgrown((("threads", 0),), seen)]

    monkeypatch.setattr(gpu_vs_cpu, "outgrown", threads_fell)
    # the first rounds are what the rule reads: no rounds after them (this test's time)
    monkeypatch.setattr(pairs, "decide", lambda *args, **kwargs: pairs.Decision((), ()))
    # nor are a larger size's first rounds kept waiting for them (pairs.owed_s)
    monkeypatch.setattr(pairs, "owed_s", lambda *args, **kwargs: 0.0)
    with pytest.raises(SystemExit) as done:
        main(["gpu-vs-cpu", "cnn-strain", "--smoke", "--sizes", "32", "64", "128", "--window",
              "0.1", "--rounds", "2", "--budget", "30", "--out", str(tmp_path)])  # fmt: skip
    assert done.value.code == 0, capsys.readouterr().err[-2000:]
    printed = capsys.readouterr()
    progress, answer = " ".join(printed.err.split()), " ".join(printed.out.split())
    assert "cpu threads=auto not measured from 128 curves a batch on" in progress
    assert "cpu threads=auto was not measured from 128 curves a batch on" in answer
    (manifest_file,) = tmp_path.glob("*/manifest.json")
    manifest = json.loads(manifest_file.read_text())
    runs = [c for c in manifest["cells"] if c["device"] == "cpu"]
    machines = {c["batch_size"] for c in runs if dict(c["params"]).get("threads") == 0}
    assert machines == {32, 64} and {c["batch_size"] for c in runs} == {32, 64, 128}
    (lever,) = manifest["question"]["outgrown"]
    assert lever["sets"] == "threads=auto" and lever["from"] == "128"
    note = engine_note(manifest["question"])
    assert (
        "cpu threads=auto was not measured from 128 curves a batch on: it trained 0.60x the "
        "samples/s of the CPU at its defaults at 32 curves a batch, 0.40x at 64" in note
    )
    # resumed, the engine finds the lever again: it is kept once, and said once
    with pytest.raises(SystemExit) as done:
        main(["gpu-vs-cpu", "--resume", str(manifest_file.parent), "--budget", "5"])
    assert done.value.code == 0, capsys.readouterr().err[-2000:]
    answer = " ".join(capsys.readouterr().out.split())
    assert answer.count("cpu threads=auto was not measured from 128 curves a batch on") == 1
    assert len(json.loads(manifest_file.read_text())["question"]["outgrown"]) == 1


def test_a_size_left_out_is_kept_when_the_study_is_interrupted_and_its_resume_names_it(
    tmp_path, monkeypatch, capsys
):
    """The cells of a size the budget cannot measure twice leave the study the moment it is
    left out: an interrupt right after must not lose why (a resumed answer named nothing)."""
    from stbench.cli import main
    from stbench.runner import engine

    first_half, leave_out = engine.Engine._first_half, engine.Engine._leave_out

    def no_budget_for_64(self, size, later):
        return False if size == "64" else first_half(self, size, later)

    def leave_out_then_ctrl_c(self, sizes, later=None):
        leave_out(self, sizes, later)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.Engine, "_first_half", no_budget_for_64)
    monkeypatch.setattr(engine.Engine, "_leave_out", leave_out_then_ctrl_c)
    # what is left out is all this reads: no rounds after the first (this test's time)
    monkeypatch.setattr(pairs, "decide", lambda *args, **kwargs: pairs.Decision((), ()))
    asked = ["--sizes", "32", "64", "--window", "0.1", "--rounds", "2", "--budget", "20"]
    asked += ["--out", str(tmp_path)]
    with pytest.raises(SystemExit) as done:
        main(["gpu-vs-cpu", "cnn-strain", "--smoke", *asked])
    assert done.value.code == 130, capsys.readouterr().err[-2000:]
    capsys.readouterr()
    monkeypatch.setattr(engine.Engine, "_first_half", first_half)
    monkeypatch.setattr(engine.Engine, "_leave_out", leave_out)
    (folder,) = tmp_path.iterdir()
    with pytest.raises(SystemExit) as done:
        main(["gpu-vs-cpu", "--resume", str(folder), "--budget", "10"])
    assert done.value.code == 0, capsys.readouterr().err[-2000:]
    answer = " ".join(capsys.readouterr().out.split())
    assert "Not measured (the budget could not pay for two rounds): 64 curves a batch" in answer


def test_where_the_cpus_defaults_are_its_fastest_the_answer_says_so_once():
    """At a size where no lever beats the defaults the two ratios are one: the answer names the
    size instead of repeating it against the defaults."""
    slower = {**SPEED, "s2": {**SPEED["s2"], "tuned": (600, 650, 620)}}
    text = words(_study(slower))
    against = text.split("Against the 16-core CPU at its defaults: ")[1].split(". ")[0]
    assert "at 2 series" not in against and "at 121 series" in against
    assert "At 2 series the 16-core CPU's defaults were its fastest configuration." in text


def test_a_questions_report_notes_no_time_to_quality_plot_it_never_could_have():
    """A question's windows train and never evaluate: its report says nothing of a
    time-to-quality plot (it said 'no cell evaluated twice or more' under every question)."""
    from pathlib import Path

    from stbench.report import view as views
    from stbench.report.model import studies
    from stbench.report.read import read_folder

    root = Path(__file__).resolve().parents[1] / "results" / "reference"
    (asked,) = studies([read_folder(root / "ref-cpu2-dcrnn-pems-gpu-vs-cpu")])
    shown = views.view(asked, views.REPORT)
    assert not any("time-to-quality" in n for n in shown.notes), shown.notes


def test_a_tune_steps_study_holds_each_value_against_the_steps_reference_as_the_tune_did():
    """A tune's windowed step is read against its reference (the configuration the search stood
    at), the one the engine judged it against: compile's reference (compile=none) is not among
    the step's defaults (threads, workers, precision), which every value of it matches, and by
    them the committed steps read inverted (stnn's compile=default 1.20x where the tune
    measured 0.83x)."""
    import csv
    from pathlib import Path

    from stbench.report.model import studies
    from stbench.report.read import read_folder

    root = Path(__file__).resolve().parents[1] / "results" / "reference"
    for tune in sorted(root.glob("ref-cpu2-*-tune-300s")):
        with (tune / "tune.csv").open() as f:
            kept = next(
                r for r in csv.DictReader(f) if r["lever"] == "compile" and r["value"] != "none"
            )
        (step,) = studies([read_folder(tune / "05-compile")])
        (point,) = points(asked(step))
        assert point.other.name.endswith("compile=default"), point.other.name
        assert point.vs_tuned.value == pytest.approx(float(kept["ratio"]), rel=1e-9), tune.name


@pytest.mark.parametrize("given", [None, 45.0])
def test_a_resumed_question_runs_on_its_own_budget_unless_one_is_given(
    tmp_path, monkeypatch, capsys, given
):
    """--resume finishes a study with its own options, as run's and tune's do: its budget
    again, not the 600 s default a new study gets (a --budget 30 question, interrupted and
    resumed, measured a size its budget had left out); a --budget given is taken."""
    import shutil
    import time

    from stbench.cli import main
    from stbench.runner import engine
    from tests.helpers import ROOT

    folder = tmp_path / "ref-cpu2-cnn-strain-gpu-vs-cpu"
    shutil.copytree(ROOT / "results" / "reference" / folder.name, folder)
    own = json.loads((folder / "manifest.json").read_text())["question"]["budget_s"]
    asked = {}

    def answer(plan, env, deadline, *args, **kwargs):
        asked["left"] = deadline - time.time()
        return []

    monkeypatch.setattr(engine, "answer", answer)
    extra = [] if given is None else ["--budget", str(given)]
    with pytest.raises(SystemExit):
        main(["gpu-vs-cpu", "--resume", str(folder), *extra])
    capsys.readouterr()
    expected = own if given is None else given
    assert expected - 15 < asked["left"] <= expected


@pytest.mark.parametrize(
    "folder", ["ref-h200-lstm-era5-gpu-vs-cpu", "ref-cpu2-lstm-era5-gpu-vs-cpu"]
)
def test_the_pictures_legend_title_and_words_stay_clear_of_the_plot_and_inside_it(
    tmp_path, monkeypatch, folder
):
    """The legend below the axes and their labels (inside, wherever "best" put it, the H200's
    five lines covered the parity line), the title and every word inside the figure (a title
    wider than the figure, centred over the axes, lost its start)."""
    import shutil

    from stbench.cli.asking import picture
    from stbench.report import plotting
    from tests.helpers import ROOT

    shutil.copytree(ROOT / "results" / "reference" / folder, tmp_path / folder)
    seen = {}

    def measured(fig):
        renderer = fig.canvas.get_renderer()
        fig.canvas.draw()
        (ax,) = fig.axes
        (legend,) = fig.legends
        seen["axes"] = ax.get_tightbbox(renderer)
        seen["legend"] = legend.get_window_extent(renderer)
        seen["words"] = [ax.title.get_window_extent(renderer)] + [
            t.get_window_extent(renderer) for t in ax.texts
        ]
        seen["plot"] = ax.bbox  # the axes' own box: the crossover's words stay in it
        seen["inside"] = [t.get_window_extent(renderer) for t in ax.texts]
        seen["figure"] = fig.bbox
        return real(fig)

    real = plotting.png
    monkeypatch.setattr(plotting, "png", measured)
    assert picture(tmp_path / folder) is not None
    assert seen["legend"].y1 <= seen["axes"].y0  # below the axes, their tick labels and label
    for box in [seen["legend"], *seen["words"]]:
        assert seen["figure"].x0 <= box.x0 and box.x1 <= seen["figure"].x1
        assert seen["figure"].y0 <= box.y0 and box.y1 <= seen["figure"].y1
    assert seen["inside"]  # both studies mark where a side starts to pay
    for box in seen["inside"]:  # under parity the axes held too little room for them
        assert seen["plot"].x0 <= box.x0 and box.x1 <= seen["plot"].x1
        assert seen["plot"].y0 <= box.y0 and box.y1 <= seen["plot"].y1

"""`stbench tune`: the levers and their order, the paired judgement of a step, the
request of each step as a normal study, the finding, and a tune that stops at its budget and
continues with --resume."""

import json
import math
import re

import pytest

from stbench.errors import StbenchError
from stbench.plan import levers
from stbench.plan.judge import QUALITY, SPS, TTT, concluded, finding, judge_step, step_line
from stbench.plan.levers import BATCH, HostOffer
from stbench.plan.tuning import (
    TuneSpec,
    first_rounds_s,
    reproduce,
    request,
    step_share_s,
    windowed,
)
from stbench.runner.tune import gain, looks_better
from stbench.stats import paired
from stbench.store.files import read_runs
from stbench.store.rows import run_of
from tests.helpers import stbench

HOST = HostOffer(
    physical=4,
    logical=8,
    torch_threads=8,
    allocators=("jemalloc",),
    binding={"none": None, "cores": None, "numa": "numactl is not installed"},
)


def test_levers_in_their_order_with_what_this_machine_offers():
    assert levers.NAMES == (
        "threads",
        "interop_threads",
        "bind",
        "precision",
        "compile",
        "allocator",
        "workers",
        BATCH,
    )
    assert levers.baseline(HOST, 75) == {
        "threads": 8,
        "interop_threads": 0,
        "bind": "none",
        "precision": "default",
        "compile": "none",
        "allocator": "system",
        "workers": 0,
        BATCH: 75,
    }
    assert levers.tried(levers.get("threads"), HOST, 75, 8) == (8, 4, 2, 1)  # logical, physical
    allocators = levers.tried(levers.get("allocator"), HOST, 75, "system")
    assert allocators == ("system", "keep", "jemalloc")
    assert levers.tried(levers.get(BATCH), HOST, 75, 75) == (75, 37, 150)
    assert levers.tried(levers.get("bind"), HOST, 75, "none") == ("none", "cores")
    assert levers.get("bind").missing(HOST) == ("bind=numa: numactl is not installed",)
    assert levers.get("allocator").missing(HOST) == (
        "allocator=tcmalloc: not installed (e.g. apt install libtcmalloc-minimal4)",
    )


def _row(value, repeat, sps, val=0.5, ttt="", lever="threads", status="ok", **more):
    params = {"threads": 2, lever: value} if lever != BATCH else {"threads": 2}
    return run_of(
        {
            "params": json.dumps(params),
            "batch_size": str(value if lever == BATCH else 64),
            "repeat": str(repeat),
            "status": status,
            "reason": "" if status == "ok" else "boom",
            SPS: str(sps),
            QUALITY: str(val),
            TTT: str(ttt),
            **more,
        }
    )


def test_paired_ratios_round_by_round():
    ratio, low, high, n = paired({0: 100, 1: 200, 2: 50}, {0: 150, 1: 300, 2: 75}, False)
    assert (ratio, low, high, n) == (pytest.approx(1.5), pytest.approx(1.5), pytest.approx(1.5), 3)
    assert paired({0: 10}, {0: 5}, True)[:2] == (2.0, None)  # lower is better; one round
    assert paired({0: 1}, {1: 1}, False) == (None, None, None, 0)  # no round in common


def test_a_value_is_kept_only_when_significantly_better_and_no_worse_at_learning():
    lever = levers.get("threads")
    rows = [_row(2, r, s) for r, s in enumerate((100, 120, 90))]
    rows += [_row(1, r, s) for r, s in enumerate((150, 170, 140))]
    measure, verdicts, kept = judge_step(lever, rows, 2)
    assert measure == SPS and kept == 1
    one = next(v for v in verdicts if v.subject == 1)
    assert one.better and one.rounds == 3 and one.samples_per_s == 150
    worse = [_row(2, r, s) for r, s in enumerate((100, 120, 90))]
    worse += [_row(1, r, s, val=0.6) for r, s in enumerate((150, 170, 140))]
    measure, verdicts, kept = judge_step(lever, worse, 2)
    assert kept == 2 and "more than 5% worse than 0.5" in verdicts[1].note
    noisy = [_row(2, r, s) for r, s in enumerate((100, 100, 100))]
    noisy += [_row(1, r, s) for r, s in enumerate((300, 80, 110))]
    assert judge_step(lever, noisy, 2)[2] == 2  # faster on average, not significantly
    failed = rows[:3] + [_row(1, 0, 150), _row(1, 1, 170), _row(1, 2, "", status="failed")]
    measure, verdicts, kept = judge_step(lever, failed, 2)
    assert kept == 2 and verdicts[1].note == "1 of 3 runs not ok (failed: boom)"


def test_a_value_that_looks_better_without_being_judged_so_is_the_one_more_rounds_are_for():
    lever = levers.get("threads")
    close = [_row(2, r, s) for r, s in enumerate((100, 100))]
    close += [_row(1, r, s) for r, s in enumerate((130, 110))]  # 1.2x, two rounds: not judged
    close += [_row(4, r, s) for r, s in enumerate((90, 95))]  # looks worse: no rounds for it
    assert looks_better(lever, close, 2, judge_step(lever, close, 2)[1]) == 1
    judged = [_row(2, r, s) for r, s in enumerate((100, 120, 90))]
    judged += [_row(1, r, s) for r, s in enumerate((150, 170, 140))]  # significantly better
    assert looks_better(lever, judged, 2, judge_step(lever, judged, 2)[1]) is None
    worse = [_row(2, r, s) for r, s in enumerate((100, 100))]
    worse += [_row(1, r, s) for r, s in enumerate((90, 95))]
    assert looks_better(lever, worse, 2, judge_step(lever, worse, 2)[1]) is None


def test_a_cell_that_ended_inside_its_warm_up_is_judged_over_all_steps():
    lever = levers.get("threads")
    rows = [_row(2, r, "nan", steps_done=4, train_s=5.0) for r in range(3)]
    rows += [_row(1, r, 9000, steps_done=400 + r, train_s=5.0) for r in range(3)]
    measure, verdicts, kept = judge_step(lever, rows, 2)  # 4 steps of 64 in 5 s: no steady steps
    assert measure == "samples_per_s_all_steps" and kept == 1
    assert verdicts[1].ratio == pytest.approx(401 / 4, rel=1e-3)
    assert verdicts[0].new == 4 * 64 / 5


def test_the_batch_is_judged_by_time_to_target_or_else_quality_after_the_same_seconds():
    lever = levers.get(BATCH)
    reached = [_row(64, r, 100, ttt=t, lever=BATCH) for r, t in enumerate((10, 11, 9))]
    reached += [_row(128, r, 180, ttt=t, lever=BATCH) for r, t in enumerate((12, 13, 11))]
    measure, verdicts, kept = judge_step(lever, reached, 64)
    assert measure == TTT and kept == 64  # more samples/s, later to the target
    short = [_row(64, r, 100, val=v, lever=BATCH) for r, v in enumerate((0.50, 0.52, 0.49))]
    short += [_row(32, r, 60, val=v, lever=BATCH) for r, v in enumerate((0.40, 0.41, 0.39))]
    measure, verdicts, kept = judge_step(lever, short, 64)
    assert measure == QUALITY and kept == 32  # fewer samples/s, it learned more in the time


def test_compilation_is_windowed_beside_the_live_levers_and_the_process_levers_are_cells():
    """A compiled configuration is a trainer of its own in the same warm process (compiled at
    its first window, untimed), so compile's step and a confirming step that differs in it run
    as windows; interop threads, binding, the allocator and the batch still change a process
    or the work, and run as cells."""
    base = levers.baseline(HOST, 75)
    for lever, value in (("threads", 1), ("precision", "bf16"), ("compile", "default")):
        assert windowed([base, {**base, lever: value}]), lever
    assert windowed([base, {**base, "compile": "default", "precision": "bf16", "threads": 1}])
    for lever, value in (("interop_threads", 1), ("bind", "numa"), ("allocator", "tcmalloc")):
        assert not windowed([base, {**base, lever: value}]), lever
    assert not windowed([base, {**base, BATCH: 150}])


def test_a_windowed_step_spends_its_share_of_what_is_left_never_less_than_its_first_rounds():
    # 240 s left and levers after it: the step may spend half, never all 240
    assert step_share_s(240.0, False, 25.0) == pytest.approx(120.0)
    assert step_share_s(240.0, True, 25.0) == pytest.approx(240.0)  # the last step: all of it
    # a share below its first rounds gets them where what is left pays (a workers step of
    # cnn-strain, given 13 s, measured the reference alone: its loaders' builds took the rest)
    assert step_share_s(40.0, False, 25.0) == pytest.approx(25.0)
    assert step_share_s(20.0, False, 25.0) == pytest.approx(20.0)  # what is left, no more
    first = first_rounds_s(3, 0.62)  # three values, two processes, six rounds
    assert first == pytest.approx(2 * (5.0 + 3 * 0.62) + 6 * 3 * (0.62 + 0.03))


def test_a_step_of_process_cells_is_priced_from_what_the_tune_measured(tmp_path, monkeypatch):
    """Before any process cell ran, a cell is its training and a quarter more, the start the
    windowed steps' processes took (the set-up before each process's first window) and the
    overhead; after, the median cell. The guess before, 2 x cell_s + 10 s, was 26 s a cell where
    cnn-strain's cost 13.8 s."""
    from stbench.plan.tuning import TuneSpec
    from stbench.runner import tune

    spec = TuneSpec("cnn-strain", cell_s=8.0)
    per = 1.25 * 8.0 + 3.0 + tune.CELL_OVERHEAD_S
    assert tune.estimate_s(spec, 9, [], [2.0, 3.0, 4.0]) == pytest.approx(9 * per)
    assert tune.estimate_s(spec, 9, [], []) > tune.estimate_s(spec, 9, [], [3.0])  # no start yet
    assert tune.estimate_s(spec, 2, [13.0, 15.0, 14.0], [3.0]) == pytest.approx(28.0)
    # each windowed step's processes: the first row of each (its job) holds the process's start
    for name, question in (("01-threads", {"kind": "lever"}), ("02-interop_threads", None)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "runs.csv").write_text("")
        manifest = {"question": question} if question else {}
        (tmp_path / name / "manifest.json").write_text(json.dumps(manifest))
    rows = {
        "01-threads": [
            {"job_id": "pid 1", "setup_s": 3.5},
            {"job_id": "pid 1", "setup_s": 0.01},
            {"job_id": "pid 2", "setup_s": 2.5},
            {"job_id": "pid 2", "setup_s": 0.02},
        ],
        "02-interop_threads": [{"job_id": "", "setup_s": 9.0}],  # a process cell: its own cost
    }
    monkeypatch.setattr(tune, "read_runs", lambda folder: rows[folder.name])
    assert sorted(tune.process_starts(tmp_path)) == [2.5, 3.5]


def test_a_step_of_process_cells_leaves_the_windowed_steps_after_it_their_first_rounds(
    tmp_path,
):
    """A 300-s tune of cnn-strain spent its budget on inter-op threads and binding and never
    measured precision, compile or loader workers: a step of process cells now keeps each
    windowed step still to search its first rounds; levers fixed by --set keep nothing."""
    from stbench.plan.tuning import step_window_s
    from stbench.runner.envinfo import collect
    from stbench.runner.tune import Tuner

    env = collect()
    spec = TuneSpec("cnn-strain", smoke=True, budget_s=300)
    tuner = Tuner(spec, tmp_path, env, run=lambda plan: [])
    batch = int(tuner.start[BATCH])
    expected = 0.0
    for name in ("precision", "compile", "workers"):  # the windowed levers after inter-op
        n = len(levers.tried(levers.get(name), tuner.host, batch, tuner.best[name]))
        expected += first_rounds_s(n, step_window_s(spec, n)) if n >= 2 else 0.0
    assert expected > 0 and tuner._windowed_after_s(2) == pytest.approx(expected)
    assert tuner._windowed_after_s(len(levers.NAMES)) == 0.0  # nothing after the batch's step
    sets = ("precision=default", "compile=none", "workers=0")
    fixed = Tuner(
        TuneSpec("cnn-strain", smoke=True, budget_s=300, sets=sets), tmp_path, env, run=None
    )
    assert fixed._windowed_after_s(2) == 0.0


def test_a_step_whose_values_never_ran_says_so_and_is_not_concluded():
    step = {
        "lever": "workers", "reference": 0, "kept": 0, "values": [0, 1, 2],
        "measure": "samples_per_s",
        "verdicts": [{"value": 0, "ratio": 1.0, "low": None, "high": None, "note": ""}],
    }  # fmt: skip
    line = step_line(step)
    assert line.startswith("workers stays 0, not concluded [samples/s: ")
    assert "workers=1: not measured in the step's time; workers=2: not measured" in line


def test_each_step_is_a_normal_study_and_the_best_is_reproduced_by_run_options():
    spec = TuneSpec("stnn", sets=("grid=60x168", "relations=sparse", "threads=1"), cell_s=8)
    config = {**levers.baseline(HOST, 1000), "threads": 1, "precision": "bf16"}
    req = request(spec, config, "allocator", ("system", "keep"))
    assert req.sets[:6] == (
        "grid=60x168",
        "relations=sparse",
        "threads=1",
        "time_budget=8",
        "eval_every_s=2",
        "max_eval_samples=1024",
    )
    assert "allocator=system,keep" in req.sets and "precision=bf16" in req.sets
    assert sum(s.startswith("threads=") for s in req.sets) == 1  # the user's, once
    assert req.batch_sizes == (1000,) and req.epochs == (1,) and req.repeat == 3
    assert request(spec, config, BATCH, (1000, 500)).batch_sizes == (1000, 500)
    assert reproduce(spec, config) == (
        "stbench run stnn --device cpu --batch-size 1000 --set grid=60x168 --set relations=sparse "
        "--set threads=1 --set interop_threads=0 --set bind=none --set precision=bf16 "
        "--set compile=none --set allocator=system --set workers=0"
    )
    with pytest.raises(StbenchError, match="at least 2 rounds"):
        TuneSpec("stnn", repeats=1).check()
    with pytest.raises(StbenchError, match="a tune fixes one value per parameter"):
        TuneSpec("stnn", sets=("threads=1,2",)).fixed


def test_the_gain_over_torchs_defaults_and_the_finding_sentences():
    start, best = levers.baseline(HOST, 64), {**levers.baseline(HOST, 64), "threads": 1}

    def row(config, r, sps, val):
        params = {k: v for k, v in config.items() if k != BATCH}
        return run_of(
            {
                "params": json.dumps(params),
                "batch_size": "64",
                "repeat": str(r),
                "status": "ok",
                SPS: str(sps),
                QUALITY: str(val),
                TTT: "",
                "contended": "False",
            }
        )

    rows = [
        row(c, r, s, v) for r in range(3) for c, s, v in ((start, 100 + r, 0.5), (best, 200, 0.45))
    ]
    g = gain(rows, start, best)
    mean_log = sum(math.log(200 / (100 + r)) for r in range(3)) / 3
    assert g[SPS]["ratio"] == pytest.approx(math.exp(mean_log))
    assert g[SPS]["baseline"] == 101 and g[SPS]["best"] == 200 and TTT not in g
    assert g["quality"] == {"base": 0.5, "best": 0.45}
    assert (g["contended"], g["cells"]) == (0, 6)  # counts, never words to parse back
    state = {
        "spec": {"workload": "cnn-strain", "cell_s": 8, "repeats": 3},
        "host": {"physical": 4},
        "steps": [
            {
                "index": 1,
                "lever": "threads",
                "reference": 8,
                "kept": 1,
                "measure": SPS,
                "contended": 2,
                "cells": 6,
                "missing": [],
                "verdicts": [
                    {"value": 8, "ratio": 1.0, "low": None, "high": None, "note": ""},
                    {"value": 1, "ratio": 1.98, "low": 1.9, "high": 2.1, "note": ""},
                ],
            }
        ],
        "result": {
            "best": best,
            "baseline": start,
            "gain": g,
            "command": "stbench run cnn-strain ...",
            "confirm_folder": "09-confirm",
        },
    }
    text = finding(state)
    assert text.startswith(
        "cnn-strain on this CPU (4 physical cores, 8 s of training per cell, 3 "
        "rounds per step): the best configuration found changes threads=1 "
        "(torch's default: 8). In the confirming step (3 rounds side by side) "
        "it was significantly faster than torch's defaults: 1.98x, 95% interval"
    )
    assert "their samples/s (200 vs 101); validation metric 0.45 vs 0.5." in text
    assert "  threads 8 -> 1 kept [samples/s: threads=1: 1.98x, 95% interval 1.90-2.10x]" in text
    assert "Reproduce: stbench run cnn-strain ..." in text
    assert "2 of 6 search cells ran contended" in text
    # a kept value the confirming step shows slower, side by side: said so, never "no different"
    slower = {**g, SPS: {**g[SPS], "ratio": 0.92, "low": 0.85, "high": 0.99}}
    said = " ".join(finding({**state, "result": {**state["result"], "gain": slower}}).split())
    assert (
        "it was significantly slower than torch's defaults: 0.92x, 95% interval 0.85-0.99x "
        "their samples/s (200 vs 101): keep torch's defaults;" in said
    ), said
    # torch's defaults are "the best found" only where another value was measured beside them
    (step,) = state["steps"]
    wide = {**step["verdicts"][1], "ratio": 1.3, "low": 0.8, "high": 2.1}  # not concluded
    for verdicts, head in (
        (step["verdicts"][:1], "no value besides torch's defaults was measured, so nothing"),
        (step["verdicts"], "torch's defaults were the best configuration found."),
        (
            [step["verdicts"][0], wide],
            "torch's defaults stay: no value measured was significantly better, but the step "
            "that compared a value with them did not conclude.",
        ),
    ):
        kept = {**step, "kept": 8, "verdicts": verdicts}
        unchanged = {**state["result"], "best": start, "gain": None}
        said = " ".join(finding({**state, "steps": [kept], "result": unchanged}).split())
        assert head in said, said


def test_an_open_step_names_the_rounds_that_would_settle_it_either_way_as_the_engine_does():
    """A value about as fast as the reference (1.01x, rounds 8% apart): many rounds would tell
    them apart, fewer would show them equal within the margin; the step's line and the engine's
    comparison (plan/pairs.py) name those fewer rounds; "no count would" only where neither."""
    from stbench.comparison import judge
    from stbench.plan.judge import _open
    from stbench.plan.pairs import compared
    from stbench.runner.tune_files import verdict_record

    base = {r: 100.0 for r in range(6)}
    other = {r: 100.0 * (1.05 if r % 2 else 0.97) for r in range(6)}
    v = judge(1, SPS, base, other)
    assert not v.significant and 6 < v.to_equal < v.needs < 1000
    c = compared("64", "a", "b", base, other)
    assert c.rounds + c.more == v.to_equal
    assert _open(verdict_record(v)) == f"open: ~{v.to_equal} rounds could settle it"
    apart = {r: 100.0 * (3.0 if r % 2 else 1 / 3) for r in range(6)}  # 1.0x, rounds 9x apart
    w = judge(1, SPS, base, apart)
    assert (w.needs, w.to_equal) == (1000, 1000)
    assert _open(verdict_record(w)).endswith("no count of rounds would at the spread seen")


@pytest.mark.slow
def test_a_tune_stops_at_its_budget_and_resume_continues_it(tmp_path):
    fixed = [
        "--set",
        "interop_threads=0",
        "--set",
        "bind=none",
        "--set",
        "precision=default",
        "--set",
        "compile=none",
        "--set",
        "allocator=keep",
        "--set",
        "workers=0",
    ]
    args = [
        "tune",
        "cnn-strain",
        "--smoke",
        *fixed,
        "--window",
        "0.5",
        "--rounds",
        "2",
        "--out",
        tmp_path,
    ]
    first = stbench(*args, "--budget", "20", timeout=600)  # less than one step and the confirming
    assert first.returncode == 0, first.stderr[-2000:]
    (root,) = tmp_path.iterdir()
    state = json.loads((root / "tune.json").read_text())
    notes = [s["note"] for s in state["steps"]][:2]
    # the step says what it would have needed, and what was left
    assert re.fullmatch(
        r"not searched: about \d+ s for two rounds of its windows and the confirming step; "
        r"\d+ s of the budget were left",
        notes[0],
    )
    assert notes[1] == "fixed by --set interop_threads=0"
    assert "Not every lever was searched: the budget of 20 s" in first.stdout
    again = stbench("tune", "--resume", root, "--budget", "3000", timeout=1200)
    assert again.returncode == 0, again.stderr[-2000:]
    state = json.loads((root / "tune.json").read_text())
    steps = {s["lever"]: s for s in state["steps"]}
    assert steps["threads"]["folder"] == "01-threads" and steps[BATCH]["folder"] == "08-batch_size"
    threads = read_runs(root / "01-threads")
    assert len(threads) >= 2 * len(steps["threads"]["values"])
    later = {r.params["threads"] for r in threads if r["repeat"] >= 2}
    # rounds added for a value that looked better hold it and the reference, nothing else
    assert len(later) in (0, 2) and (not later or steps["threads"]["reference"] in later)
    assert state["result"]["command"].startswith("stbench run cnn-strain --device cpu --batch-size")
    assert "Reproduce: stbench run cnn-strain" in again.stdout
    assert (root / "tune.csv").read_text().startswith("step,lever,value,reference,kept,measure")
    before = sorted(p.name for p in root.iterdir())
    replay = stbench("tune", "--resume", root, timeout=600)  # every step done: nothing runs again
    assert replay.returncode == 0 and "cpu single" not in replay.stderr
    assert sorted(p.name for p in root.iterdir()) == before


def test_levers_a_process_switches_are_tuned_in_paired_windows_until_each_concludes(tmp_path):
    """threads runs as the questions' engine runs gpu-vs-cpu: windows inside warm processes,
    rounds until each value concludes against the reference (or says why not); the batch's step
    of cells that the budget cannot pay is named, and the search goes on past it."""
    fixed = ["interop_threads=0", "bind=none", "precision=default", "compile=none"]
    fixed += ["allocator=keep", "workers=0"]
    sets = [w for f in fixed for w in ("--set", f)]
    done = stbench(
        "tune", "cnn-strain", "--smoke", *sets, "--budget", "45", "--out", tmp_path / "t"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (root,) = (tmp_path / "t").iterdir()
    state = json.loads((root / "tune.json").read_text())
    steps = {s["lever"]: s for s in state["steps"]}
    asked = json.loads((root / "01-threads" / "manifest.json").read_text())["question"]
    assert asked["kind"] == "lever" and asked["stopped"]
    threads = read_runs(root / "01-threads")
    assert {r["job_id"].split()[0] for r in threads} == {"pid"}  # every row is a window
    assert len({r["job_id"] for r in threads}) >= 2  # spread over two processes at least
    for v in steps["threads"]["verdicts"]:
        if v["value"] != steps["threads"]["reference"]:
            assert v["rounds"] >= 5
            assert concluded(v) or "open" in done.stdout or "tune:" in done.stderr
    assert re.fullmatch(
        r"not searched: about \d+ s for its cells and the confirming step; \d+ s of the budget "
        r"were left",
        steps[BATCH]["note"],
    )
    assert "threads in paired windows of" in done.stdout
    # a step of cells that did not fit names the other way to fit it: shorter cells
    assert "or search again with shorter cells (--window, 8 s a cell now)" in " ".join(
        done.stdout.split()
    )


def test_an_older_tune_json_with_contended_in_words_is_read_as_counts_in_one_place(tmp_path):
    """tune.json once said "2 of 42"; store.files.read_tune reads it as counts, and the
    finding never parses words."""
    from stbench.store.files import read_tune

    old = {
        "spec": {"workload": "w"},
        "steps": [{"lever": "threads", "contended": "2 of 42"}],
        "result": {"gain": {"contended": "1 of 6"}},
    }
    (tmp_path / "tune.json").write_text(json.dumps(old))
    state = read_tune(tmp_path)
    assert (state["steps"][0]["contended"], state["steps"][0]["cells"]) == (2, 42)
    assert (state["result"]["gain"]["contended"], state["result"]["gain"]["cells"]) == (1, 6)


def test_a_tunes_command_asks_it_again_with_its_options_and_no_defaults():
    from stbench.plan.tuning import TuneSpec

    assert TuneSpec("cnn-strain").command() == "stbench tune cnn-strain"
    asked = TuneSpec("stnn", "paper", ("grid=30x84", "lr=0.01"), 256, 4, 2.5, 90.0, 512, 3, True)
    assert asked.command() == (
        "stbench tune stnn --preset paper --set grid=30x84 --set lr=0.01 --smoke --batch-size "
        "256 --budget 90 --rounds 4 --window 2.5 --eval-samples 512 --seed 3"
    )

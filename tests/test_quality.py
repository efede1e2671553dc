"""Time to quality (#17): targets, evaluation cadence, time budgets, stopping at the target,
MLPerf's scoring over repeats, and a budgeted study that resumes without a duplicate row."""

import csv
import json
import math
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from helpers import compare_text, frame, stbench

from stbench.child.strategies import scaled_lr
from stbench.child.target import Evaluation, resolve_target, target_figures
from stbench.contract import TrainerParams
from stbench.plan import registry
from stbench.plan.planner import Request, plan_new
from stbench.report.ttt import TITLE as TTT_TITLE
from stbench.report.ttt import olympic
from stbench.report.ttt import table as ttt_table
from stbench.runner import envinfo, study
from stbench.store.files import read_runs


def _eval(step, value, elapsed):
    return Evaluation(step, step / 10, step * 8, elapsed, elapsed / 2, value)


def test_the_target_is_explicit_or_the_workloads_fraction_of_its_baseline():
    assert resolve_target(0.3, 0.5, 2.0) == 0.3
    assert resolve_target(0.0, 0.5, 2.0) == 1.0
    assert resolve_target(0.0, None, 2.0) is None and resolve_target(0.0, 0.5, math.nan) is None
    for w in registry.all_workloads():  # every workload documents a default target
        assert w.target_ratio and 0 < w.target_ratio < 1 and w.target_note, w.name


def test_time_to_target_is_the_first_evaluation_at_or_below_it():
    evals = [_eval(10, 0.9, 1.0), _eval(20, 0.5, 2.5), _eval(30, 0.4, 4.0)]
    got = target_figures(evals, 0.5)
    assert got == dict(
        target=0.5,
        target_reached=True,
        time_to_target_s=2.5,
        time_to_target_train_s=1.25,
        epochs_to_target=2.0,
        samples_to_target=160,
    )
    missed = target_figures(evals, 0.1)
    assert missed["target_reached"] is False and missed["time_to_target_s"] is None
    assert target_figures(evals, None)["target_reached"] is None


def test_mlperf_scoring_drops_the_fastest_and_slowest_and_tolerates_one_miss():
    assert olympic([5.0, 1.0, 3.0, 4.0, 2.0]) == (3.0, "mean of 3")
    score, how = olympic([5.0, 1.0, math.inf, 4.0, 2.0])  # the miss is the slowest, dropped
    assert score == pytest.approx(11 / 3) and how == "mean of 3"
    score, how = olympic([5.0, math.inf, math.inf, 4.0])
    assert math.isnan(score) and how == "not scored: 2 of 4 runs missed"
    assert olympic([2.0, 4.0]) == (3.0, "mean of 2 (none dropped: < 3 runs)")
    assert math.isnan(olympic([2.0, math.inf])[0])


def test_lr_scales_with_the_global_batch_over_the_batch_it_was_meant_for():
    knobs = TrainerParams(lr=1e-3, lr_scaling="linear", lr_base_batch=75)
    assert scaled_lr(knobs, 700, 1) == pytest.approx(1e-3 * 700 / 75)
    assert scaled_lr(
        TrainerParams(lr=1e-3, lr_scaling="sqrt", lr_base_batch=75), 300, 1
    ) == pytest.approx(2e-3)
    assert scaled_lr(TrainerParams(lr=1e-3, lr_scaling="linear"), 64, 4) == pytest.approx(
        4e-3
    )  # by world size
    assert scaled_lr(TrainerParams(lr=1e-3), 700, 4) == 1e-3


def _row(cell, repeat, status="ok", t=None, target=0.1, **params):
    return dict(
        workload="w",
        device="cpu",
        cpu_model="EPYC",
        cores=2,
        gpu_count=0,
        host="h",
        machine_id="m",
        torch="2",
        status=status,
        params=json.dumps({"batch": cell, **params}),
        strategy="single",
        world_size=1,
        nodes=1,
        batch_size=cell,
        epochs=1,
        repeat=repeat,
        target=target,
        target_reached=t is not None,
        time_to_target_s=t,
        time_to_target_train_s=t and t / 2,
        epochs_to_target=t and t / 10,
        epochs_done=3.0,
    )


def test_the_time_to_target_table_scores_each_cell_and_names_what_converged():
    rows = (
        [_row(75, r, t=t) for r, t in enumerate([10.0, 12.0, 14.0])]
        + [_row(700, r, t=t) for r, t in enumerate([5.0, None, None])]
        + [_row(32, 0, status="skipped")]
    )
    whole = ttt_table(frame(rows))
    assert whole.attrs["keys"] == [
        "batch_size",
        "batch",
    ]  # what a narrow terminal repeats in every piece
    table = whole.set_index("batch_size")  # keys as the table shows them
    assert table.loc["75", "mlperf_s"] == "12.00" and table.loc["75", "reached"] == "3/3"
    assert table.loc["75", "median_s"].startswith("12.00 ± ")
    assert table.loc["700", "mlperf_s"] == "not scored: 2 of 3 runs missed"
    assert table.loc["700", "reached"] == "1/3"
    assert "32" not in table.index  # a skipped cell is not a run


def test_the_summary_keeps_a_quality_studys_misses_and_leaves_a_throughput_studys_to_full():
    """A study that asked for time to quality answers "not reached" in its headline; a
    throughput study whose runs all missed keeps its column of 0/N for --full."""

    def rows(**params):
        return [{**_row(75, r, **params), "wall_s": 3.0} for r in range(2)]

    def text(**params):
        return compare_text(rows(**params), full=False, rows="batch_size")

    def shown(**params):
        return TTT_TITLE in text(**params) and "not reached" in text(**params)

    assert shown(time_budget=1.5) and shown(stop_at_target=True)
    # under a budget the wall time is the budget: the summary's headline is the time to target
    assert "### wall time (s)" not in text(time_budget=1.5) and "### wall time (s)" in text()
    assert not shown() and ttt_table(frame(rows()))["reached"].tolist() == ["0/2"]


def _plan(tmp_path, **kw):
    return plan_new(Request("cnn-strain", smoke=True, out=tmp_path, **kw), envinfo.collect())


def _epochs(folder):
    with open(folder / "epochs.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_time_budget_trains_that_long_and_says_how_far_it_got(tmp_path):
    p = _plan(
        tmp_path,
        sets=(
            "time_budget=2",
            "eval_every=7",
            "target=0.05",
            "max_steps=10",
            "threads=1",
            "max_eval_batches=2",
        ),
        epochs=(1,),
    )
    (row,) = study.run_study(p, envinfo.collect(), None, interval=0.2)
    assert row["status"] == "ok" and row["stopped_by"] == "time budget"
    # steps stop once the budget is spent (within a few steps), not at an epoch's end; the budget is
    # host time between evaluations, the steps' own time a little less (bookkeeping between them)
    assert 0.9 * 2.0 <= row["train_s"] < 2.0 + 3 * row["train_s"] / row["steps_done"]
    assert row["epochs_done"] > 1  # --epochs 1 did not stop it
    evals = _epochs(p.folder)
    assert len(evals) >= 2 and all(int(e["step"]) % 7 == 0 for e in evals[:-1])
    assert int(evals[-1]["step"]) == row["steps_done"]
    hit = next(e for e in evals if float(e["val_metric"]) <= 0.05)
    assert row["target_reached"] is True or row["target_reached"] == "True"
    assert float(row["time_to_target_s"]) == pytest.approx(float(hit["elapsed_s"]))
    assert int(row["samples_to_target"]) == int(hit["step"]) * 64
    assert float(hit["train_elapsed_s"]) < float(
        hit["elapsed_s"]
    )  # evaluation is on MLPerf's clock only


@pytest.mark.slow
def test_an_evaluation_cadence_in_seconds_evaluates_by_the_training_clock_not_the_epoch(tmp_path):
    p = _plan(
        tmp_path,
        sets=(
            "time_budget=2",
            "eval_every_s=0.5",
            "max_steps=10",
            "threads=1",
            "max_eval_batches=2",
        ),
        epochs=(1,),
    )
    (row,) = study.run_study(p, envinfo.collect(), None, interval=0.2)
    evals = _epochs(p.folder)
    assert row["status"] == "ok" and row["stopped_by"] == "time budget"
    # at 0.5, 1.0 and 1.5 s and at the budget's end (fewer only if one step outlasts a half second)
    assert 2 <= len(evals) <= 4 and int(evals[-1]["step"]) == row["steps_done"]
    assert int(evals[0]["step"]) > 10  # epochs of 10 steps went by without an evaluation
    ahead = [float(e["elapsed_s"]) - float(b["elapsed_s"]) for b, e in zip(evals, evals[1:])]
    assert all(gap > 0.25 for gap in ahead[:-1])  # half a second of training, less at most a step


def test_stop_at_target_ends_the_run_at_the_first_evaluation_that_reaches_it(tmp_path):
    p = _plan(tmp_path, sets=("stop_at_target=true", "eval_every=5", "target=0.05"), epochs=(20,))
    (row,) = study.run_study(p, envinfo.collect(), None, interval=0.2)
    evals = _epochs(p.folder)
    assert row["stopped_by"] == "target" and float(evals[-1]["val_metric"]) <= 0.05
    assert all(float(e["val_metric"]) > 0.05 for e in evals[:-1])
    assert row["epochs_done"] < 20


@pytest.mark.slow  # a minute of 12 budgeted cells on 2 cores: STBENCH_SLOW=1 runs it
def test_the_thesis_question_is_one_command(tmp_path):
    """Batch 75 vs 700 x lr scaling, the same training time each, scored MLPerf's way."""
    proc = stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--batch-size",
        "75",
        "700",
        "--set",
        "lr_scaling=none,linear",
        "--set",
        "time_budget=1.5",
        "--rounds",
        "3",
        "--out",
        tmp_path / "out",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "to target s" in proc.stdout
    (folder,) = (tmp_path / "out").iterdir()
    rows = read_runs(folder)
    assert len(rows) == 12 and {r["stopped_by"] for r in rows} == {"time budget"}
    assert {r.params["time_budget"] for r in rows} == {1.5}
    text = stbench("compare", folder, check=True).stdout
    assert TTT_TITLE in text and "reached" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("|") and ("75" in ln or "700" in ln)]
    assert any("/3" in ln for ln in lines)


@pytest.mark.slow
def test_a_budgeted_study_killed_mid_way_resumes_without_a_duplicate_row(tmp_path):
    argv = [
        sys.executable,
        "-m",
        "stbench",
        "run",
        "cnn-strain",
        "--smoke",
        "--set",
        "time_budget=2",
        "--rounds",
        "3",
        "--out",
        str(tmp_path / "out"),
    ]
    parent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not list(tmp_path.glob("out/*/runs.csv")):
        time.sleep(0.05)
    time.sleep(1.0)  # the second cell is training
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    (folder,) = (tmp_path / "out").iterdir()
    before = [r["run_id"] for r in read_runs(folder)]
    assert 1 <= len(before) < 3
    stbench("run", "--resume", folder, check=True, timeout=300)
    after = [r["run_id"] for r in read_runs(folder)]
    assert len(after) == len(set(after)) == 3 and after[: len(before)] == before
    assert set(pd.DataFrame(_epochs(folder))["run_id"]) == set(after)  # no orphan evaluation rows

"""The CI side: `stbench run --all`, and the regression gate judged as compare judges a ratio."""

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from stbench.report.judge import Verdict, gate, gate_exit_code
from stbench.report.text import line
from stbench.stats import repeats_needed, significant
from stbench.store.files import read_csv  # text rows, doctored, then typed by run_of
from stbench.store.rows import run_of
from tests.helpers import stbench

REF = (
    Path(__file__).parent.parent / "results" / "reference" / "ref-cpu2-cnn-strain-epochs"
)  # 3 repeats per cell


def _slower(folder: Path, factor: float, repeats: int = 3, times: int = 1) -> None:
    """The folder's runs.csv doctored: wall_s times `factor`, only its first `repeats` repeats
    kept, each kept `times` times over (as more repeats with the same spread)."""
    path = folder / "runs.csv"
    kept = [r for r in csv.DictReader(path.open()) if int(r["repeat"]) < repeats]
    rows = [
        {**r, "repeat": str(int(r["repeat"]) + k * repeats)} for k in range(times) for r in kept
    ]
    for r in rows:
        r["wall_s"] = str(float(r["wall_s"]) * factor)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_gate_fails_on_a_copy_made_30_percent_slower_and_passes_on_the_same_rows(tmp_path):
    shutil.copytree(REF, tmp_path / "slow")
    _slower(tmp_path / "slow", 1.3)
    proc = stbench("gate", REF, tmp_path / "slow")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == (
        "REGRESSION   cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=3: wall_s 37.21 -> 48.37, 30.0% worse (significant)"
    )
    # the one-epoch cells' three repeats spread too widely to tell 30% from noise
    assert out[1].endswith(
        "epochs=1: wall_s 13.13 -> 17.07, 30.0% worse with 3 repeats: "
        "inconclusive (needs ≥ 9 repeats)"
    )
    same = stbench("gate", REF, REF)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines() == [
        "unchanged    cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=1: wall_s 13.13 -> 13.13",
        "unchanged    cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=2: wall_s 27.55 -> 27.55",
        "unchanged    cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=3: wall_s 37.21 -> 37.21",
        "0 regression(s), 0 inconclusive in 3 comparison(s) "
        "(margin 10%, 95% intervals and Welch's t-test)",
    ]


def test_a_copy_30_percent_slower_with_too_few_repeats_is_inconclusive_and_exits_3(tmp_path):
    for side, factor in (("base", 1.0), ("slow", 1.3)):  # one repeat a side, as a quick CI job runs
        shutil.copytree(REF, tmp_path / side)
        _slower(tmp_path / side, factor, repeats=1)
    proc = stbench("gate", tmp_path / "base", tmp_path / "slow")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "INCONCLUSIVE cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=1: wall_s 15.52 -> 20.17, 30.0% worse with 1 repeat: "
        "inconclusive (needs ≥ 2 repeats)",
        "INCONCLUSIVE cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=2: wall_s 27.55 -> 35.82, 30.0% worse with 1 repeat: "
        "inconclusive (needs ≥ 2 repeats)",
        "INCONCLUSIVE cnn-strain cpu single world_size=1 nodes=1 batch_size=75 "
        "epochs=3: wall_s 37.44 -> 48.68, 30.0% worse with 1 repeat: "
        "inconclusive (needs ≥ 2 repeats)",
        "0 regression(s), 3 inconclusive in 3 comparison(s) "
        "(margin 10%, 95% intervals and Welch's t-test)",
    ]
    mixed = stbench(
        "gate", REF, tmp_path / "slow"
    )  # 3 repeats against 1: the lone side borrows the spread
    assert mixed.returncode == 3 and "with 3 vs 1 repeats: inconclusive (needs ≥ " in mixed.stdout


def test_with_the_repeats_an_inconclusive_line_names_the_slowdown_is_a_regression(tmp_path):
    for side, factor in (("base", 1.0), ("slow", 1.3)):
        shutil.copytree(REF, tmp_path / side)
        _slower(tmp_path / side, factor, times=3)  # 9 repeats a side, the spread measured
    proc = stbench("gate", tmp_path / "base", tmp_path / "slow")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith(
        "3 regression(s), 0 inconclusive in 3 comparison(s)"
    )


def _runs(records: list[dict]):
    return [run_of(r) for r in records]


def test_a_worse_median_that_is_not_significant_is_inconclusive_never_ok():
    base = read_csv(REF / "runs.csv", ["run_id"])
    new = [dict(r) for r in base]
    for r in new:  # one repeat per cell 30% slower: the median moves, the intervals overlap
        if r["repeat"] == "0":
            r["wall_s"] = str(float(r["wall_s"]) * 1.3)
    verdicts = gate(_runs(base), _runs(new))
    assert len(verdicts) == 3 and {v.kind for v in verdicts} <= {
        "ok",
        "unchanged",
    }  # medians moved < 10%
    slower = _runs([{**r, "wall_s": str(float(r["wall_s"]) * 1.3)} for r in base])
    base = _runs(base)
    slow = {v.subject[-8:]: v for v in gate(base, slower)}
    assert (
        slow["epochs=1"].kind == "inconclusive" and slow["epochs=1"].needs == 9
    )  # noisy repeats: never ok
    assert slow["epochs=3"].kind == "regression"
    faster = gate(
        base,
        _runs(
            [
                {**r, "wall_s": str(float(r["wall_s"]) / 1.3)}
                for r in read_csv(REF / "runs.csv", ["run_id"])
            ]
        ),
    )
    assert {v.kind for v in faster} == {"ok"} and all(v.change < 0 for v in faster)
    assert all(", 23.1% better (" in line(v, 0.10) for v in faster)


def _sample(values: list[float], k: int) -> list[float]:
    """k values with the mean and spread (sample std) of `values`."""
    z = np.arange(k) - (k - 1) / 2
    return list(np.mean(values) + np.std(values, ddof=1) * z / np.std(z, ddof=1))


def test_repeats_needed_is_where_the_test_would_say_yes():
    a, b = [10.0, 11.0, 12.0], [13.0, 14.5, 16.0]  # a spread the size of the gap
    n = repeats_needed(a, b)
    assert not significant(a, b) and n == 5
    assert significant(_sample(a, n), _sample(b, n)) and not significant(
        _sample(a, n - 1), _sample(b, n - 1)
    )
    assert repeats_needed([10.0], [13.0]) == 2  # no spread measured: the test's floor
    assert (
        repeats_needed([10.0, 10.0], [13.0]) == 2
    )  # a lone value borrows the other side's (nil) spread
    assert (
        repeats_needed([10.0, 11.0], [10.5, 10.5]) == 1000
    )  # the means agree: no number of repeats settles it


def test_each_verdict_is_worded_as_pyperf_words_it():
    def v(kind, change, sig=False, **kw):
        return Verdict(
            "c", "wall_s", base=10.0, new=10.0 * (1 + change), change=change,
            significant=sig, kind=kind, **kw,
        )  # fmt: skip

    assert line(v("unchanged", 0.0), 0.1) == "unchanged    c: wall_s 10.00 -> 10.00"
    assert line(v("ok", 0.05), 0.1) == (
        "ok           c: wall_s 10.00 -> 10.50, 5.0% worse (not significant, within the 10% margin)"
    )
    assert (
        line(v("ok", -0.2, True), 0.1)
        == "ok           c: wall_s 10.00 -> 8.00, 20.0% better (significant)"
    )
    assert (
        line(v("regression", 0.3, True), 0.1)
        == "REGRESSION   c: wall_s 10.00 -> 13.00, 30.0% worse (significant)"
    )
    assert (
        line(v("inconclusive", 0.3, repeats=(1, 1), needs=2), 0.1)
        == "INCONCLUSIVE c: wall_s 10.00 -> 13.00, 30.0% worse with 1 repeat: "
        "inconclusive (needs ≥ 2 repeats)"
    )
    assert (
        gate_exit_code([v("ok", 0.0), v("inconclusive", 0.3)]) == 3
        and gate_exit_code([v("regression", 0.3, True)]) == 1
    )
    assert gate_exit_code([v("unchanged", 0.0)]) == 0


def test_a_cell_that_no_longer_ends_ok_is_a_regression():
    base = read_csv(REF / "runs.csv", ["run_id"])
    new = [{**r, "status": "failed", "wall_s": ""} if r["epochs"] == "1" else r for r in base]
    bad = [v for v in gate(_runs(base), _runs(new)) if v.regression]
    assert len(bad) == 1 and "ended failed" in bad[0].note


@pytest.mark.slow
def test_run_all_plans_one_study_per_registered_workload():
    proc = stbench("run", "--all", "--smoke", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    for name in ("cnn-strain", "dcrnn-pems", "lstm-era5", "stnn"):
        assert f"# cell 1/1: {name} cpu single" in proc.stdout
    refused = stbench("run", "--all", "cnn-strain")
    assert refused.returncode == 2 and "needs one of" in refused.stderr


def test_a_windowed_study_is_gated_on_samples_per_s_whose_windows_last_what_the_budget_set(
    tmp_path, capsys
):
    """A question's windows train for a set time: their wall_s is that time, so a study whose
    samples/s halved reads unchanged on wall_s. By default the gate judges its samples/s."""
    from stbench.cli import main
    from stbench.store.files import rewrite
    from tests.helpers import ROOT

    base = ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-gpu-vs-cpu"
    new = shutil.copytree(base, tmp_path / "new")
    with (new / "runs.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        columns, rows = list(reader.fieldnames or []), list(reader)
    for r in rows:  # the same windows, half the samples in each
        if r["samples_per_s"]:
            r["samples_per_s"] = str(float(r["samples_per_s"]) / 2)
    rewrite(new / "runs.csv", rows, columns)
    with pytest.raises(SystemExit) as done:
        main(["gate", str(base), str(new)])
    said = capsys.readouterr().out
    assert done.value.code == 1, said[-2000:]
    assert "REGRESSION" in said and "samples_per_s" in said and "wall_s" not in said

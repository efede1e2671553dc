"""The CI side: `stbench run --all`, and the regression gate judged as compare judges a ratio."""

import csv
import shutil
from pathlib import Path

from stbench.report.gate import gate
from stbench.store.results import read_results
from tests.helpers import stbench

REF = Path(__file__).parent.parent / "results" / "ref-cpu2-cnn-strain-epochs"  # 3 repeats per cell


def _slower(folder: Path, factor: float) -> None:
    path = folder / "runs.csv"
    rows = list(csv.DictReader(path.open()))
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
    assert "REGRESSION cnn-strain cpu single" in proc.stdout and "30.0% worse, significant" in proc.stdout
    same = stbench("gate", REF, REF)
    assert same.returncode == 0 and "0 regression(s) in 3 comparison(s)" in same.stdout


def test_a_worse_median_that_is_not_significant_is_no_regression(tmp_path):
    base = read_results(REF)
    new = [dict(r) for r in base]
    for r in new:  # one repeat per cell 30% slower: the median moves, the intervals overlap
        if r["repeat"] == "0":
            r["wall_s"] = str(float(r["wall_s"]) * 1.3)
    verdicts = gate(base, new)
    assert len(verdicts) == 3 and not any(v.regression for v in verdicts)
    faster = gate(base, [{**r, "wall_s": str(float(r["wall_s"]) / 1.3)} for r in base])
    assert not any(v.regression for v in faster) and all(v.change < 0 for v in faster)


def test_a_cell_that_no_longer_ends_ok_is_a_regression():
    base = read_results(REF)
    new = [{**r, "status": "failed", "wall_s": ""} if r["epochs"] == "1" else r for r in base]
    bad = [v for v in gate(base, new) if v.regression]
    assert len(bad) == 1 and "ended failed" in bad[0].note


def test_run_all_plans_one_study_per_registered_workload():
    proc = stbench("run", "--all", "--smoke", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    for name in ("cnn-strain", "dcrnn-pems", "lstm-era5", "stnn"):
        assert f"# cell 1/1: {name} cpu single" in proc.stdout
    refused = stbench("run", "--all", "cnn-strain")
    assert refused.returncode == 2 and "needs one of" in refused.stderr

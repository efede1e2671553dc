"""The engine on real child processes: status rows, DDP, resume after SIGKILL."""

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stbench.plan.planner import Request, plan_new
from stbench.runner import envinfo, study
from stbench.store.files import read_runs
from stbench.store.manifest import write_manifest


def runs(folder: Path) -> list[dict]:
    return read_runs(folder)


def plan(tmp_path, workload, **kw):
    return plan_new(
        Request(workload, smoke=True, out=tmp_path, **{k: tuple(v) for k, v in kw.items()}),
        envinfo.collect(),
    )


def execute(p, timeout=None):
    return study.run_study(p, envinfo.collect(), timeout, interval=0.2)


def test_failure_rows_and_the_matrix_goes_on(tmp_path):
    p = plan(tmp_path, "faulty", sets=["fault=raise,oom,hang,none"])
    rows = execute(p, timeout=6)  # the hang's wait: the other three end in a second or two
    by_fault = {r.params["fault"]: r for r in rows}
    assert by_fault["raise"]["status"] == "failed"
    assert by_fault["raise"]["reason"] == "RuntimeError: injected failure in build"
    assert by_fault["oom"]["status"] == "oom"
    assert "can't allocate memory" in by_fault["oom"]["reason"]
    assert by_fault["hang"]["status"] == "timeout"
    assert by_fault["hang"]["reason"] == "exceeded --timeout 6 s; process tree killed"
    assert by_fault["none"]["status"] == "ok"
    assert len(runs(p.folder)) == 4
    assert (p.folder / "logs" / f"{p.cells[0].run_id}.log").exists()


def test_nan_loss_is_diverged(tmp_path):
    p = plan(
        tmp_path, "cnn-strain", sets=["lr=1e30", "n_samples=512"], epochs=[2], batch_sizes=[64]
    )
    (row,) = execute(p)
    assert row["status"] == "diverged"
    assert row["reason"].startswith("non-finite loss")


@pytest.mark.slow
def test_cuda_without_gpu_is_a_skipped_row(tmp_path):
    p = plan(tmp_path, "faulty", devices=["cpu", "cuda"])
    rows = execute(p)
    assert [r["status"] for r in rows] == ["ok", "skipped"]
    assert rows[1]["reason"].startswith("cuda requested, but no GPU is visible")


@pytest.mark.slow
def test_ddp_two_process_gloo_cell(tmp_path):
    p = plan(
        tmp_path,
        "cnn-strain",
        strategies=["ddp"],
        nprocs=[2],
        epochs=[1],
        batch_sizes=[32],
        sets=["n_samples=1024"],
    )
    (row,) = execute(p, timeout=240)
    assert row["status"] == "ok", row["reason"]
    assert row["world_size"] == 2 and row["global_batch_size"] == 64
    assert row["sync_s"] > 0  # gloo all-reduce is measured
    assert row["samples_per_s"] > 0 and row["val_value"] < row["naive_baseline"]


def test_resume_after_sigkill_of_the_parent(tmp_path):
    p = plan(tmp_path, "faulty", epochs=[1, 2], sets=["fault=none"], batch_sizes=[8, 16])
    write_manifest(p.folder, p.manifest)
    script = (
        "import sys; from pathlib import Path; from stbench.plan.planner import plan_resume;"
        "from stbench.runner import envinfo, study; env = envinfo.collect();"
        "study.run_study(plan_resume('faulty', Path(sys.argv[1]), env), env)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(p.folder)], stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(_ids(p.folder)) < 2:
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)  # mid-matrix, possibly mid-write
    parent.wait()
    before = _ids(p.folder)
    assert 2 <= len(before) < len(p.cells)
    finish = subprocess.run(
        [sys.executable, "-c", script, str(p.folder)], capture_output=True, text=True
    )
    assert finish.returncode == 0, finish.stderr[-2000:]
    after = [r["run_id"] for r in runs(p.folder)]
    assert sorted(after) == sorted(c.run_id for c in p.cells)  # exactly one row per cell
    assert after[: len(before)] == before  # earlier rows kept as they were
    with open(p.folder / "epochs.csv") as f:
        epoch_ids = [r["run_id"] for r in csv.DictReader(f)]
    expected = {c.run_id: c.epochs for c in p.cells}
    assert {
        i: epoch_ids.count(i) for i in set(epoch_ids)
    } == expected  # no orphan or duplicate epochs


def _ids(folder):
    try:
        return [r["run_id"] for r in read_runs(folder)]
    except Exception:
        return []

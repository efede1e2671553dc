"""The Slurm launchers against a real Slurm (`.ci/slurm-single-host.sh start`: two slurmd nodes on
this host). Skipped without one; `STBENCH_SLURM=1` (CI) makes a missing Slurm fail them.

    sudo .ci/slurm-single-host.sh start && python -m pytest -q -m slurm
"""

import csv
import datetime as dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import stbench

pytestmark = pytest.mark.slurm
EXE = str(Path(sys.executable).parent / "stbench")
STUDY = (
    "--strategy",
    "ddp",
    "--nproc",
    "1",
    "--nnodes",
    "1",
    "2",
    "--epochs",
    "1",
    "--timeout",
    "300",
)


@pytest.fixture
def out(tmp_path) -> Path:
    """The --out folder (tmp_path itself also holds the test's data cache)."""
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


def _rows(folder: Path) -> list[dict]:
    with open(folder / "runs.csv") as f:
        return list(csv.DictReader(f))


def _jobs(folder: Path) -> dict:
    try:
        return {k: v["job_id"] for k, v in json.loads((folder / "jobs.json").read_text()).items()}
    except (OSError, ValueError):
        return {}


def _accounted(since: str) -> list[tuple[str, str, str]]:
    """(job id, name, state) of every job Slurm's accounting has since `since`."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobID,JobName,State"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line.strip()]


def _only_folder(out: Path) -> Path:
    (folder,) = out.iterdir()
    return folder


def _wait_for(predicate, timeout=180.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_slurm_launcher_runs_a_study_one_job_per_cell(out):
    since = dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    stbench(
        "run",
        "cnn-strain",
        "--smoke",
        *STUDY,
        "--set",
        "threads=1",
        "--launcher",
        "slurm",
        "--out",
        out,
        check=True,
        timeout=600,
    )
    folder = _only_folder(out)
    rows = _rows(folder)
    assert [(r["status"], r["nodes"], r["world_size"], r["launcher"]) for r in rows] == [
        ("ok", "1", "1", "slurm"),
        ("ok", "2", "2", "slurm"),
    ], [r["reason"] for r in rows]
    jobs = _jobs(folder)
    assert jobs == {r["run_id"]: r["job_id"] for r in rows} and len(set(jobs.values())) == 2
    states = {job: state for job, _, state in _accounted(since)}
    assert [states[j] for j in jobs.values()] == ["COMPLETED", "COMPLETED"]
    hosts = rows[1]["node_hosts"].split(",")
    assert len(set(hosts)) == 2  # rank 0 and rank 1 ran on the job's two nodes
    assert float(rows[1]["sync_s"]) > 0 and float(rows[1]["setup_s"]) >= 0
    assert "stbench: node 1 of job" in (folder / "logs" / f"{rows[1]['run_id']}.log").read_text()


def test_srun_launcher_inside_an_allocation(out):
    proc = subprocess.run(
        [
            "salloc",
            "-Q",
            "-N",
            "2",
            "--ntasks-per-node=1",
            EXE,
            "run",
            "cnn-strain",
            "--smoke",
            *STUDY,
            "--set",
            "threads=1",
            "--launcher",
            "srun",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = _only_folder(out)
    rows = _rows(folder)
    assert [(r["status"], r["nodes"], r["launcher"]) for r in rows] == [
        ("ok", "1", "srun"),
        ("ok", "2", "srun"),
    ], [r["reason"] for r in rows]
    steps = [r["job_id"] for r in rows]
    job = steps[0].split(".")[0]
    assert steps == [f"{job}.0", f"{job}.1"] and _jobs(folder) == {
        r["run_id"]: r["job_id"] for r in rows
    }
    assert len(set(rows[1]["node_hosts"].split(","))) == 2


@pytest.mark.slow
def test_srun_refuses_more_nodes_than_the_allocation(out):
    proc = subprocess.run(
        [
            "salloc",
            "-Q",
            "-N",
            "1",
            EXE,
            "run",
            "faulty",
            "--strategy",
            "ddp",
            "--nnodes",
            "2",
            "--launcher",
            "srun",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --nnodes 2 is more than the 1 node(s) of allocation ")
    assert proc.stderr.count("\n") == 1 and list(out.iterdir()) == []


@pytest.mark.slow
def test_killed_parent_reattaches_to_its_jobs(out):
    since = dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    argv = [EXE, "run", "faulty", *STUDY, "--launcher", "slurm", "--out", str(out)]
    parent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: any(out.iterdir()) and len(_jobs(_only_folder(out))) == 1)
    parent.send_signal(signal.SIGKILL)  # the first cell's job is queued or running
    parent.wait()
    folder = _only_folder(out)
    first = _jobs(folder)
    assert not (folder / "runs.csv").exists()
    stbench("run", "faulty", "--resume", folder, check=True, timeout=600)
    rows = _rows(folder)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["reason"] for r in rows]
    jobs = _jobs(folder)
    assert (
        sorted(jobs) == sorted(r["run_id"] for r in rows) and jobs.items() >= first.items()
    )  # re-attached
    names = [name for _, name, _ in _accounted(since)]
    assert sorted(n for n in names if n.removeprefix("stbench-") in jobs) == sorted(
        f"stbench-{r}" for r in jobs
    )


@pytest.mark.slow
def test_a_job_slurm_cancels_is_a_row_and_the_matrix_goes_on(out):
    argv = [
        EXE,
        "run",
        "faulty",
        "--set",
        "fault=hang,none",
        "--launcher",
        "slurm",
        "--timeout",
        "300",
        "--out",
        str(out),
    ]
    parent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: any(out.iterdir()) and len(_jobs(_only_folder(out))) == 1)
    (job,) = _jobs(_only_folder(out)).values()
    subprocess.run(["scancel", job], check=True)
    _, err = parent.communicate(timeout=600)
    # the matrix went on past the cancelled cell, and the exit code tells a script not every cell
    # ended ok
    assert parent.returncode == 1, err[-3000:]
    assert err.rstrip().splitlines()[-1].startswith("error: 1 of 2 cells did not end ok (1 failed)")
    hang, ok = _rows(_only_folder(out))
    assert (hang["status"], ok["status"]) == ("failed", "ok")
    assert hang["reason"].startswith(f"slurm job {job} CANCELLED by ") and hang["job_id"] == job


@pytest.mark.slow
def test_a_job_past_its_time_limit_is_a_timeout_row(out):
    stbench(
        "run",
        "faulty",
        "--set",
        "fault=hang",
        "--launcher",
        "slurm",
        "--timeout",
        "30",
        "--expect",
        "timeout",
        "--out",
        out,
        check=True,
        timeout=600,
    )
    (row,) = _rows(_only_folder(out))
    assert row["status"] == "timeout"
    assert (
        f"slurm job {row['job_id']} TIMEOUT" in row["reason"]
        and "time limit of 1 min (--timeout 30 s)" in row["reason"]
    )


def _lose_node_1(out: Path, launcher: str, salloc: tuple[str, ...] = ()) -> tuple[Path, float]:
    """A 2-node study whose first cell loses node 1's torchrun agent (SIGKILL) mid-training
    (the faulty workload's `lost`, once), the second clean; its folder and its seconds."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            *salloc,
            EXE,
            "run",
            "faulty",
            "--strategy",
            "ddp",
            "--nnodes",
            "2",
            "--set",
            "fault=lost,none",
            "--timeout",
            "300",
            "--launcher",
            launcher,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # one cell did not end ok, the other ran
    folder = _only_folder(out)
    lost, ok = _rows(folder)
    assert (lost["status"], ok["status"]) == ("failed", "ok"), lost["reason"]
    # srun's own line names the task (node 1) whose end ended the step
    assert "node 1 (" in lost["reason"] and "Slurm's task" in lost["reason"], lost["reason"]
    return folder, time.monotonic() - t0


def test_a_killed_task_ends_its_job_and_the_row_names_the_node(out):
    folder, took = _lose_node_1(out, "slurm")
    assert took < 400  # two jobs of two nodes, the first ended by its lost node, not a timeout
    assert " FAILED " in _rows(folder)[0]["reason"]
    stbench("run", "--resume", folder, check=True, timeout=600)  # a new job for the failed cell
    rows = _rows(folder)
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["reason"] for r in rows]
    assert len({r["job_id"] for r in rows}) == 2


@pytest.mark.slow
def test_a_killed_task_ends_its_srun_step_and_the_row_names_the_node(out):
    _, took = _lose_node_1(out, "srun", ("salloc", "-Q", "-N", "2", "--ntasks-per-node=1"))
    assert took < 400


def test_dask_jobqueue_slurm_cluster_runs_a_two_rank_cell(out):
    """--launcher dask with dask-jobqueue's SLURMCluster: the study asks Slurm for its workers
    (a job per worker), runs a world of one rank per worker, and closes the cluster after."""
    pytest.importorskip("dask_jobqueue")
    since = dt.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--strategy",
        "ddp",
        "--nproc",
        "2",
        "--epochs",
        "1",
        "--set",
        "threads=1",
        "--launcher",
        "dask",
        *("--dask", "cluster=slurm", "--dask", "cores=1", "--dask", "memory=2GB"),
        *("--dask", "walltime=00:10:00"),
        "--out",
        out,
        check=True,
        timeout=600,
    )
    (row,) = _rows(_only_folder(out))
    assert (row["status"], row["launcher"], row["world_size"]) == ("ok", "dask", "2"), row["reason"]
    assert float(row["sync_s"]) > 0

    def workers() -> list[str]:
        return [state.split()[0] for _, name, state in _accounted(since) if name == "dask-worker"]

    # one job per worker, cancelled when the study closed its cluster (sacct may lag a little)
    _wait_for(lambda: len(workers()) == 2 and "RUNNING" not in workers(), timeout=60)
    assert set(workers()) <= {"CANCELLED", "COMPLETED"}, workers()

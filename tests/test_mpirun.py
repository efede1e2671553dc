"""`--launcher mpirun` and backend=mpi4py: a world Open MPI's mpirun starts on this machine, whose
DDP gradient all-reduce goes through MPI (a comm hook over mpi4py) or gloo, in one study; the
planner's word where mpi4py cannot run. The worlds need Open MPI's mpirun and mpi4py (CI's
.ci/run installs Debian's openmpi-bin and the `test` extra's mpi4py); skipped without them."""

import csv
import os
import shutil
from importlib.util import find_spec

import pytest

from stbench.plan.planner import Request, plan_new
from stbench.runner import envinfo
from stbench.runner.launchers import mpirun
from stbench.runner.verdict import rank_exits
from tests.helpers import one_study, stbench

# STBENCH_MPI=1 (CI) makes a missing mpirun or mpi4py fail these tests instead of skipping them
needs_mpi = pytest.mark.skipif(
    (shutil.which("mpirun") is None or find_spec("mpi4py") is None)
    and os.environ.get("STBENCH_MPI") != "1",
    reason="needs Open MPI's mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev)",
)


def _rows(folder) -> list[dict]:
    with open(folder / "runs.csv") as f:
        return list(csv.DictReader(f))


@needs_mpi
def test_gloo_and_mpi_all_reduce_the_same_gradients_in_one_mpirun_study(tmp_path):
    folder = one_study(
        tmp_path / "out",
        "faulty",
        "--smoke",
        "--strategy",
        "ddp",
        "--nproc",
        "2",
        "--launcher",
        "mpirun",
        "--set",
        "backend=gloo,mpi4py",
    )
    rows = {r["backend"]: r for r in _rows(folder)}
    assert [(b, r["status"], r["launcher"]) for b, r in rows.items()] == [
        ("gloo", "ok", "mpirun"),
        ("mpi4py", "ok", "mpirun"),
    ], [r["reason"] for r in rows.values()]
    for r in rows.values():  # each measured its gradient sync, step by step
        assert float(r["sync_s"]) > 0 and int(r["sync_count"]) > 0
    # MPI's sum of the same gradients is gloo's: the same training
    loss = {b: float(r["final_train_loss"]) for b, r in rows.items()}
    assert loss["mpi4py"] == pytest.approx(loss["gloo"], rel=1e-5)


@pytest.mark.slow  # STBENCH_SLOW=1: mpirun's report is read in the test below without a world
@needs_mpi
def test_a_rank_that_exits_ends_the_mpirun_world_as_a_row_naming_it(tmp_path):
    out = tmp_path / "out"
    args = ("faulty", "--smoke", "--strategy", "ddp", "--nproc", "2", "--launcher", "mpirun")
    proc = stbench("run", *args, "--set", "backend=mpi4py", "--set", "fault=exit", "--out", out)
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = out.iterdir()
    (row,) = _rows(folder)
    assert row["status"] == "failed"
    assert row["reason"].startswith("rank 1 (node 0) exited with code 1 in a step's"), row["reason"]


def test_mpirun_names_the_rank_that_ended_its_job():
    """Open MPI 4's words on a rank's non-zero exit, and on a signal."""
    log = (
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[54321,1],1]\n  Exit code:    3\n"
        "mpirun noticed that process rank 0 with PID 123 on node vm exited on signal 9 (Killed)."
    )
    assert rank_exits(log) == {1: 3, 0: -9}


@pytest.mark.parametrize(
    "sets, launcher, reason",
    [
        (("backend=mpi4py",), "local", "backend mpi4py needs the world started by mpirun"),
        (("backend=mpi",), "local", "with --launcher mpirun, backend=mpi4py all-reduces"),
    ],
)
def test_where_mpi4py_cannot_run_the_cell_is_a_skipped_row_saying_why(
    tmp_path, sets, launcher, reason
):
    env = envinfo.collect()
    request = Request(
        "faulty",
        strategies=("ddp", "zero1"),
        sets=sets,
        smoke=True,
        out=tmp_path,
        launcher=launcher,
    )
    if "mpi" in env.dist_backends and sets == ("backend=mpi",):
        pytest.skip("this torch build has MPI")
    from stbench.errors import StbenchError

    with pytest.raises(StbenchError) as err:  # every cell skipped: nothing to run
        plan_new(request, env)
    assert reason in str(err.value)


def test_mpi4py_is_ddp_on_cpu_under_mpirun(tmp_path):
    env = envinfo.collect()
    plan = plan_new(
        Request(
            "cnn-strain",
            strategies=("ddp", "zero1"),
            nprocs=(2,),
            sets=("backend=mpi4py",),
            smoke=True,
            out=tmp_path,
            launcher="mpirun",
        ),
        env,
    )
    ddp, zero1 = plan.cells
    assert ddp.run_id not in plan.skips
    assert plan.skips[zero1.run_id].startswith("backend mpi4py is DDP's gradient all-reduce")
    command = mpirun.command(ddp, ["-m", "stbench.child.cell", "S", "R"], "python", 29500)
    assert command[:3] == ["mpirun", "-np", "2"]
    assert command[-1].startswith("export RANK=$OMPI_COMM_WORLD_RANK ")
    assert command[-1].endswith("; exec python -m stbench.child.cell S R")

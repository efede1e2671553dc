"""`--launcher dask` against a real Dask cluster on loopback: a `dask scheduler` and `dask worker`
processes (nannies, as Dask starts them) that the tests start and stop by PID. A cell's world is
one rank per worker; it trains as the same cell does under torchrun, a lost worker or a failed
rank ends it as a row that names the worker, and a resume completes the study."""

import csv
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from stbench.errors import StbenchError
from stbench.plan.launcher_config import Launch, make_launch
from stbench.plan.planner import Request, plan_new
from stbench.plan.spec import RunSpec
from stbench.runner import envinfo, study
from stbench.runner.launchers.dask_cluster import job_script
from stbench.runner.launchers.dask_world import rank_envs
from stbench.store.cell_result import Figures
from tests.dask_loopback import LoopbackCluster
from tests.helpers import one_study

pytest.importorskip("distributed")
EXE = str(Path(sys.executable).parent / "stbench")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LoopbackCluster(tmp_path_factory.mktemp("dask"), workers=2)
    yield c
    c.stop()


def _rows(folder, name="runs.csv") -> list[dict]:
    with open(folder / name) as f:
        return list(csv.DictReader(f))


def test_a_dask_world_trains_as_the_same_cell_under_torchrun(cluster, tmp_path):
    args = ("cnn-strain", "--smoke", "--strategy", "ddp", "--nproc", "2", "--epochs", "1")
    args += ("--set", "threads=1")
    on_dask = one_study(
        tmp_path / "dask", *args, "--launcher", "dask", "--dask", f"scheduler_file={cluster.file}"
    )
    local = one_study(tmp_path / "local", *args)
    (row,), (ref,) = _rows(on_dask), _rows(local)
    assert row["status"] == "ok", row["reason"]
    assert (row["launcher"], row["backend"], row["world_size"]) == ("dask", "gloo", "2")
    # the same cell's figures, phases and per-rank rows, whichever launcher started its ranks
    assert list(row) == list(ref)
    # every figure the ranks measure (the parent's sampling of this machine, its peaks and
    # conditions, is not taken where the ranks run elsewhere, as on Slurm)
    figures = {f.name for f in fields(Figures)} & {k for k, v in ref.items() if v != ""}
    assert figures and {k for k in figures if row[k] == ""} == set()
    assert float(row["final_train_loss"]) == pytest.approx(float(ref["final_train_loss"]), rel=0.01)
    assert [r["rank"] for r in _rows(on_dask, "ranks.csv")] == ["0", "1"]
    log = (on_dask / "logs" / f"{row['run_id']}.log").read_text()
    workers = cluster.addresses()
    assert f"==> rank 0 on worker {workers[0]} <==" in log
    assert f"==> rank 1 on worker {workers[1]} <==" in log
    manifest = json.loads((on_dask / "manifest.json").read_text())
    assert manifest["launcher"]["dask"] == {"scheduler_file": str(cluster.file)}


@pytest.mark.slow
def test_a_lost_worker_and_a_failed_rank_end_their_worlds_and_a_resume_completes(cluster, tmp_path):
    """No --dask option: the cluster is found through Dask's configuration (DASK_SCHEDULER_ADDRESS),
    as `distributed.Client()` finds it. The faulty rank (the last) kills its own worker (its
    nanny starts another), or exits mid-step; the study goes on, a resume completes it."""
    before = cluster.addresses()
    env = dict(os.environ, DASK_SCHEDULER_ADDRESS=cluster.address)
    args = ("faulty", "--smoke", "--strategy", "ddp", "--nproc", "2", "--launcher", "dask")
    run = [EXE, "run", *args, "--set", "fault=lost,exit", "--out", str(tmp_path / "out")]
    proc = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]  # not every cell ended ok
    (folder,) = (tmp_path / "out").iterdir()
    by = {json.loads(r["params"])["fault"]: r for r in _rows(folder)}
    lost, exit_ = by["lost"], by["exit"]
    assert lost["status"] == "failed"
    assert lost["reason"].startswith(f"worker {before[1]} (rank 1) lost: it left the Dask cluster")
    assert exit_["status"] == "failed"  # the study went on after the lost worker's cell
    # the rank that exited is named with its worker (the nanny's new one by now), before the
    # peer that lost it
    after = cluster.addresses()
    said = f"rank 1 (worker {after[1]}) exited with code 1 in a step's"
    assert exit_["reason"].startswith(said), exit_["reason"]
    resume = [EXE, "run", "--resume", str(folder)]
    proc = subprocess.run(resume, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(folder)
    assert [r["status"] for r in rows] == ["ok"] * 2, [r["reason"] for r in rows]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert sorted(r["run_id"] for r in rows) == sorted(c["run_id"] for c in manifest["cells"])


def test_dask_options_are_checked_and_kept_in_the_manifest():
    launch = make_launch("dask", [], None, ["cluster=pbs", "cores=4", "memory=16GB"])
    assert launch.dask_options == {"cluster": "pbs", "cores": 4, "memory": "16GB"}
    assert Launch.from_dict(json.loads(json.dumps(launch.to_dict()))) == launch
    extra = make_launch("dask", [], None, ["cluster=slurm", *["job_extra_directives=-C a"] * 2])
    assert extra.dask_options["job_extra_directives"] == ("-C a", "-C a")
    assert Launch.from_dict(extra.to_dict()) == extra
    assert "dask" not in make_launch("local", [], None).to_dict()  # other manifests as before
    for bad, said in [
        (["scheduler=tcp://a:1", "scheduler_file=f"], "give one of scheduler, scheduler_file"),
        (["cluster=yarn"], "--dask cluster='yarn' is unknown; valid: local, slurm, pbs"),
        (["cores=4"], "--dask cores=... is an option of a cluster stbench starts"),
        (["n_workers=3"], "--dask n_workers is set by stbench"),
    ]:
        with pytest.raises(StbenchError, match=said):
            make_launch("dask", [], None, bad)
    with pytest.raises(StbenchError, match="--dask options apply to --launcher dask"):
        make_launch("local", [], None, ["scheduler=tcp://a:1"])


def test_without_a_cluster_named_anywhere_the_study_is_one_line(tmp_path):
    import dask

    env = envinfo.collect()
    request = Request("faulty", strategies=("ddp",), smoke=True, out=tmp_path, launcher="dask")
    plan = plan_new(request, env)
    with dask.config.set({"scheduler-address": None}):
        with pytest.raises(StbenchError, match="--launcher dask needs a cluster: --dask sched"):
            study.run_study(plan, env)
    assert not plan.folder.exists()  # nothing written


def test_ranks_take_torchruns_variables_from_their_workers():
    spec = RunSpec("cnn-strain", "cpu", "ddp", 8, 1, world_size=3)
    workers = ["tcp://10.0.0.1:4001", "tcp://10.0.0.1:4002", "tcp://10.0.0.2:4001"]
    envs = rank_envs(spec, workers, 29400, "tcp://10.0.0.9:8786")
    assert [(e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["GROUP_RANK"]) for e in envs] == [
        ("0", "0", "2", "0"),
        ("1", "1", "2", "0"),
        ("2", "0", "1", "1"),
    ]
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"], e["WORLD_SIZE"]) for e in envs} == {
        ("10.0.0.1", "29400", "3")
    }
    assert {e["DASK_SCHEDULER_ADDRESS"] for e in envs} == {"tcp://10.0.0.9:8786"}
    assert "GLOO_SOCKET_IFNAME" not in envs[0]  # real hosts: gloo picks their interface
    loop = rank_envs(spec, ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"], 1, "s")
    assert {e["GLOO_SOCKET_IFNAME"] for e in loop} == {"lo"}


@pytest.mark.parametrize(
    "kind, account, lines",
    [
        ("slurm", "account", ["#SBATCH -p debug", "#SBATCH -A proj", "#SBATCH --cpus-per-task=4"]),
        ("pbs", "account", ["#PBS -q debug", "#PBS -A proj", "#PBS -l select=1:ncpus=4:mem="]),
        ("lsf", "project", ["#BSUB -q debug", '#BSUB -P "proj"', "#BSUB -n 4"]),
        ("sge", "project", ["#$ -q debug", "#$ -P proj"]),
    ],
)
def test_the_job_script_dask_jobqueue_would_submit(kind, account, lines):
    """What a scheduler this machine cannot run would be sent: dask-jobqueue's own script."""
    pytest.importorskip("dask_jobqueue")
    options = ["cores=4", "memory=16GB", "queue=debug", f"{account}=proj", "walltime=01:00:00"]
    script = job_script(make_launch("dask", [], None, [f"cluster={kind}", *options]))
    for line in lines:
        assert line in script, script
    assert "-m distributed.cli.dask_worker tcp://" in script and "--nthreads 4" in script


def test_dry_run_prints_pbs_job_script_and_each_ranks_command(tmp_path):
    pytest.importorskip("dask_jobqueue")
    proc = subprocess.run(
        [EXE, "run", "cnn-strain", "--strategy", "ddp", "--nproc", "2", "--launcher", "dask"]
        + ["--dask", "cluster=pbs", "--dask", "cores=8", "--dask", "memory=64GB"]
        + ["--dask", "queue=debug", "--dask", "account=proj", "--dask", "walltime=01:00:00"]
        + ["--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert out.startswith("# --launcher dask: a pbs cluster stbench starts (dask_jobqueue.")
    assert "# dask-jobqueue submits this job script 2 time(s), one worker per job:" in out
    assert "#PBS -q debug" in out and "#PBS -l walltime=01:00:00" in out
    assert "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1" in out
    assert 'MASTER_ADDR="$WORKER0_HOST" MASTER_PORT=29500' in out
    assert "python -m stbench.child.cell" in out
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.slow
def test_dask_index_trains_as_sharded_index_from_the_series_on_the_workers(cluster, tmp_path):
    """dcrnn-pems' dask-index: the series persisted on the workers, each rank's part on its
    own; its windows are sharded-index's, so the training is the same, and the data per rank
    is its worker's share of the series (Dask's count), the whole series on the cluster."""
    folder = one_study(
        tmp_path / "out",
        "dcrnn-pems",
        "--smoke",
        *("--strategy", "ddp", "--nproc", "2", "--epochs", "1"),
        *("--set", "batching=dask-index,sharded-index"),
        *("--launcher", "dask", "--dask", f"scheduler_file={cluster.file}"),
        timeout=600,
    )
    rows = {json.loads(r["params"])["batching"]: r for r in _rows(folder)}
    on_dask, sharded = rows["dask-index"], rows["sharded-index"]
    assert (on_dask["status"], sharded["status"]) == ("ok", "ok"), on_dask["reason"]
    loss = float(on_dask["final_train_loss"])
    assert loss == pytest.approx(float(sharded["final_train_loss"]), rel=1e-6)
    whole, part = float(on_dask["x.dask_cluster_mb"]), float(on_dask["data_mb"])
    steps, sensors = 600, 325  # the smoke preset's series: float32 (time, sensors)
    assert whole == pytest.approx(steps * sensors * 4 / 2**20)
    assert 0.3 * whole < part < 0.7 * whole  # rank 0's worker holds about half of it


def test_dask_index_without_a_cluster_says_how_to_give_one():
    import dask

    from stbench.workloads.dcrnn_pems import dask_series

    with dask.config.set({"scheduler-address": None}):
        with pytest.raises(RuntimeError, match="batching=dask-index reads its series from a Dask"):
            dask_series.client()


def test_a_local_cluster_only_when_asked_for_by_name(tmp_path):
    """--dask cluster=local: Dask's LocalCluster, a worker per rank of the largest world, its
    processes closed with the study's connection."""
    from stbench.runner.launchers import dask_cluster

    launch = make_launch("dask", [], None, ["cluster=local"])
    cluster = dask_cluster.connect(launch, 2, tmp_path)
    try:
        assert len(cluster.workers()) == 2 and cluster.where.startswith("a local cluster")
    finally:
        cluster.close()
    assert cluster.owned.status.name == "closed"


def test_a_cell_the_cluster_has_too_few_workers_for_is_a_failed_row(tmp_path, monkeypatch):
    """Workers lost since the study began and not replaced: the cell's row says so, and the
    study's connection stays open for the next cell."""
    from stbench.runner.launchers import dask_cluster, dask_world
    from stbench.runner.processes import CellJob

    class OneWorker:
        where = "the scheduler at tcp://10.0.0.9:8786"
        closed = False

        def workers(self):
            return ["tcp://10.0.0.1:4001"]

        def close(self):
            self.closed = True

    monkeypatch.setattr(dask_cluster, "CONNECT_S", 0.2)
    spec = RunSpec("cnn-strain", "cpu", "ddp", 8, 1, world_size=2, run_id="abc")
    session = OneWorker()
    outcome = dask_world.run_cell(CellJob(spec, tmp_path, session=session))
    assert outcome.result.status == "failed"
    assert outcome.result.reason == (
        "--launcher dask: the scheduler at tcp://10.0.0.9:8786 has 1 worker(s) after 0.2 s; "
        "this cell needs 2 (one rank per worker)"
    )
    assert not session.closed

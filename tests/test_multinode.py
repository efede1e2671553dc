"""Multi-node worlds on this machine (torchrun agents over loopback), distributed backends as an
axis, and a SIGKILLed parent of a multi-node study: real processes, real torch.distributed."""

import csv
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stbench.plan.planner import Request, plan_new
from stbench.runner import envinfo, study
from stbench.store.files import read_runs
from stbench.store.manifest import write_manifest
from tests.helpers import stbench


def _study(out: Path, *args) -> Path:
    stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--strategy",
        "ddp",
        "--epochs",
        "1",
        *args,
        "--out",
        out,
        check=True,
    )
    (folder,) = out.iterdir()
    return folder


def _rows(folder: Path, name: str) -> list[dict]:
    with open(folder / name) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_two_loopback_nodes_train_like_one_node_of_two(tmp_path):
    two_nodes = _study(tmp_path / "a", "--nproc", "1", "--nnodes", "2")
    one_node = _study(tmp_path / "b", "--nproc", "2", "--nnodes", "1")
    (row,) = _rows(two_nodes, "runs.csv")
    assert row["status"] == "ok", row["reason"]
    assert (row["nodes"], row["nproc_per_node"], row["world_size"]) == ("2", "1", "2")
    assert (row["launcher"], row["backend"]) == ("local", "gloo")
    assert float(row["sync_s"]) > 0 and int(row["sync_count"]) > 0
    host = socket.gethostname()
    assert (
        row["node_hosts"] == f"{host},{host}"
    )  # one agent per emulated node, both on this machine
    ranks = _rows(two_nodes, "ranks.csv")  # every rank's own phases, the slowest one's in the row
    assert [(r["rank"], r["node"]) for r in ranks] == [("0", "0"), ("1", "1")]
    (slowest,) = [r for r in ranks if r["reported"] == "True"]
    assert float(slowest["compute_s"]) == pytest.approx(float(row["compute_s"]))
    (other,) = _rows(one_node, "runs.csv")
    assert (other["nodes"], other["nproc_per_node"], other["world_size"]) == ("1", "2", "2")
    assert other["node_hosts"] == host
    # The same ranks see the same shards from the same seed, and gloo sums the same gradients:
    # where the ranks' processes were started must not change what they learn.
    loss = [float(e["train_loss"]) for e in _rows(two_nodes, "epochs.csv")]
    assert loss == pytest.approx(
        [float(e["train_loss"]) for e in _rows(one_node, "epochs.csv")], rel=1e-6
    )
    manifest = json.loads((two_nodes / "manifest.json").read_text())
    assert manifest["launcher"] == {"kind": "local", "slurm": {}} and manifest["matrix"][
        "nnodes"
    ] == [2]


@pytest.mark.slow
def test_backend_this_torch_lacks_is_a_skipped_row(tmp_path):
    env = envinfo.collect()
    if "mpi" in env.dist_backends:
        pytest.skip("this torch build has MPI")
    p = plan_new(
        Request(
            "faulty",
            strategies=("ddp",),
            sets=("backend=gloo,mpi", "bucket_cap_mb=1"),
            smoke=True,
            out=tmp_path,
        ),
        env,
    )
    rows = study.run_study(p, env, timeout=240, interval=0.2)
    assert [(r["backend"], r["status"]) for r in rows] == [("gloo", "ok"), ("mpi", "skipped")], (
        rows[0]["reason"]
    )
    assert rows[1]["reason"].startswith(
        "backend mpi is not available in this torch build "
        "(torch.distributed.is_mpi_available() is False"
    )
    assert rows[0].params["bucket_cap_mb"] == 1.0


def _cmdlines_naming(folder: Path) -> list[str]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if str(folder) in line and "stbench.child.cell" in line:
            out.append(line)
    return out


@pytest.mark.slow
def test_sigkilled_parent_of_a_multinode_study_resumes_cleanly(tmp_path):
    env = envinfo.collect()
    p = plan_new(
        Request(
            "faulty", strategies=("ddp",), nnodes=(2,), epochs=(1, 2), smoke=True, out=tmp_path
        ),
        env,
    )
    write_manifest(p.folder, p.manifest)
    script = (
        "import sys; from pathlib import Path; from stbench.plan.planner import plan_resume;"
        "from stbench.runner import envinfo, study; env = envinfo.collect();"
        "study.run_study(plan_resume('faulty', Path(sys.argv[1]), env), env)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(p.folder)], stderr=subprocess.DEVNULL
    )
    second = p.folder / ".cells" / p.cells[1].run_id / "group.json"
    deadline = time.time() + 240
    while time.time() < deadline and not second.exists():
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)  # the second cell's two agents are running
    parent.wait()
    assert [r["run_id"] for r in read_runs(p.folder)] == [p.cells[0].run_id]
    finish = subprocess.run(
        [sys.executable, "-c", script, str(p.folder)], capture_output=True, text=True
    )
    assert finish.returncode == 0, finish.stderr[-2000:]
    rows = read_runs(p.folder)
    assert [r["run_id"] for r in rows] == [
        c.run_id for c in p.cells
    ]  # one row per cell, none twice
    assert all(r["status"] == "ok" and r["nodes"] == 2 for r in rows), [r["reason"] for r in rows]
    assert _cmdlines_naming(p.folder) == []  # the killed parent's agents did not outlive the resume


def test_leftovers_of_a_dead_parent_are_killed_and_nothing_else(tmp_path):
    """What a SIGKILLed parent leaves of a cell (its agents, and torchrun's ranks, each in a
    session of its own) is killed when the cell starts again; a process that does not name the
    cell's spec is not, whatever its group."""
    from stbench.plan.spec import RunSpec
    from stbench.runner.processes import CellJob
    from stbench.runner.watch import kill_leftovers

    cell = CellJob(RunSpec("faulty", "cpu", "ddp", 8, 1, world_size=2, nodes=2), tmp_path)
    cell.prepare()
    sleep = "import sys, time; time.sleep(120)"
    agent = subprocess.Popen([sys.executable, "-c", sleep, str(cell.spec_path)], process_group=0)
    rank = subprocess.Popen(
        [sys.executable, "-c", sleep, str(cell.spec_path)], start_new_session=True
    )
    bystander = subprocess.Popen(
        [sys.executable, "-c", sleep, "unrelated"], process_group=agent.pid
    )
    try:
        (cell.work / "group.json").write_text(
            json.dumps({"host": socket.gethostname(), "pids": [agent.pid]})
        )
        kill_leftovers(cell.work, cell.spec_path)
        # gone long before their 120 s sleep ends (the sweep may reap them itself: no exit code to
        # read)
        assert not psutil.pid_exists(agent.pid) or agent.poll() is not None
        assert not psutil.pid_exists(rank.pid) or rank.poll() is not None
        assert bystander.poll() is None
    finally:
        for p in (agent, rank, bystander):
            p.kill()
            p.wait()

"""Warm cells: a single-process cell forked from a server that imported torch, the
cells' modules and the workloads once; a cell whose environment a fork cannot give starts fresh."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stbench.runner import warm
from stbench.runner.watch import kill_leftovers, started
from tests.helpers import one_study

# every way torch could ask CUDA something while the server imports: each one fails the import
ASKS_CUDA = """
import torch

def asked(*args, **kwargs):
    raise RuntimeError("the warm server asked CUDA something")

for name in ("is_available", "device_count", "init", "_lazy_init", "current_device"):
    setattr(torch.cuda, name, asked)
if hasattr(torch._C, "_cuda_getDeviceCount"):  # a CUDA build: the driver's own count
    torch._C._cuda_getDeviceCount = asked
import stbench.child.preload
print("imported")
"""


def test_the_server_imports_everything_without_asking_cuda_anything():
    done = subprocess.run([sys.executable, "-c", ASKS_CUDA], capture_output=True, text=True)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-2000:]


def test_a_single_cell_is_forked_from_the_server_and_its_timeline_starts_at_its_launch(tmp_path):
    folder = one_study(tmp_path / "out", "cnn-strain", "--smoke", "--epochs", "1")
    (log,) = (folder / "logs").glob("*.log")
    lines = log.read_text().splitlines()
    assert lines[0].startswith(warm.FORKED)
    timeline = next(ln for ln in lines if "phases first entered" in ln)
    first = float(timeline.split("starting ")[1].split(",")[0])
    assert 0 <= first < 1.0, timeline  # counted from the launch, not a whole-second start time


@pytest.mark.slow
def test_a_world_of_several_processes_keeps_torchrun(tmp_path):
    folder = one_study(
        tmp_path / "out", "cnn-strain", "--smoke", "--epochs", "1", "--strategy", "ddp",
        "--nproc", "2",
    )  # fmt: skip
    for log in (folder / "logs").glob("*.log"):
        assert warm.FORKED not in log.read_text()


def test_only_what_is_read_after_the_fork_may_differ_from_the_servers_environment():
    server = {"PATH": "/bin", "PYTHONPATH": "/a"}
    assert warm.compatible({**server, "STBENCH_THREADS": "1", "STBENCH_LAUNCHED": "1.0"}, server)
    assert warm.compatible({**server, "CUDA_VISIBLE_DEVICES": "1"}, server)
    assert not warm.compatible({**server, "LD_PRELOAD": "libjemalloc.so.2"}, server)
    assert not warm.compatible({**server, "PYTHONPATH": "/b"}, server)
    assert not warm.compatible({"PATH": "/bin"}, server)  # one it lacks counts too


@pytest.mark.parametrize("fresh", [False, True], ids=["forked", "fresh"])
def test_a_module_forked_from_the_server_or_started_fresh_ends_as_a_fresh_run_would(
    monkeypatch, fresh
):
    """warm.Module (a doctor's GPU load, which a sampler watches while it runs): forked from
    the server where this process's environment fits it, its own process otherwise; either way
    its pid while it runs, and its exit code, output and errors as `subprocess.run` gives."""
    import psutil

    if fresh:
        monkeypatch.setenv("STBENCH_WARM", "0")
    timeit = [sys.executable, "-m", "timeit", "-n", "1", "-r", "1"]
    running = warm.Module([*timeit, "import time; time.sleep(0.5)"])
    assert (psutil.Process(running.pid).ppid() == os.getpid()) == fresh
    done = running.result(timeout=60)
    assert done.returncode == 0 and "1 loop" in done.stdout and done.stderr == "", done
    failed = warm.run_module([*timeit, "1/0"], timeout=60)
    assert failed.returncode == 1 and "ZeroDivisionError" in failed.stderr, failed
    with pytest.raises(subprocess.TimeoutExpired):
        warm.Module([*timeit, "import time; time.sleep(30)"]).result(timeout=0.5)


def test_a_forked_cell_an_earlier_parent_left_running_is_killed_by_pid_and_start_time(tmp_path):
    log = tmp_path / "sleeper.log"
    cell = warm.start_cell(
        [sys.executable, "-m", "tests.sleeper"], {**__import__("os").environ}, log
    )
    work = tmp_path / "work"
    work.mkdir()
    import json
    import socket

    (work / "group.json").write_text(
        json.dumps(
            {"host": socket.gethostname(), "pids": [cell.pid], "started": started([cell.pid])}
        )
    )
    kill_leftovers(work, tmp_path / "spec.json")
    assert cell.wait() is not None and cell.poll() < 0  # ended by a signal


def test_a_forked_cell_starts_processes_as_a_fresh_one_would(tmp_path):
    """multiprocessing gives a process its forkserver started the forkserver's start method; a
    DataLoader's workers started so outlived a cell that ends by os._exit (each left a server and
    its workers running). A forked cell has the platform's, as `python -m` has."""
    fresh = subprocess.run(
        [sys.executable, "-m", "tests.start_method"], capture_output=True, text=True, check=True
    )
    log = tmp_path / "cell.log"
    cell = warm.start_cell(
        [sys.executable, "-m", "tests.start_method"], dict(__import__("os").environ), log
    )
    assert cell.wait() == 0
    said = log.read_text().splitlines()
    assert said[0].startswith(warm.FORKED) and said[1:] == fresh.stdout.split()


def test_a_step_measured_in_the_parent_leaves_its_later_cells_warm(monkeypatch):
    """The GPU acceptance measures a step's anatomy in its own process between steps; torch
    then sets TORCHINDUCTOR_CACHE_DIR in that process's environment (the first time anything in
    a process asks inductor for its cache: shown in a fresh process, since an earlier test may
    have asked in this one), which made every later cell of the H200 run start a fresh process.
    torch reads it only then, never at import, so a cell forked with it is the cell a fresh
    start makes."""
    code = (
        "import os\n"
        "from stbench.child.anatomy import measure\n"
        "from stbench.runner.predictions import SMALL_BATCHES\n"
        "from tests.helpers import preset_params\n"
        "measure('cnn-strain', preset_params('cnn-strain'), SMALL_BATCHES)\n"
        "print(os.environ.get('TORCHINDUCTOR_CACHE_DIR', ''))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    fresh = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    cache = fresh.stdout.strip().splitlines()[-1]
    assert cache  # what torch set, the cause
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    server = dict(os.environ)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", cache)
    assert warm.compatible(dict(os.environ), server)


@pytest.mark.parametrize(
    "workload, imported", [("lstm-era5", "True True"), ("cnn-strain", "False False")]
)
def test_a_command_about_a_workload_forks_its_cells_with_the_readers_it_preloads(
    tmp_path, workload, imported
):
    """lstm-era5 names xarray and dask.array as its preload (a process's first build spent
    ~1.5 s importing its readers): the server of a command about it imports them before any
    fork; a command about another workload does not pay for them."""
    code = (
        "import os, sys\n"
        "from stbench.runner import warm\n"
        f"warm.start_server({workload!r})\n"
        "cell = warm.start_cell([sys.executable, '-m', 'tests.preloaded', 'xarray', "
        "'dask.array'], dict(os.environ), sys.argv[1])\n"
        "sys.exit(cell.wait())\n"
    )
    log = tmp_path / "cell.log"
    subprocess.run([sys.executable, "-c", code, str(log)], check=True, timeout=120)
    said = log.read_text().splitlines()
    assert said[0].startswith(warm.FORKED) and said[1] == imported

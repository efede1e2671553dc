"""Threads chosen, contention caught: the thread count is a choice the row records
with its reason, the load is checked before each cell, and a cell whose cores other processes
took is marked in its row."""

import subprocess
import sys
from collections import namedtuple

import pytest

from stbench.child import cpu
from stbench.contract import TrainerParams
from stbench.plan.threads import ThreadChoice, busy_cores, choose
from stbench.report.judge import noise_flags
from stbench.runner.study import busy_threads
from stbench.store import host
from stbench.store.conditions import conditions, contention, others_cores
from stbench.store.files import read_runs
from stbench.store.rows import run_of
from tests.helpers import stbench


def test_threads_given_are_exactly_that_and_auto_is_physical_cores_less_busy_ones():
    assert choose(3, 8, 5.0) == ThreadChoice(3, "threads=3 given")
    assert choose(0, 2, 0.1, window_s=0.5).threads == 2
    quiet = choose(0, 2, 0.1, window_s=0.5).why
    assert "none busy (other processes used 0.10 cores over 0.5 s" in quiet
    one = choose(0, 2, 0.97, window_s=0.5)  # the case: one other core busy
    assert one.threads == 1 and one.why.startswith("auto: 2 physical cores less 1 busy, at least 1")
    assert choose(0, 2, 2.0).threads == 1  # every core busy: still one thread
    assert choose(0, 16, 3.0, ranks=2).threads == 6  # 13 free cores shared by two ranks
    assert "shared by 2 ranks" in choose(0, 16, 3.0, ranks=2).why
    unchecked = choose(0, 8, None, ranks=4)
    assert unchecked.threads == 2 and "the machine's load was not checked" in unchecked.why
    assert [busy_cores(u, 4) for u in (0.0, 0.49, 0.5, 1.6, 9.0)] == [0, 0, 1, 2, 4]


def test_other_processes_cpu_is_the_machines_busy_time_less_our_own():
    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    t0 = Times(100, 0, 50, 1000, 5, 0, 0, 0, 10, 0)
    t1 = Times(100.8, 0, 50.4, 1000.6, 5.1, 0, 0, 0.1, 10.8, 0)  # 1.3 core-s busy over 1 s
    assert others_cores(t0, t1, 2.0, 2.3, 1.0) == pytest.approx(1.0)  # 0.3 of it was ours
    assert others_cores(t0, t0, 0.0, 0.5, 1.0) == 0.0  # never negative


def _topology(root, cpus):
    for cpu_id, (package, core) in cpus.items():
        topo = root / f"cpu{cpu_id}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core}\n")


def test_physical_cores_count_hyperthreads_once_and_binding_takes_one_cpu_per_core(tmp_path):
    # 2 packages x 2 cores x 2 hyperthreads, Linux's numbering: siblings are n and n + 4
    _topology(
        tmp_path,
        {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)},
    )
    every = list(range(8))
    assert host.physical_cores(every, str(tmp_path)) == 4
    assert host.physical_cores([0, 4], str(tmp_path)) == 1  # a taskset of one core's two threads
    assert host.first_core_cpus(3, every, str(tmp_path)) == [0, 1, 2]
    assert host.physical_cores([0, 9], str(tmp_path)) == 2  # cpu9 has no topology: its own core


def test_contended_when_others_use_more_than_the_threads_left_free():
    assert contention(50.0, True, 2, 1) == (False, None)  # one busy core beside one thread
    busy, why = contention(50.0, True, 2, 2)  # the same beside two threads: the 25x
    assert busy and why == (
        "contended: other processes used 1.00 of 2 cores on average while the "
        "cell ran; its 2 threads left 0 free"
    )
    assert contention(10.0, True, 2, 2) == (False, None)  # 0.2 cores: within the slack
    assert contention(None, False, 2, 2) == (None, None)
    state = conditions([], 2, threads=2, before_cores=1.0)  # no sample: the check before it
    assert state.contended and "just before the cell" in state.contention
    assert state.others_cpu_before_pct == 50.0


def test_a_gpu_cell_contends_only_for_the_host_threads_that_feed_the_gpu():
    # the H100's lstm-era5 cells: 16 threads on 16 cores beside 0.74 cores of other use (4.6%)
    gpu = busy_threads(16, 1, gpu=True, workers=0)
    assert gpu == 1 and busy_threads(16, 1, gpu=False, workers=0) == 16
    assert busy_threads(16, 2, gpu=True, workers=2) == 6  # 2 ranks, each 1 + 2 loader workers
    assert busy_threads(None, 1, gpu=True, workers=0) is None
    assert conditions([], 16, threads=16, before_cores=0.74).contended  # counted as a CPU cell
    assert not conditions([], 16, threads=gpu, before_cores=0.74, gpu=True).contended
    busy = conditions([], 16, threads=gpu, before_cores=15.5, gpu=True)
    assert busy.contended and "its 1 thread feeding the GPU left 15 free" in busy.contention


def test_a_contended_row_is_flagged_with_its_reason():
    row = {
        "status": "ok",
        "wall_s": "1.0",
        "cores": "2",
        "others_cpu_pct": "50.0",
        "contended": "True",
        "contention": "contended: other processes used 1.00 of 2 cores",
    }
    flags = {f.kind: f.reason for f in noise_flags([run_of(row)])}
    assert flags["contended"] == "contended: other processes used 1.00 of 2 cores"


def test_the_child_takes_the_parents_choice_or_makes_its_own():
    knobs = TrainerParams()
    chosen = ThreadChoice(1, "auto: 2 physical cores less 1 busy", 2, for_load=True)
    parent = chosen.env()
    assert cpu.thread_choice(knobs, 1, parent) == chosen
    assert chosen.row() == {
        "threads_why": chosen.why,
        "threads_physical": 2,
        "threads_for_load": True,
    }  # the facts as columns: no reader parses the words
    assert cpu.thread_choice(TrainerParams(threads=3), 1, parent) == ThreadChoice(
        3, "threads=3 given"
    )
    mine = cpu.thread_choice(knobs, 1, {})  # a Slurm node: no parent checked the load
    assert mine.threads == mine.physical == host.physical_cores() and not mine.for_load
    assert "not checked" in mine.why


def test_the_row_says_which_allocator_ran():
    jemalloc = "7f00-7f10 r-xp 0 08:01 12 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
    assert cpu.allocator_ran("jemalloc", None, jemalloc) == ("jemalloc", None)
    assert cpu.allocator_ran("jemalloc", None, "")[1].startswith("allocator=jemalloc was not")
    assert cpu.allocator_ran("keep", None, "") == ("glibc, thresholds fixed", None)
    assert cpu.allocator_ran("keep", "not glibc", "") == ("glibc", "not glibc")
    assert cpu.allocator_ran("system", None, "") == ("glibc", None)


@pytest.mark.skipif(host.physical_cores() < 2, reason="needs 2 cores: one to keep busy")
def test_a_cell_beside_a_busy_core_gets_fewer_threads_and_says_why(tmp_path):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        proc = stbench(
            "run",
            "cnn-strain",
            "--smoke",
            "--epochs",
            "1",
            "--set",
            "max_steps=5",
            "--set",
            "threads=0",  # auto: the smoke preset gives one thread
            "--out",
            tmp_path / "out",
            timeout=300,
        )
    finally:
        busy.kill()
        busy.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    (folder,) = (tmp_path / "out").iterdir()
    (row,) = read_runs(folder)
    physical = host.physical_cores()
    assert row["threads"] <= physical - 1  # other load can only take more cores away
    assert row["threads_why"].startswith(f"auto: {physical} physical cores less ")
    assert row["threads_physical"] == physical and row["threads_for_load"] is True
    assert row["others_cpu_before_pct"] >= 100 / row["cores"] * 0.5
    assert row["contended"] in (True, False) and row["interop_threads"]
    assert row.params["threads"] == 0  # the knob stays auto; the row says what ran


def test_the_parent_preloads_an_installed_allocator_and_skips_one_that_is_not(monkeypatch):
    from stbench.plan.spec import RunSpec
    from stbench.runner import hostprep

    def spec(**params):
        return RunSpec("cnn-strain", "cpu", "single", 8, 1, params=tuple(sorted(params.items())))

    monkeypatch.setattr(host, "allocator_library", lambda name: f"/opt/lib{name}.so")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    prep = hostprep.prepare_host(spec(allocator="jemalloc", threads=3), window_s=0.01)
    assert prep.env["LD_PRELOAD"] == "/opt/libjemalloc.so" and prep.failure is None
    assert ThreadChoice.from_env(prep.env) == ThreadChoice(3, "threads=3 given")
    assert prep.others_cores is not None and prep.prefix == ()
    monkeypatch.setattr(host, "allocator_library", lambda name: None)
    assert hostprep.prepare_host(spec(allocator="tcmalloc"), window_s=0.01).failure.startswith(
        "allocator=tcmalloc: no tcmalloc library found (looked for libtcmalloc.so"
    )
    monkeypatch.setattr(host, "numactl", lambda: None)
    assert hostprep.prepare_host(spec(bind="numa"), window_s=0.01).failure == (
        "bind=numa: numactl is not installed (apt install numactl)"
    )
    monkeypatch.setattr(host, "numactl", lambda: "/usr/bin/numactl")
    assert hostprep.prepare_host(spec(bind="numa"), window_s=0.01).prefix == (
        "/usr/bin/numactl",
        "--cpunodebind=0",
        "--membind=0",
    )

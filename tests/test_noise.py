"""Noise flags (report.judge), one test per kind: repeats that spread, a load above the cores,
other processes, CPU steal, GPU clocks slowed; the machine's conditions summed up from samples
(store.conditions); and the flags in the run's summary."""

import os
import time

from stbench.report.judge import Flag, main_measure, noise_flags, study_flags
from stbench.report.read import read_folder
from stbench.runner.nvml import GpuReader
from stbench.runner.sysmon import SystemSampler
from stbench.store.conditions import conditions
from stbench.store.rows import run_of
from tests.helpers import ROOT, frame

CELL = {
    "workload": "w",
    "device": "cpu",
    "strategy": "single",
    "world_size": "1",
    "nodes": "1",
    "batch_size": "8",
    "epochs": "1",
    "params": "{}",
    "machine_id": "m",
    "status": "ok",
    "cores": "2",
}


def texts(*walls, **columns):
    """One cell's runs.csv rows as they are read back (text)."""
    return [
        {**CELL, "run_id": f"r{i}", "repeat": str(i), "wall_s": str(w), **columns}
        for i, w in enumerate(walls)
    ]


def rows(*walls, **columns):
    """One cell's runs, typed as every reader has them (report.read)."""
    return [run_of(r) for r in texts(*walls, **columns)]


def test_repeats_whose_spread_exceeds_10_percent_of_the_mean_are_flagged_as_pyperf_words_it():
    assert noise_flags(rows(10.0, 13.0, 10.5)) == [
        Flag(
            "spread",
            "unstable: the standard deviation of wall_s (1.61) is 14% of the mean (11.17) "
            "over 3 repeats (limit 10%)",
        )
    ]
    assert noise_flags(rows(10.0, 10.4, 10.2)) == []  # 2%
    assert noise_flags(rows(10.0)) == []  # one repeat has no spread
    failed = texts(10.0, 30.0, 10.2)
    failed[1]["status"] = "failed"
    assert noise_flags([run_of(r) for r in failed]) == []  # only the ok repeats count
    # a question's rows are windows of one process, and say so
    (flag,) = noise_flags(rows(10.0, 13.0, 10.5), "wall_s", windows=True)
    assert flag.reason.endswith("over 3 windows (limit 10%)")


def test_the_main_measure_is_the_time_to_target_where_one_was_set():
    ttt = texts(10.0, 10.0, 10.0, target="0.01")
    for r, t in zip(ttt, ("5", "9", "5.5")):
        r["time_to_target_s"] = t
    ttt = [run_of(r) for r in ttt]
    assert main_measure(ttt) == "time_to_target_s" and main_measure(rows(1.0)) == "wall_s"
    missed = rows(
        10.0, 20.0, target="0.01", time_to_target_s=""
    )  # none reached it: the wall time's spread
    assert main_measure(missed) == "wall_s" and [f.kind for f in noise_flags(missed)] == ["spread"]
    assert [f.reason.split(" (")[0] for f in noise_flags(ttt)] == [
        "unstable: the standard deviation of time_to_target_s"
    ]
    assert noise_flags(ttt, "wall_s") == []


def test_a_load_average_above_the_cores_is_flagged():
    assert noise_flags(rows(10.0, load_max="3.5")) == [
        Flag("load", "busy: the load average reached 3.5 on 2 cores while it ran")
    ]
    two = texts(10.0, 10.1, load_max="1.9")
    two[1]["load_max"] = "4.25"
    two = [run_of(r) for r in two]
    assert [f.reason for f in noise_flags(two)] == [
        "busy: the load average reached 4.2 on 2 cores in 1 of 2 runs"
    ]
    assert (
        noise_flags(rows(10.0, load_max="2.0")) == []
    )  # the cell's own threads fill the cores: not busy
    # where the other processes' share was measured, it judges: a load just above the cores
    # is the cell's own threads and stbench's, not another's work
    assert noise_flags(rows(10.0, load_max="2.1", others_cpu_pct="3")) == []
    assert [f.kind for f in noise_flags(rows(10.0, load_max="3.5", others_cpu_pct="40"))] == [
        "busy"
    ]


def test_other_processes_using_the_cpus_are_flagged():
    # the row carries the share it measured: no reader sums samples
    assert [f.reason for f in noise_flags(rows(10.0, others_cpu_pct="40"))] == [
        "busy: other processes used 40% of the CPUs while it ran (limit 25%)"
    ]
    assert noise_flags(rows(10.0, others_cpu_pct="20")) == []


def test_cpu_steal_is_flagged():
    assert [f.reason for f in noise_flags(rows(10.0, 10.0, cpu_steal_pct="12"))] == [
        "busy: the hypervisor took 12% of the CPUs (steal) in 2 of 2 runs (limit 5%)"
    ]
    assert noise_flags(rows(10.0, cpu_steal_pct="1")) == []


def test_gpu_clocks_slowed_by_heat_or_power_are_flagged_with_the_reasons_nvml_named():
    samples = [
        {"gpu_throttle": m} for m in (0, 0x20, 0x20, 0x4, 0, 0, 0, 0, 0, 0x1)
    ]  # 0x1: idle, not a slowdown
    c = conditions(samples, 2)
    assert (c.gpu_throttle, c.gpu_throttle_share) == ("power cap, thermal", 0.3)
    row = rows(10.0, gpu_throttle=c.gpu_throttle, gpu_throttle_share=str(c.gpu_throttle_share))
    assert noise_flags(row) == [
        Flag(
            "throttle",
            "throttled: the GPU slowed its clocks (power cap, thermal) in up to "
            "30% of the samples while it ran",
        )
    ]
    assert noise_flags(rows(10.0, gpu_throttle="", gpu_throttle_share="0.0")) == []


def test_conditions_sum_up_a_runs_samples():
    samples = [
        {"proc_cpu_pct": 100.0, "sys_cpu_pct": 75.0, "load_1m": 1.5, "cpu_steal_pct": 2.0},
        {"proc_cpu_pct": 100.0, "sys_cpu_pct": 55.0, "load_1m": 2.5, "cpu_steal_pct": 4.0},
    ]
    c = conditions(samples, 2)
    assert (c.load_max, c.others_cpu_pct, c.cpu_steal_pct, c.gpu_throttle) == (2.5, 15.0, 3.0, None)
    assert conditions([], 2).load_max is None and conditions(samples, None).others_cpu_pct is None


def test_the_sampler_records_load_steal_and_the_gpus_slowdowns_ored():
    readers = {
        "gpu_mem_mb": lambda h: 1.0,
        "gpu_energy_mj": lambda h: 0.0,
        "gpu_throttle": lambda h: h,
    }  # a mask per GPU
    sampler = SystemSampler(os.getpid(), GpuReader([0x4, 0x20], readers), interval=0.05).start()
    time.sleep(0.3)
    sampler.stop()
    assert sampler.rows and all(
        r["gpu_throttle"] == 0x24 and r["load_1m"] >= 0 for r in sampler.rows
    )
    assert all("cpu_steal_pct" in r for r in sampler.rows)


def test_every_committed_cell_is_judged_and_the_noisy_ones_say_why():
    ref = ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-epochs"
    folder = read_folder(ref)
    flags = {e: noise_flags([r for r in folder.runs if r["epochs"] == e]) for e in (1, 2, 3)}
    assert [f.reason for f in flags[1]] == [
        "unstable: the standard deviation of wall_s (2.15) is 16% of the mean (13.29) "
        "over 3 repeats (limit 10%)"
    ]
    assert flags[2] == flags[3] == []


def test_the_runs_summary_ends_with_the_studys_finding_and_flags(capsys):
    from stbench.cli import render_run
    from stbench.report.view import view
    from tests.helpers import study_of

    runs = texts(10.0, 13.0, 10.5) + [
        {**r, "batch_size": "16", "run_id": f"b{r['repeat']}"} for r in texts(5.0, 5.1)
    ]
    runs[3]["load_max"] = "3.0"
    study = study_of(runs)
    render_run.run_summary(study, view(study), ROOT / "results" / "x")
    out = " ".join(capsys.readouterr().out.split())  # as wrapped to the terminal's width
    assert (
        out.index("┃ device")
        < out.index("Finding: ")
        < out.index(
            "! batch_size=8: unstable: the standard deviation of wall_s (1.61) is 14% of the mean"
        )
    )
    assert "! batch_size=16: busy: the load average reached 3.0 on 2 cores in 1 of 2 runs" in out


def test_a_studys_flags_name_the_first_cell_hit_and_count_the_others():
    spread = texts(10.0, 13.0, 10.5)
    other = [{**r, "batch_size": "16", "run_id": f"b{i}"} for i, r in enumerate(texts(5.0, 7.0))]
    quiet = [{**r, "batch_size": "32", "run_id": f"c{i}"} for i, r in enumerate(texts(3.0, 3.01))]
    s = frame(spread + other + quiet)
    assert study_flags(s) == [
        "batch_size=8: unstable: the standard deviation of wall_s (1.61) is 14% of the mean "
        "(11.17) over 3 repeats (limit 10%) (and 1 other cells)"
    ]
    assert study_flags(s[s["batch_size"] == 32]) == []

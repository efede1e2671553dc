"""Every command answers a bad option, value, name or path with one line on stderr and
exit 2, before anything is written (no traceback, no box, nothing left behind)."""

import pytest

from tests.helpers import in_process, stbench

MISSING = "/nonexistent/stbench-folder"
FILE = "a-file"  # made in the test's folder: a file where a folder is wanted
A_FILE = f"--out {FILE} is a file; give a folder (it is made if missing)"  # in every command

BAD = [
    # (argv, what the one line names)
    (["nope"], "No such command 'nope'"),
    (["run"], "needs one of"),
    (["run", "nope"], "unknown workload 'nope'"),
    (["run", "cnn-strain", "--batch-size", "abc"], "--batch-size"),
    (["run", "cnn-strain", "--bogus"], "No such option: --bogus"),
    (["run", "cnn-strain", "--set", "nope=1"], "unknown parameter 'nope'"),
    (["run", "cnn-strain", "--set", "threads=-1"], "threads"),
    (["run", "cnn-strain", "--device", "tpu"], "tpu"),
    (["run", "cnn-strain", "--budget", "0"], "--budget 0 must be a positive number"),
    (["run", "cnn-strain", "--timeout", "-1"], "--timeout -1 must be a positive number"),
    (["run", "cnn-strain", "--price", "cpu=abc"], "cpu"),
    (["run", "cnn-strain", "--price", "prices.txt"], "use a .toml, .json or .csv file"),
    (["run", "cnn-strain", "--launcher", "pbs"], "pbs"),
    (["run", "cnn-strain", "--expect", "great"], "--expect 'great' is not a status"),
    (["run", "--resume", MISSING], "no such result folder"),
    (["gpu-vs-cpu", "nope"], "unknown workload 'nope'"),
    (["gpu-vs-cpu", "cnn-strain", "--sizes", "abc"], "--sizes 'abc'"),
    # a value named twice, as typed or as typed to (0.1 and 1e-1): never merged without a word
    (["gpu-vs-cpu", "cnn-strain", "--sizes", "75", "75"], "--sizes: 75 is named twice"),
    (["run", "cnn-strain", "--batch-size", "64", "64"], "--batch-size: 64 is named twice"),
    (["run", "cnn-strain", "--set", "lr=0.1,1e-1"], "--set lr: 0.1 is named twice"),
    (["run", "cnn-strain", "--device", "cpu", "cpu"], "--device: cpu is named twice"),
    (["gpu-vs-cpu", "cnn-strain", "--budget", "0"], "--budget and --window are seconds"),
    (["gpu-vs-cpu", "cnn-strain", "--rounds", "1"], "--rounds 1"),
    (["gpu-vs-cpu", "cnn-strain", "--set", "noise=0.1,0.2"], "one value per parameter"),
    (["gpu-vs-cpu", "cnn-strain", "--device", "tpu"], "--device 'tpu' is not a device"),
    (["gpu-vs-cpu", "--resume", MISSING], "no such result folder"),
    (["gpu-vs-cpu", "cnn-strain", "--budget", "1"], "--budget 1: too small to measure 4 sizes"),
    (["run", "cnn-strain", "--budget", "1"], "--budget 1: too small to measure 1 cells twice"),
    (["tune", "cnn-strain", "--budget", "1"], "--budget 1: too small to search any lever"),
    (["tune", "nope"], "unknown workload 'nope'"),
    (["tune", "cnn-strain", "--rounds", "1"], "--rounds 1"),
    (["tune", "cnn-strain", "--set", "nope=1"], "unknown parameter 'nope'"),
    (["tune", "cnn-strain", "--batch-size", "0"], "--batch-size 0 must be a positive integer"),
    (["tune", "--resume", MISSING], "no such result folder"),
    (["run", "--all", "--set", "nope=1"], "unknown parameter 'nope'"),
    (["profile", "nope"], "unknown workload 'nope'"),
    (["profile", "cnn-strain", "--steps", "0"], "--steps 0"),
    (["compare", MISSING], MISSING),
    (["compare", MISSING, "--out", FILE], A_FILE),
    (["report", MISSING], MISSING),
    (["report", MISSING, "--out", FILE], A_FILE),
    (["run", "cnn-strain", "--smoke", "--out", FILE], A_FILE),
    (["gpu-vs-cpu", "cnn-strain", "--smoke", "--budget", "30", "--out", FILE], A_FILE),
    (["tune", "cnn-strain", "--smoke", "--budget", "30", "--out", FILE], A_FILE),
    (["profile", "cnn-strain", "--smoke", "--out", FILE], A_FILE),
    (["doctor", "--quick", "--out", FILE], A_FILE),
    (["gate", MISSING, MISSING], MISSING),
    (["list", "nope"], "unknown workload 'nope'"),
    (["doctor", "--device", "tpu"], "tpu"),
    (["data", "prepare", "nope"], "unknown workload 'nope'"),
    (["env", "--bogus"], "No such option: --bogus"),
]


@pytest.mark.parametrize("argv,said", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_bad_input_is_one_line_and_exit_2_and_nothing_written(
    argv, said, tmp_path, monkeypatch, capsys
):
    """The console script's own entry point in this process (a process each would import
    stbench afresh, ~1.2 s a case); the console script itself below."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)  # as in a pipe, whatever the terminal
    (tmp_path / FILE).write_text("")
    code, _, err = in_process(capsys, *argv)
    assert code == 2, err[-2000:]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
    assert said in lines[0] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE]  # nothing written


# the console script as a user runs it, in a pipe: a command, a workload and a data source
AS_TYPED = [BAD[0], BAD[2], (["run", "lstm-era5", "--set", "data=/no/such.nc"], "/no/such.nc")]


@pytest.mark.parametrize(
    "argv,said", AS_TYPED, ids=lambda x: " ".join(x) if isinstance(x, list) else ""
)
def test_the_console_script_says_a_bad_input_in_one_line_and_exits_2(argv, said, tmp_path):
    proc = stbench(*argv, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


# Bad inputs that need no machine to be told, in the commands that take an inventory (it waits
# for the cells' server to import torch, ~1.5-3 s): refused before it is taken.
BEFORE_INVENTORY = [
    (["run", "cnn-strain", "--set", "threads=-1"], "threads"),
    (["run", "cnn-strain", "--device", "cpu", "cpu"], "--device: cpu is named twice"),
    (["run", "--all", "--set", "nope=1"], "unknown parameter 'nope'"),
    (["run", "--resume", MISSING], "no such result folder"),
    (["run", "cnn-strain", "--smoke", "--out", FILE], A_FILE),
    (["profile", "cnn-strain", "--steps", "0"], "--steps 0"),
    (["profile", "cnn-strain", "--batch-size", "0"], "--batch-size 0"),
    (["gpu-vs-cpu", "nope"], "unknown workload 'nope'"),
    (["gpu-vs-cpu", "cnn-strain", "--sizes", "75", "75"], "--sizes: 75 is named twice"),
    (["gpu-vs-cpu", "cnn-strain", "--set", "noise=0.1,0.2"], "one value per parameter"),
    (["gpu-vs-cpu", "cnn-strain", "--device", "tpu"], "--device 'tpu' is not a device"),
    (["gpu-vs-cpu", "--resume", MISSING], "no such result folder"),
    (["gpu-vs-cpu", "cnn-strain", "--budget", "1"], "--budget 1: too small to measure 4 sizes"),
    # a budget that cannot measure twice: the least that could is told before any process runs
    (["run", "cnn-strain", "--budget", "1"], "give at least --budget 6"),
    (["tune", "cnn-strain", "--budget", "1"], "give at least --budget 18"),
    (["tune", "cnn-strain", "--set", "nope=1"], "unknown parameter 'nope'"),
    (["tune", "cnn-strain", "--batch-size", "0"], "--batch-size 0 must be a positive integer"),
    # a study's data: a missing file is told while the cells' server imports torch
    (["run", "lstm-era5", "--set", "data=/no/such.nc"], "data source /no/such.nc does not exist"),
    (["gpu-vs-cpu", "lstm-era5", "--set", "data=/no/such.nc"], "/no/such.nc does not exist"),
    (["gpu-vs-cpu", "stnn", "--set", "data=/no/such.nc"], "data file /no/such.nc does not exist"),
    (["tune", "lstm-era5", "--set", "data=/no/such.nc"], "/no/such.nc does not exist"),
]


@pytest.mark.parametrize(
    "argv,said", BEFORE_INVENTORY, ids=lambda x: " ".join(x) if isinstance(x, list) else ""
)
def test_a_bad_input_is_refused_before_the_machines_inventory(
    argv, said, tmp_path, monkeypatch, capsys
):
    from stbench.runner import envinfo, warm

    def taken():
        raise AssertionError("the inventory was taken before the input was checked")

    monkeypatch.setattr(envinfo, "inventory", taken)
    monkeypatch.setattr(warm, "start_server", lambda workload=None: None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / FILE).write_text("")
    code, _, err = in_process(capsys, *argv)
    assert code == 2, err[-2000:]
    assert err.startswith("error: ") and said in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE]  # nothing written


@pytest.mark.parametrize("signum,code", [(2, 130), (15, 143)], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_during_run_prints_the_folder_and_the_resume_line(tmp_path, signum, code):
    """SIGINT (Ctrl-C), or SIGTERM (a scheduler's time limit, `kill`, `timeout`), once a row has
    landed: exit 130 or 143, one line naming what is done and how to finish, no process of the
    running cell left (under SIGTERM it trained on alone: a 15-epoch stnn cell for 16 minutes),
    and the resume finishes the study with one row per cell. The signal is sent the moment the
    cell's group file appears: it once landed before the parent watched, and the cell lived on.
    The second cell hangs (the faulty workload's `hang`), so the signal lands while it runs
    however slow the machine is; the resume ends it by its --timeout."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from stbench.store.files import read_runs

    out = tmp_path / "out"
    argv = [sys.executable, "-m", "stbench", "run", "faulty", "--set", "fault=none,hang"]
    proc = subprocess.Popen(
        [*argv, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
        # as a terminal's Ctrl-C finds it: a suite started in a script's background (`pytest &`)
        # has SIGINT ignored, a child inherits that, and Python then never raises
        # KeyboardInterrupt (as a user's `nohup stbench run` asks)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not list(out.glob("*/runs.csv")):
            time.sleep(0.1)
        while time.monotonic() < deadline and not list(out.glob("*/.cells/*/group.json")):
            time.sleep(0.1)  # the hanging cell's processes have started
        (group,) = out.glob("*/.cells/*/group.json")
        pids = json.loads(group.read_text())["pids"]
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()  # where the signal was not obeyed: no run left behind
    (folder,) = out.iterdir()
    assert proc.returncode == code, err[-2000:]
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, f"the running cell's processes outlived the command: {alive}"
    line = next(ln for ln in err.splitlines() if ln.startswith("interrupted: "))
    assert line == (
        f"interrupted: 1 of 2 cells have their row in {folder}; "
        f"finish it: stbench run --resume {folder}"
    )
    assert [r["status"] for r in read_runs(folder)] == ["ok"]
    if signum != signal.SIGINT:
        return  # the folder is what Ctrl-C leaves: its resume is checked once
    again = stbench("run", "--resume", folder, "--timeout", "3", timeout=300)
    assert again.returncode == 1, again.stderr[-2000:]  # not every cell ended ok
    assert [r["status"] for r in read_runs(folder)] == ["ok", "timeout"]


def test_a_study_resumed_by_another_command_is_refused_naming_the_one_that_finishes_it(
    tmp_path, capsys, monkeypatch
):
    """A question's cells resumed by `run` would run as whole processes, a tune's step outside
    its tune, a tune's step as a question: one line names the command that finishes it, exit 2,
    and no file of the folder changes (gpu-vs-cpu ran a tune's step and wrote into it)."""
    import hashlib
    import shutil

    from tests.helpers import ROOT

    reference = ROOT / "results" / "reference"
    tune = shutil.copytree(reference / "ref-cpu2-cnn-strain-tune-300s", tmp_path / "tune")
    question = shutil.copytree(reference / "ref-cpu2-cnn-strain-gpu-vs-cpu", tmp_path / "q")

    def files():
        return {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*")
                if p.is_file()}  # fmt: skip

    before = files()
    cases = [
        (["gpu-vs-cpu", "--resume", tune / "04-precision"], f"stbench tune --resume {tune}"),
        (["run", "--resume", tune / "01-threads"], f"stbench tune --resume {tune}"),
        (["run", "--resume", tune], f"stbench tune --resume {tune}"),
        (["run", "--resume", question], f"stbench gpu-vs-cpu --resume {question}"),
        (["tune", "--resume", question], f"stbench gpu-vs-cpu --resume {question}"),
    ]
    from stbench.cli import main

    for argv, right in cases:
        with pytest.raises(SystemExit) as done:
            main([str(a) for a in argv])
        said = " ".join(capsys.readouterr().err.split())  # one line, however the test's width
        assert done.value.code == 2 and said.count("error:") == 1, (argv, said)
        assert said.endswith(f"finish it with: {right}"), (argv, said)
    # from inside a tune's step, `.` is a step too
    monkeypatch.chdir(tune / "01-threads")
    with pytest.raises(SystemExit) as done:
        main(["run", "--resume", "."])
    said = " ".join(capsys.readouterr().err.split())
    assert done.value.code == 2 and said.endswith(f"stbench tune --resume {tune.resolve()}"), said
    assert files() == before

"""A running cell's heartbeat: how far its training got, shown while it runs (the rank's beat
says its epochs and steps, the bar shows them, a log gets a line a minute), and its rank ending
itself when the parent that launched it was killed (a question's windows process too)."""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from rich.console import Console

from stbench.child import cell
from stbench.child.heartbeat import Heartbeat
from stbench.cli import render_run
from stbench.plan.planner import preset_params
from stbench.plan.spec import RunSpec, identify
from stbench.store.progress import Beat, cell_work, read_beats, write_beat


def beat(steps: int, per_epoch: int = 10, total: int = 30) -> Beat:
    return Beat(0, 0, 1, "vm", "a step's optimizer step", steps, steps, 0.1, False, True,
                per_epoch, total)  # fmt: skip


def test_the_words_say_the_epoch_and_the_share_done():
    assert beat(0).done_words() == ""  # set-up: no step yet
    assert beat(4).done_words() == "epoch 1/3 (13%)"
    assert beat(10).done_words() == "epoch 2/3 (33%)"
    assert beat(31).done_words() == "epoch 3/3 (100%)"  # the memory figures' extra step
    assert beat(25, total=0).done_words() == "epoch 3"  # a time budget decides the end
    assert beat(5, per_epoch=0, total=0).done_words() == ""  # a beat from before training


def test_a_cells_beat_carries_what_its_training_will_take(tmp_path):
    """Through the real trainer: 2 epochs of at most 3 steps."""
    params, _ = preset_params("cnn-strain", max_steps=3, max_eval_batches=1)
    spec = identify(
        RunSpec("cnn-strain", "cpu", "single", 32, 2, params=tuple(sorted(params.items())))
    )
    progress = Heartbeat(tmp_path, period=0.05)
    result = cell.train_cell(spec, progress=progress)
    progress.close()
    assert result.status == "ok", result.reason
    (last,) = read_beats(tmp_path).values()
    assert (last.per_epoch, last.total_steps) == (3, 6)
    assert last.done_words() == "epoch 2/2 (100%)"


class _Spec:
    run_id, device, strategy, batch_size, epochs, repeat = "c1", "cpu", "single", 32, 3, 0
    distributed, param_dict = False, {}


def test_a_log_gets_a_line_on_a_cell_still_training(tmp_path, monkeypatch):
    """Into a file the bar is lines: one when a cell ends, and while one trains past LINE_S, a
    line with its epoch, again only once LINE_S more went by."""
    shown = io.StringIO()
    monkeypatch.setattr(render_run, "err", Console(file=shown, width=200))
    monkeypatch.setattr(render_run, "LINE_S", 0.3)
    monkeypatch.setattr(render_run, "POLL_S", 0.05)
    work = cell_work(tmp_path, _Spec.run_id)
    work.mkdir(parents=True)
    write_beat(work, beat(12))
    with render_run.progress(2, 0, (), tmp_path) as (on_start, on_done):
        on_start(_Spec())
        time.sleep(0.1)
        assert shown.getvalue() == ""  # not yet a minute (here LINE_S) in
        time.sleep(1.3)  # 1.1 s of LINE_S 0.3 (and a second's cache): up to 4 lines
        on_done(_Spec(), {"status": "ok", "wall_s": 1.4})
        time.sleep(0.4)  # nothing runs: no line
    lines = shown.getvalue().splitlines()
    training = [line for line in lines if line.startswith("  [1/2]")]
    assert 2 <= len(training) <= 4, lines
    assert training[0].startswith(
        "  [1/2] cpu single batch=32 epochs=3 round 1: epoch 2/3 (40%), 0:0"
    )
    assert lines[-1].startswith("[1/2] cpu single batch=32 epochs=3 round 1: ok in 1.4 s")


def test_a_cell_ends_itself_when_its_parent_is_killed(tmp_path):
    """SIGKILL leaves the parent no time to end its cells (the OOM killer, Slurm past its
    KillWait): the cell (forked from the warm server, in a group of its own) saw no one would
    read its rows and trained on; its heartbeat thread now ends it within seconds."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "stbench", "run", "faulty", "--set", "fault=hang"]
    parent = subprocess.Popen(
        [*argv, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(out.glob("*/.cells/*/group.json")):
            time.sleep(0.1)
        (group,) = out.glob("*/.cells/*/group.json")
        time.sleep(1.0)  # its heartbeat thread is up: the cell is in its hang
        pids += json.loads(group.read_text())["pids"]
        parent.send_signal(signal.SIGKILL)
        parent.wait()

        def alive():
            return [p for p in pids if psutil.pid_exists(p) and
                    psutil.Process(p).status() != psutil.STATUS_ZOMBIE]  # fmt: skip

        until = time.monotonic() + 20
        while alive() and time.monotonic() < until:
            time.sleep(0.2)
        assert not alive(), "the cell outlived its killed parent by 20 s"
    finally:
        parent.kill()
        for pid in pids:
            if psutil.pid_exists(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow  # 14 s; the cell's own test above is the same mark read by the same rule
def test_a_questions_windows_end_when_their_parent_is_killed(tmp_path):
    """A gpu-vs-cpu question's warm process runs the windows it was given up to the study's
    deadline (600 s by default); with its parent killed outright it stops at the next one."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "stbench", "gpu-vs-cpu", "cnn-strain", "--budget", "300"]
    parent = subprocess.Popen(
        [*argv, "--sizes", "75", "--window", "2", "--out", str(out)],  # 9+ windows: 20+ s
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    held: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not held:
            rows = [r for r in out.glob("*/.windows/*/rows.jsonl") if r.stat().st_size]
            held = [p for p in psutil.process_iter() if rows and _holds(p, rows)]
            time.sleep(0.2)
        assert held, "no windows process wrote a row"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _, alive = psutil.wait_procs(held, timeout=8)  # the window it is in ends first
        assert not alive, "the windows process outlived its killed parent by 8 s"
    finally:
        parent.kill()
        for p in held:
            with contextlib.suppress(psutil.Error):
                p.kill()


def _holds(process: psutil.Process, paths) -> bool:
    try:
        return any(f.path in {str(p) for p in paths} for f in process.open_files())
    except psutil.Error:
        return False

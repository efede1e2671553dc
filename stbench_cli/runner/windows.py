"""One warm process of windows, run from the parent: started (forked from the warm server where
it can be), its rows read the moment each window ends and written to the study's runs.csv, and
whatever ends it early (a crash, the deadline passed by more than its grace, Ctrl-C) turned into
rows that say so. child/windows.py is the process's side.

A window's row is a runs.csv row of its cell (one configuration of one round): `samples_per_s`
over the window's steps on the device's clock, `train_s` those seconds, `wall_s` the window's
host seconds, `setup_s` what ran before it since the window before (the switch, a build, the
re-warm), `job_id` the process that measured it ("pid N"): rows of one process pair with rows of
another by round.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..device import parse
from ..plan.spec import RunSpec, WindowsJob
from ..store.cell_result import CellResult, Figures
from ..store.conditions import contention
from ..store.files import write_cell
from ..store.machine import EnvInfo
from ..store.progress import launch_env
from ..store.rows import Conditions, Derived, Run, RunRow, run_of
from . import warm
from .study import busy_threads, identity, machine
from .watch import kill_group

POLL_S = 0.05
GRACE_S = 10.0  # past the deadline, what a window that started in time may take to end


@dataclass(frozen=True)
class Ran:
    """What one process did: its rows (written), the windows it never reached, its timings."""

    rows: tuple[Run, ...]
    unrun: tuple[RunSpec, ...]
    seconds: float  # launch to exit
    # launch to its first timed window (its builds and warm-up included), less the data sets it
    # made and kept (contract/kept.py): a later process reads them
    startup_s: float
    broke: str = ""  # why it ended early, where it did
    refork: bool = False  # CUDA could not start after the fork: `unrun` goes to a fresh process


def run_process(
    folder: Path,
    env: EnvInfo,
    windows: Sequence[RunSpec],
    window_s: float,
    min_steps: int,
    deadline: float,
    name: str,
    on_row: Callable[[RunSpec, Run], None] = lambda spec, row: None,
    build_s: float = 0.0,
) -> Ran:
    """Run `windows` in order in one process that no window outlasts `deadline` (time.time())
    by more than GRACE_S; every window that ended is a row in runs.csv when this returns.
    `build_s`: what a compiled configuration's first window is expected to run untimed."""
    work = folder / ".windows" / name
    work.mkdir(parents=True, exist_ok=True)
    (folder / "logs").mkdir(exist_ok=True)
    job, rows_path, log = work / "job.json", work / "rows.jsonl", folder / "logs" / f"{name}.log"
    rows_path.unlink(missing_ok=True)
    job.write_text(WindowsJob(tuple(windows), window_s, min_steps, deadline, build_s).to_json())
    command = [sys.executable, "-m", "stbench.child.windows", str(job), str(rows_path)]
    launched = time.time()
    # the parent's mark: a parent killed outright, the process ends between windows
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **launch_env(launched)}
    process = _start_windows(command, environ, log)
    try:
        done, first_at, broke, refork, code = _follow_rows(
            process, rows_path, folder, env, windows, deadline, on_row
        )
    except BaseException:  # Ctrl-C, or the parent failing: the process does not outlive it
        kill_group([process.pid])
        raise
    kill_group([process.pid])  # what it left in its group (a loader's workers), if anything
    seconds = time.time() - launched
    written = {r["run_id"] for r in done}
    left = [w for w in windows if w.run_id not in written]
    if left and not broke and code not in (0, None):
        broke = f"failed: {_last_words(log)} (exit {code})"
    if left and broke and not refork:
        # the window that was running when the process ended is a row that says so
        status, _, reason = broke.partition(": ")
        reason = reason or f"its process was killed {GRACE_S:.0f} s past the study's deadline"
        row = RunRow(identity(left[0]), status, reason, machine(env))
        write_cell(folder, row, [], [])
        done.append(run_of(row.record(), str(folder)))
        on_row(left[0], done[-1])
        left = left[1:]
    startup = (first_at - launched) if first_at is not None else seconds
    return Ran(tuple(done), tuple(left), seconds, max(startup, 0.0), broke, refork)


def _follow_rows(
    process, rows_path: Path, folder: Path, env: EnvInfo, windows, deadline: float, on_row
):
    """Rows as the process writes them, until it ends (or is ended past the deadline):
    (rows, when its first window began, why it broke, whether to refork, its exit code)."""
    by_id = {w.run_id: w for w in windows}
    done: list[Run] = []
    first_at, offset, broke, refork = None, 0, "", False
    while True:
        code = process.poll()
        offset, lines = _new_lines(rows_path, offset)
        for record in lines:
            spec = by_id[record["run_id"]]
            if warm.cuda_broken(spec.device, CellResult(record["status"], record["reason"])):
                # CUDA cannot start in a forked process here: this one and every later process
                # start fresh, and this window runs again there
                warm.refuse(record["reason"])
                kill_group([process.pid])
                process.wait()
                broke, refork = "CUDA cannot start in a forked process: a fresh one", True
                break
            row = _row_of_record(spec, env, record)
            write_cell(folder, row, [], [])
            done.append(run_of(row.record(), str(folder)))
            on_row(spec, done[-1])
            if first_at is None:
                # a data set the process made and kept is read by the next one: not its start
                made = record.get("made_s") or 0.0
                first_at = time.time() - (record["figures"].get("wall_s") or 0.0) - made
        if refork or (code is not None and not lines):
            break
        if time.time() > deadline + GRACE_S and code is None:
            kill_group([process.pid])
            process.wait()
            broke = "timeout"
        time.sleep(POLL_S)
    return done, first_at, broke, refork, code


def _start_windows(command: list[str], environ: dict[str, str], log: Path):
    """The process: forked from the warm server where its environment fits, else fresh (its own
    session, so a kill reaches its loader workers too)."""
    if warm.fits(environ):
        try:
            return warm.start_cell(command, environ, log)
        except warm.Unavailable:
            pass
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _new_lines(path: Path, offset: int) -> tuple[int, list[dict]]:
    """The whole lines written past `offset` (a line being written waits for the next call)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset, []
    end = data.rfind(b"\n") + 1
    lines = [json.loads(x) for x in data[:end].splitlines() if x.strip()]
    return offset + end, lines


def _row_of_record(spec: RunSpec, env: EnvInfo, record: dict) -> RunRow:
    figures = Figures(**record["figures"])
    return RunRow(
        identity(spec),
        record["status"],
        record["reason"],
        machine(env),
        figures,
        Derived(setup_s=record.get("untimed_s"), job_id=f"pid {record['pid']}"),
        conditions=_conditions(spec, env, figures, record.get("others_cores")),
    )


def _conditions(spec: RunSpec, env: EnvInfo, figures: Figures, others: float | None):
    """Whether other processes competed for the window's cores while it was timed: the cores
    they kept busy (the child's reading) against what its threads left free, as a cell's
    samples are judged (store.conditions.contention). A tune's threads step, its windows timed
    beside a test suite, kept threads=1 at 2.74x that its confirming step found 0.92x, and no
    row said why."""
    cores = env.cores_logical
    if others is None or not cores:
        return Conditions()
    gpu = parse(spec.device).is_cuda
    threads = busy_threads(figures.threads, 1, gpu, spec.param_dict.get("workers", 0))
    contended, why = contention(others / cores * 100, True, cores, threads, gpu, "window")
    return Conditions(others_cpu_pct=others / cores * 100, contended=contended, contention=why)


def _last_words(log: Path) -> str:
    """The log's last line that names an exception (else its last line): why a process died."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    lines = [x for x in lines if not x.startswith("stbench:")]
    named = [x for x in lines if ("Error" in x or "Exception" in x) and ":" in x]
    return (named or lines or ["no output"])[-1][:300]

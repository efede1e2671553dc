"""The acceptance's loop: the steps in order against one global deadline, each verdict saved
before the next step starts.

A step starts only if its cap fits in what is left before the deadline; the first that does not
is NOT REACHED, with every step after it, and the run stops there. A step may run past its own
cap into what the steps after it will not need (time left less their caps, the extras' apart: a
default step reserves nothing for them): what an early step saves is not lost, and no later
default step loses its cap to it. After every step OUT/state.json and
OUT/summary.md are rewritten and its result folders (without profiler traces) join
OUT/results.tar.gz; a step's output goes to OUT/run.log as it runs. A later command with the
same OUT keeps the steps that passed (their folders come back out of the archive) and runs the
rest. A step that failed for a reason a second try can mend (it ran past its limit, a cell
crashed, hung or timed out) runs once more where the deadline allows it without taking a later
step's cap. The work folder is outside OUT and removed at the end.
"""

from __future__ import annotations

import shutil
import tarfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from stbench.store.files import read_runs

from . import execute, rehearsal
from .state import NOT_REACHED, State, StepRecord, write_summary
from .steps import EXTRA, Step
from .verdicts import FAIL, PASS, run_check


@dataclass(frozen=True)
class Settings:
    out: Path
    work: Path  # outside out: the steps' folders while they run
    deadline_at: float  # time.time() by which the run must end
    rehearsal: bool = False  # CUDA faked: verdicts by rehearsal.py
    slack: float = 1.0  # caps x slack (a rehearsal's CPU cells run on 2 cores, not 16)
    gpu: str = "gpu"  # the GPU's short name in the reference studies' folders (h100)


def say(text: str) -> None:
    """A line for whoever watches the command (the device tool keeps the output's tail)."""
    print(text, flush=True)


def run(steps: list[Step], s: Settings, state: State, names: list[str]) -> int:
    """Run what is not kept; 0 when every step and check of `steps` passed or is UNTESTED."""
    archive = _restore(s, state, steps)
    todo = [st for st in steps if not (st.name in state.records and state.records[st.name].passed)]
    for st in steps:
        if st not in todo:
            say(f"== {st.name}: kept from an earlier command ({state.records[st.name].detail})")
    for i, step in enumerate(todo):
        left, cap = s.deadline_at - time.time(), step.cap_s * s.slack
        if cap > left:
            for rest in todo[i:]:
                why = (
                    f"the deadline: {max(left, 0):.0f} s were left, {step.name} needs its cap "
                    f"of {cap:.0f} s"
                )
                state.records[rest.name] = StepRecord(rest.name, NOT_REACHED, why)
            say(f"== stopped before {step.name}: {state.records[step.name].detail}")
            break
        limit = min(left, max(cap, left - s.slack * reserved(step, todo[i + 1 :])))
        started = f"started {time.strftime('%H:%M:%S')}, limit {limit:.0f} s"
        write_summary(s.out, names, state, (step.name, started))
        say(f"== [{i + 1}/{len(todo)}] {step.name} (cap {cap:.0f} s, limit {limit:.0f} s)")
        state.records[step.name] = record = run_step(step, limit, s, archive)
        say(f"   {record.verdict} {step.name} in {record.seconds:.0f} s: {record.detail}")
        later = s.slack * reserved(step, todo[i + 1 :])
        why = retryable(record, s.work / step.name, s.rehearsal)
        if why and s.deadline_at - time.time() - later >= cap:
            say(f"   once more ({why})")
            first = record.detail
            limit = min(s.deadline_at - time.time(), max(cap, s.deadline_at - time.time() - later))
            record = run_step(step, limit, s, archive)
            record = replace(record, detail=f"{record.detail} (second try; the first: {first})")
            state.records[step.name] = record
            say(f"   {record.verdict} {step.name} in {record.seconds:.0f} s: {record.detail}")
        for c in record.checks:
            say(f"   {c.status} {c.name}: {c.detail}")
        write_summary(s.out, names, state)  # the summary first: state.json's step is in it
        state.save(s.out)
    state.save(s.out)
    write_summary(s.out, names, state)
    if any(archive.iterdir()):  # the folders of steps run again left it, whatever ran since
        _pack(archive, s.out / "results.tar.gz")
    mine = [state.records.get(st.name) for st in steps]
    return 0 if all(r is not None and r.passed for r in mine) else 1


def reserved(step: Step, later: list[Step]) -> int:
    """The seconds of caps a step leaves the steps after it: every one's, but a default step
    leaves none to the extras (they run in what the default run does not use: a correctness
    step past its cap, or its second try, comes before the largest sizes' cells)."""
    return sum(x.cap_s for x in later if step.part == EXTRA or x.part != EXTRA)


def run_step(step: Step, limit: float, s: Settings, archive: Path) -> StepRecord:
    folder = s.work / step.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log, t0 = s.out / "run.log", time.monotonic()
    argv = (step.rehearse_argv or step.argv) if s.rehearsal else step.argv
    line = " ".join(step.command) if step.command else "stbench " + " ".join(argv)
    with open(log, "a") as f:
        f.write(f"\n== {step.name}: {line} (limit {limit:.0f} s)\n")
    offset = log.stat().st_size
    with execute.captured(log):
        env = dict(step.env)
        code = (
            execute.program(step.command, limit, env)
            if step.command
            else execute.stbench((*argv, "--out", str(folder)), limit, env)
        )
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    verdict, detail = judge_step(code, text, folder, limit, s.rehearsal)
    checks = [c for p in step.checks for c in run_check(p.name, p.judge, folder, **dict(p.kwargs))]
    if s.rehearsal:
        checks = [rehearsal.judge_check(c) for c in checks]
    folders = _archive(step, folder, archive, s)
    return StepRecord(step.name, verdict, detail, time.monotonic() - t0, tuple(checks), folders)


RETRIED = ("failed", "hung", "timeout")  # a cell's statuses a second try may mend


def retryable(record: StepRecord, folder: Path, rehearsed: bool) -> str:
    """Why a failed step is worth a second try ('' where it is not): its command ran past its
    limit, or a cell crashed, hung or timed out (a flaky start); a check that failed on cells
    that ended ok measured what a second try would measure again."""
    if record.verdict != FAIL or rehearsed:
        return ""
    if record.detail.startswith("ran past its limit"):
        return "it ran past its limit"
    rows = [r for p in sorted(folder.glob("*/runs.csv")) for r in read_runs(p.parent)]
    bad = [r for r in rows if r["status"] in RETRIED]
    if bad:
        return f"{len(bad)} cell(s) ended {bad[0]['status']}: {bad[0].get('reason', '')[:120]}"
    return ""


def judge_step(
    code: int, text: str, folder: Path, limit: float, rehearsed: bool
) -> tuple[str, str]:
    """(PASS or FAIL, the figure or reason) of a step's command."""
    if rehearsed:
        passed, why = rehearsal.judge(code, text, folder)
        return (PASS if passed else FAIL), why
    cells = _cells(folder)
    if code == execute.TIMED_OUT:
        return FAIL, f"ran past its limit of {limit:.0f} s{cells and ' (' + cells + ')'}"
    if code != 0:
        last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "(no output)")
        return FAIL, f"exit {code}: {last.strip()[:300]}"
    return PASS, cells or "exit 0"


def _cells(folder: Path) -> str:
    """'3 of 3 cells ok' over the studies a step wrote ('' when it wrote none)."""
    rows = [r for p in sorted(folder.glob("*/runs.csv")) for r in read_runs(p.parent)]
    if not rows:
        return ""
    skipped = sum(r["status"] == "skipped" for r in rows)
    ok = sum(r["status"] == "ok" for r in rows)
    return f"{ok} of {len(rows)} cells ok" + (f", {skipped} skipped" if skipped else "")


def _restore(s: Settings, state: State, steps: list[Step]) -> Path:
    """The archive's folder: an earlier command's folders back out of OUT/results.tar.gz, less
    those of the steps that run again."""
    archive = s.work / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    packed = s.out / "results.tar.gz"
    if packed.is_file():
        with tarfile.open(packed) as tar:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.11.4+
            tar.extractall(archive, **safe)
    for step in steps:
        r = state.records.get(step.name)
        if r is not None and not r.passed:
            for name in r.folders:
                shutil.rmtree(archive / name, ignore_errors=True)
    return archive


def _archive(step: Step, folder: Path, archive: Path, s: Settings) -> tuple[str, ...]:
    """The step's result folders into the archive (a reference study under the name to commit it
    by, results/reference/ref-<gpu>-<name>), then OUT/results.tar.gz rebuilt from it."""
    doctor = sorted(p.parent for p in folder.glob("*/doctor.json"))  # doctor's own folder
    found = doctor or sorted(p.parent for p in folder.glob("*/manifest.json"))
    names = []
    for study in found:
        if step.result:
            name = f"ref-{s.gpu}-{step.result}"
        else:
            name = f"acceptance/{step.name}" + ("" if study == folder else f"/{study.name}")
        shutil.rmtree(archive / name, ignore_errors=True)
        skip = shutil.ignore_patterns(
            "trace.json", ".cells", ".windows", ".lock"
        )  # traces: tens of MB
        shutil.copytree(study, archive / name, ignore=skip)
        names.append(name)
    if names:
        _pack(archive, s.out / "results.tar.gz")
    return tuple(names)


def _pack(archive: Path, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for p in sorted(archive.iterdir()):
            tar.add(p, arcname=p.name)
    tmp.replace(path)

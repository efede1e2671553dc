"""The rehearsal's verdicts: the acceptance run on a CPU build of torch with CUDA's availability
faked (tests/fakecuda). A step passes when it reached the first operation that truly needs
CUDA, the build's own "Torch not compiled with CUDA enabled", and failed in no other way first:
every traceback in its output and its cells' logs ends in that error, every row that did not
end ok gives it as its reason (or is skipped), every failed doctor check names it, and it
appears at least once (a step that never met CUDA proves nothing about the GPU run). A check
passes when it failed for that reason alone, or judged a CPU figure (the doctor's cpu checks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from stbench.device import is_cuda
from stbench.errors import StbenchError
from stbench.runner.doctor import Check
from stbench.store.files import read_runs
from stbench.store.rows import Run

from .verdicts import FAIL, PASS

NOT_COMPILED = "Torch not compiled with CUDA enabled"
TIMED_OUT = (124, 137)  # the step ran past its limit


# a record of torch's C++ logging ("E1126 11:04:53.766000 28918 api.py:1002] failed ..."): two
# nodes' agents write into one cell log, and one's record can fall inside the other's traceback
LOG_RECORD = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")
# a traceback's last line names its exception (`torch.AcceleratorError: ...`); two ranks writing
# one log at once can leave a frame's caret line (`^^^^`) unindented, which is not an end
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(:|$)")
# torchrun's ChildFailedError box, between two rulers of "=": its lines ("Failures:") are the
# echo's message, and two nodes' agents writing one log can cut it into another's traceback
TORCHRUN_BOX = re.compile(r"^={20,}\n.*?^={20,}$", re.MULTILINE | re.DOTALL)


def exceptions(text: str) -> list[str]:
    """The final line of every Python traceback in text (the exception it ended in)."""
    out = []
    text = TORCHRUN_BOX.sub("", text)
    for block in text.split("Traceback (most recent call last):")[1:]:
        lines = [ln for ln in block.splitlines() if not LOG_RECORD.match(ln)]
        end = next((ln for ln in lines[1:] if EXCEPTION_LINE.match(ln)), "")
        if end.strip():  # two ranks' headers interleaved in one log leave one block empty
            out.append(end.strip())
    return out


def pytest_failures(text: str) -> list[str]:
    """pytest's short summary lines (FAILED/ERROR ...), whose message ends each line."""
    return [ln for ln in text.splitlines() if re.match(r"^(FAILED|ERROR) ", ln)]


def _studies(folder: Path) -> list[Path]:
    """The step's folder and the study folders in it."""
    return [folder, *sorted(p for p in folder.iterdir() if p.is_dir())] if folder.is_dir() else []


def _rows(folder: Path) -> list[Run]:
    return [r for s in _studies(folder) if (s / "runs.csv").is_file() for r in read_runs(s)]


def _logs(folder: Path) -> list[str]:
    return [
        p.read_text(errors="replace")
        for s in _studies(folder)
        for p in sorted((s / "logs").glob("*.log"))
    ]


def _doctor_failures(folder: Path) -> list[str]:
    """doctor.json's failed checks, as 'name: detail'."""
    path = next(folder.glob("*/doctor.json"), folder / "doctor.json")  # doctor's own folder
    if not path.is_file():
        return []
    checks = json.loads(path.read_text())["checks"]
    return [f"doctor {c['name']}: {c['detail']}" for c in checks if c["status"] == "FAIL"]


def _causes(ends: list[str]) -> list[str]:
    """One log's traceback ends, less torchrun's agent's ChildFailedError where the log also holds
    a rank's traceback that reached CUDA: the agent echoes its rank's failure, judged itself.
    The echo is known by its class's name alone: Python prints an exception's module, its dot
    and its name as separate writes, and two nodes' agents on one host, failing together,
    interleave them ("...errors.torch...errorsChildFailedError.: ..."; CI's two-nodes)."""
    if any(NOT_COMPILED in e for e in ends):
        return [e for e in ends if "ChildFailedError" not in e]
    return ends


def judge(rc: int, text: str, folder: Path | None = None) -> tuple[bool, str]:
    """(passed, why) for one rehearsed step: its exit code, its output, the folder it wrote."""
    if rc in TIMED_OUT:
        return False, "ran past its time limit"
    if rc == 2 and NOT_COMPILED not in text:
        return False, "usage error: " + (text.strip().splitlines() or ["(no output)"])[-1][:200]
    texts = [text, *(_logs(folder) if folder else [])]
    try:
        rows = _rows(folder) if folder else []
    except StbenchError as exc:  # a runs.csv stbench would not read
        return False, str(exc)[:300]
    failures = [e for t in texts for e in _causes(exceptions(t))] + pytest_failures(text)
    failures += [
        f"{r['run_id']} {r['status']}: {r['reason']}"
        for r in rows
        if r["status"] not in ("ok", "skipped")
    ]
    failures += _doctor_failures(folder) if folder else []
    other = [f for f in failures if NOT_COMPILED not in f]
    if other:
        return False, "failed before CUDA: " + other[0][:300]
    if not any(NOT_COMPILED in t for t in texts + failures):
        return False, "never reached CUDA (the step proves nothing about a GPU run)"
    cells = sum(NOT_COMPILED in r.get("reason", "") for r in rows)
    return True, "reached CUDA" + (f" in {cells} cell(s)" if cells else "")


def judge_check(check: Check) -> Check:
    """A check in a rehearsal: a cpu figure stands as judged; a cuda check must have failed for
    the build's CUDA error alone, in every cell it names (it has nothing else to look at)."""
    if not is_cuda(check.device):
        return check
    other = [part for part in check.detail.split("; ") if NOT_COMPILED not in part]
    if check.status == PASS:
        passed, why = False, "passed without a GPU: it judged nothing of a GPU run"
    elif NOT_COMPILED not in check.detail:
        passed, why = False, "never reached CUDA"
    else:
        passed, why = (
            not other,
            "reached CUDA" if not other else f"failed before CUDA: {other[0][:200]}",
        )
    return Check(
        check.name,
        check.device,
        PASS if passed else FAIL,
        f"{why} ({check.detail})"[:400],
        check.figures,
    )

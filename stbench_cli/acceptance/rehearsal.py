"""The rehearsal's verdict on one step of `gpu_acceptance.sh --rehearse`: on a CPU build of
torch with CUDA's availability faked (tests/fakecuda), a step must reach the first operation
that truly needs CUDA, the build's own "Torch not compiled with CUDA enabled", and fail in no
other way first.

    python benchmarks/rehearsal.py RC OUTPUT [FOLDER]

RC is the step's exit code, OUTPUT the file holding its stdout and stderr, FOLDER the study it
wrote (its rows and cell logs are read too). Prints `PASS reached CUDA: ...` or `FAIL ...` and
exits 0 or 1. Every traceback must end in the CUDA error, every row that did not end ok must
give it as its reason (or be skipped), and the error must appear at least once: a step that
never met CUDA proves nothing about the GPU run.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

NOT_COMPILED = "Torch not compiled with CUDA enabled"
TIMED_OUT = (124, 137)  # coreutils' timeout: the step ran past its limit


def exceptions(text: str) -> list[str]:
    """The final line of every Python traceback in text (the exception it ended in)."""
    out = []
    for block in text.split("Traceback (most recent call last):")[1:]:
        lines = block.splitlines()
        end = next((ln for ln in lines[1:] if ln and not ln.startswith((" ", "\t"))), "")
        out.append(end.strip())
    return out


def pytest_failures(text: str) -> list[str]:
    """pytest's short summary lines (FAILED/ERROR ...), whose message ends each line."""
    return [ln for ln in text.splitlines() if re.match(r"^(FAILED|ERROR) ", ln)]


def _rows(folder: Path) -> list[dict]:
    path = folder / "runs.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _doctor_failures(folder: Path) -> list[str]:
    """doctor.json's failed checks, as 'name: detail'."""
    path = folder / "doctor.json"
    if not path.is_file():
        return []
    checks = json.loads(path.read_text())["checks"]
    return [f"doctor {c['name']}: {c['detail']}" for c in checks if c["status"] == "FAIL"]


def _causes(ends: list[str]) -> list[str]:
    """One log's traceback ends, less torchrun's agent's ChildFailedError where the log also holds
    a rank's traceback that reached CUDA: the agent echoes its rank's failure, which is judged itself."""
    echo = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
    if any(NOT_COMPILED in e for e in ends):
        return [e for e in ends if not e.startswith(echo)]
    return ends


def judge(rc: int, text: str, folder: Path | None = None) -> tuple[bool, str]:
    """(passed, why) for one rehearsed step."""
    if rc in TIMED_OUT:
        return False, "ran past its time limit"
    if rc == 2 and NOT_COMPILED not in text:
        return False, "usage error: " + (text.strip().splitlines() or ["(no output)"])[-1][:200]
    texts = [text]
    rows = _rows(folder) if folder else []
    if folder and (folder / "logs").is_dir():
        texts += [p.read_text(errors="replace") for p in sorted((folder / "logs").glob("*.log"))]
    failures = [e for t in texts for e in _causes(exceptions(t))] + pytest_failures(text)
    failures += [f"{r['run_id']} {r['status']}: {r['reason']}" for r in rows if r["status"] not in ("ok", "skipped")]
    failures += _doctor_failures(folder) if folder else []
    other = [f for f in failures if NOT_COMPILED not in f]
    if other:
        return False, "failed before CUDA: " + other[0][:300]
    if not any(NOT_COMPILED in t for t in texts + failures):
        return False, "never reached CUDA (the step proves nothing about a GPU run)"
    cells = sum(NOT_COMPILED in r["reason"] for r in rows)
    return True, "reached CUDA" + (f" in {cells} cell(s)" if cells else "")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: rehearsal.py RC OUTPUT [FOLDER]")
    folder = Path(sys.argv[3]) if len(sys.argv) == 4 and sys.argv[3] else None
    passed, why = judge(int(sys.argv[1]), Path(sys.argv[2]).read_text(errors="replace"), folder)
    print(("PASS " if passed else "FAIL ") + why)
    sys.exit(0 if passed else 1)

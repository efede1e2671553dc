"""What the acceptance's checks share: the doctor's `Check` record, the verdicts, reading the
result folders a step wrote (and a cell's anatomy, measured once), and turning a reader's error
into a FAIL. A check with nothing to
look at (no study, no row, a cell that did not end ok) fails: it never passes by default."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from stbench import comparison
from stbench.device import is_cuda
from stbench.runner.doctor import Check
from stbench.store.files import read_runs
from stbench.store.rows import Run

PASS, FAIL, UNTESTED = "PASS", "FAIL", "UNTESTED"


class NothingToJudge(Exception):
    """The folder holds nothing the check can judge; the message says what is missing."""


def verdict(kind: str, ok: bool, detail: str, figures: dict | None = None) -> Check:
    """A judge's answer: PASS or FAIL with its figure or reason (every check judges cuda cells)."""
    return Check(kind, "cuda", PASS if ok else FAIL, detail, figures or {})


def untested(kind: str, detail: str) -> Check:
    return Check(kind, "cuda", UNTESTED, detail, {})


def combine(kind: str, checks: list[Check]) -> Check:
    """One verdict of several: the first FAIL, UNTESTED if nothing passed, else PASS with every
    figure. No verdict at all is a FAIL (nothing was judged)."""
    if not checks:
        return verdict(kind, False, "nothing to judge")
    failed = [c for c in checks if c.status == FAIL]
    if failed:
        return replace(failed[0], name=kind)
    passed = [c for c in checks if c.status == PASS]
    if not passed:
        return replace(checks[0], name=kind)
    return Check(kind, "cuda", PASS, "; ".join(c.detail for c in passed), {})


def studies(folder: Path) -> list[Path]:
    """The study folders a step wrote under its folder (each with a runs.csv)."""
    found = sorted(p.parent for p in folder.glob("*/runs.csv")) if folder.is_dir() else []
    if not found:
        raise NothingToJudge(f"no study in {folder.name} (the step wrote no runs.csv)")
    return found


def rows_ok(folder: Path, may_skip_backend: str = "", may_skip: bool = False) -> list[Run]:
    """The rows of every study under a step's folder, all ended ok (or skipped: for cells of the
    backend `may_skip_backend`, or any with `may_skip`: the largest sizes, which the planner
    skips on a card its memory prediction says they do not fit); otherwise NothingToJudge naming
    each cell and its reason (in a rehearsal, the build's own CUDA error). The backend is the
    row's column, not words of its reason: the first H100 run failed its gloo check on the
    planner's NCCL skip, whose reason did not say NCCL."""
    rows = [r for study in studies(folder) for r in read_runs(study)]
    if not rows:
        raise NothingToJudge(f"no rows in {folder.name}")
    bad = [
        f"{r['run_id']}: {r['status']} {r['reason']}"
        for r in rows
        if r["status"] != "ok"
        and not (
            r["status"] == "skipped"
            and (may_skip or (may_skip_backend and r["backend"] == may_skip_backend))
        )
    ]
    if bad:
        raise NothingToJudge("cells did not end ok: " + "; ".join(bad))
    return [r for r in rows if r["status"] == "ok"]


def number(row: Run, key: str) -> float:
    """A run's value as a float; NaN when it has none (NaN fails every judge)."""
    value = comparison.number(row[key])
    return math.nan if value is None else value


def cuda_rows(rows: list[Run], workload: str = "") -> list[Run]:
    out = [r for r in rows if is_cuda(r["device"]) and workload in r["workload"]]
    if not out:
        raise NothingToJudge(f"no {workload + ' ' if workload else ''}cuda row")
    return out


def param(row: Run, name: str):
    return row.params.get(name)


def run_check(
    name: str, judge: Callable[..., Check | list[Check]], folder: Path, **kwargs
) -> list[Check]:
    """A check on a step's folder, named `name`: NothingToJudge and any error while reading or
    judging are a FAIL with the reason (a check that cannot look has not passed)."""
    try:
        found = judge(folder, **kwargs)
    except NothingToJudge as exc:
        return [Check(name, "cuda", FAIL, str(exc), {})]
    except Exception as exc:  # noqa: BLE001 - an unreadable trace or a missing column is a FAIL
        return [Check(name, "cuda", FAIL, f"could not check: {type(exc).__name__}: {exc}", {})]
    if isinstance(found, list):  # the doctor's checks keep their own names
        return [replace(c, name=f"{name} {c.name} {c.device}") for c in found]
    return [replace(found, name=name)]


@functools.cache
def _anatomy(workload: str, params: str):
    """A cell's step as the CPU counts it (child/anatomy.py, measured here, on this machine's
    CPU, once a process for every check of the same cell: the kernel count, the memory
    estimate, the largest sizes' predictions)."""
    from stbench.child.anatomy import measure
    from stbench.runner.predictions import SMALL_BATCHES

    return measure(workload, json.loads(params), SMALL_BATCHES)


def anatomy_of(row: Run):
    """The anatomy of a row's cell (its workload and parameters), measured once a process."""
    return _anatomy(row["workload"], json.dumps(dict(row.params), sort_keys=True, default=str))

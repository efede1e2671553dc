"""What one acceptance run has found so far: a record per step in OUT/state.json, and OUT/summary.md
rendered from it (pure). Both are rewritten after every step, so a command killed at its limit
still brings back every verdict it reached; a later command reads state.json back and keeps the
steps that passed."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from stbench.runner.doctor import Check

from .verdicts import FAIL, PASS, UNTESTED

NOT_REACHED, RUNNING = "NOT REACHED", "RUNNING"
REHEARSED = " (rehearsal: CPU build, CUDA faked)"


@dataclass(frozen=True)
class StepRecord:
    """A step's verdict: PASS (its command ended well), FAIL or NOT REACHED, with the figure or
    reason, the seconds it took, its checks, and the result folders it left in the archive."""

    step: str
    verdict: str
    detail: str
    seconds: float = 0.0
    checks: tuple[Check, ...] = ()
    folders: tuple[str, ...] = ()  # paths inside results.tar.gz

    @property
    def passed(self) -> bool:
        """Kept by a later command: the step and every check passed (UNTESTED is no failure)."""
        return self.verdict == PASS and all(c.status in (PASS, UNTESTED) for c in self.checks)

    @classmethod
    def from_dict(cls, d: dict) -> StepRecord:
        checks = tuple(Check(**c) for c in d.get("checks", ()))
        return cls(
            d["step"],
            d["verdict"],
            d["detail"],
            d.get("seconds", 0.0),
            checks,
            tuple(d.get("folders", ())),
        )


@dataclass
class State:
    """The run's header (machine, when, deadline) and the records by step name."""

    header: dict = field(default_factory=dict)
    records: dict[str, StepRecord] = field(default_factory=dict)

    def save(self, out: Path) -> None:
        data = {"header": self.header, "steps": [asdict(r) for r in self.records.values()]}
        _replace(out / "state.json", json.dumps(data, indent=1, default=str) + "\n")

    @classmethod
    def load(cls, out: Path) -> State:
        path = out / "state.json"
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text())
        return cls(
            data.get("header", {}),
            {d["step"]: StepRecord.from_dict(d) for d in data.get("steps", ())},
        )


def _replace(path: Path, text: str) -> None:
    """Write atomically: a command killed while writing leaves the previous file whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def counts(records: list[StepRecord]) -> dict[str, int]:
    """Verdicts of steps and checks together."""
    out = {PASS: 0, FAIL: 0, UNTESTED: 0, NOT_REACHED: 0}
    for r in records:
        out[r.verdict] = out.get(r.verdict, 0) + 1
        for c in r.checks:
            out[c.status] = out.get(c.status, 0) + 1
    return out


def _cell(text: str, width: int = 400) -> str:
    flat = " ".join(str(text).split()).replace("|", "/")
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def summary(names: list[str], state: State, running: tuple[str, str] | None = None) -> str:
    """summary.md: the header, the counts, then every step in order with its checks below it
    (a step not yet run is NOT REACHED; the one in flight when the file was written RUNNING)."""
    h = state.header
    records = [state.records[n] for n in names if n in state.records]
    tally = ", ".join(f"{n} {v}" for v, n in counts(records).items() if n)
    lines = [
        "# stbench GPU acceptance" + (REHEARSED if h.get("rehearsal") else ""),
        "",
        f"- machine: {h.get('machine', '?')}",
        f"- software: {h.get('software', '?')}",
        f"- started {h.get('started', '?')}; deadline {h.get('deadline_s', '?')} s; "
        f"{h.get('note', '')}",
        f"- verdicts: {tally or 'none yet'}",
        "",
        "| verdict | step / check | s | figure or reason |",
        "|---|---|---|---|",
    ]
    for name in names:
        if running and running[0] == name:
            lines.append(f"| {RUNNING} | **{name}** | | {_cell(running[1])} |")
            continue
        r = state.records.get(name)
        if r is None:
            lines.append(f"| {NOT_REACHED} | **{name}** | | not started yet |")
            continue
        took = "" if r.verdict == NOT_REACHED else f"{r.seconds:.0f}"
        lines.append(f"| {r.verdict} | **{name}** | {took} | {_cell(r.detail)} |")
        lines += [f"| {c.status} | {name} / {c.name} | | {_cell(c.detail)} |" for c in r.checks]
    lines += predicted_against_measured([state.records[n] for n in names if n in state.records])
    folders = [(n, f) for n in names if n in state.records for f in state.records[n].folders]
    if folders:
        lines += ["", "## Result folders in results.tar.gz", ""]
        lines += [f"- `{f}` ({n})" for n, f in folders]
    return "\n".join(lines) + "\n"


def predicted_against_measured(records: list[StepRecord]) -> list[str]:
    """Each step's own predictions for its card against the steps it measured (the figures of
    its prediction-holds check: the questions' sizes, and the largest sizes' GPU-only cells), as
    a table of summary.md: what the docs' prediction tables are made from."""
    rows = [
        f"| {r.step} | {size} | {f['bound_ms']:.3f} | {f.get('bound_by', '')} | "
        f"{f['estimate_ms']:.3f} | {f['measured_ms']:.3f} | "
        f"{f['measured_ms'] / f['bound_ms']:.1f} | {f['estimate_ms'] / f['measured_ms'] - 1:+.0%} |"
        for r in records
        for c in r.checks
        if c.name == "prediction-holds"
        for size, f in c.figures.items()
    ]
    if not rows:
        return []
    return [
        "",
        "## Predicted against measured (the card it ran on, eager, torch's default precision)",
        "",
        "| step | size | bound ms | bound by | estimate ms | measured ms | measured / bound "
        "| estimate error |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def write_summary(
    out: Path, names: list[str], state: State, running: tuple[str, str] | None = None
) -> None:
    _replace(out / "summary.md", summary(names, state, running))

"""Result folders read for compare, report, gate, run and profile: each folder whole and
strictly, into typed records; a folder that cannot be read is named in one line (its file, line
and column, and what was expected there) and left out, and the others are read.

A runs.csv row becomes a `Run`: each column typed as store.rows declares it (a number, true or
false, text; a workload's `x.` figures are numbers), its parameters a dict. Nothing is ever
written back. A folder of an older schema is refused by store.files.read_runs (one line naming
`stbench migrate`, which makes every older file current: plan/migrate.py); no reader knows
older rows exist.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from ..errors import StbenchError
from ..store.cell_result import EpochRow, Figures
from ..store.files import TUNE_FILE, find_folders, read_csv, read_runs
from ..store.manifest import read_manifest
from ..store.prices import cost_per_million_samples, cost_to_target, usd_per_second
from ..store.results import command_text, study_key
from ..store.rows import EXTRA_PREFIX, STATUSES, Conditions, Derived, Identity, Machine, SystemRow

SERIES = ("epochs.csv", "system.csv")
SKIPPED_EXIT = 4  # compare, report, gate: what could be read is shown, and a folder was left out


def _kind(annotation: str) -> type:
    """A dataclass field's type as written ("float | None", "int", "str"): what to parse."""
    return {"float": float, "int": int, "bool": bool}.get(annotation.split(" ")[0], str)


def _types(*classes) -> dict[str, type]:
    return {f.name: _kind(str(f.type)) for cls in classes for f in fields(cls)}


RUN_TYPES = {
    "schema": int,
    "status": str,
    "reason": str,
    **_types(Identity, Figures, Derived, Machine, Conditions),
}
EPOCH_TYPES, SYSTEM_TYPES = _types(EpochRow), _types(SystemRow)
EXPECTED = {float: "a number", int: "a whole number", bool: "True or False"}


class BadValue(ValueError):
    """A value that is not what its column holds."""

    def __init__(self, column: str, expected: str, found: object):
        super().__init__(f"column {column}: expected {expected}, found {found!r}")


def typed(column: str, value: object, kind: type) -> object:
    """One value as its column's type (None where empty); BadValue where it is not one."""
    if value is None or value == "":
        return None
    if kind is str:
        return str(value)
    text = str(value).strip()
    if kind is bool:
        if text in ("True", "False", "true", "false", "1", "0", "1.0", "0.0"):
            return text in ("True", "true", "1", "1.0")
        raise BadValue(column, EXPECTED[bool], value)
    try:
        number = float(text)
    except ValueError:
        raise BadValue(column, EXPECTED[kind], value) from None
    if kind is int:
        if not number.is_integer():
            raise BadValue(column, EXPECTED[int], value)
        return int(number)
    return number


@dataclass(frozen=True)
class Run:
    """One runs.csv row, typed: every column store.rows declares (None where the row has no
    value), the workload's `x.` figures, and its parameters as a dict."""

    columns: Mapping[str, object]
    params: Mapping[str, object] = field(default_factory=dict)
    folder: str = ""  # the result folder it was read from

    def __getitem__(self, name: str) -> object:
        return self.columns.get(name)

    def get(self, name: str, default: object = None) -> object:
        value = self.columns.get(name)
        return default if value is None else value


def run_of(record: Mapping[str, object], folder: str = "") -> Run:
    """A runs.csv row (as read: text; or as written: values) as a Run; BadValue names the
    column that is not what it must be."""
    out = {name: typed(name, record.get(name), kind) for name, kind in RUN_TYPES.items()}
    if out["status"] not in STATUSES:
        raise BadValue("status", f"one of {', '.join(STATUSES)}", out["status"])
    for name, value in record.items():
        if name not in RUN_TYPES:
            out[name] = typed(name, value, float if name.startswith(EXTRA_PREFIX) else str)
    try:
        params = json.loads(out["params"] or "{}")
    except ValueError:
        raise BadValue("params", "the parameters as JSON", out["params"]) from None
    if not isinstance(params, dict):
        raise BadValue("params", "the parameters as a JSON object", out["params"])
    return Run(out, params, folder)


def series_of(records: Iterable[Mapping], types: Mapping[str, type]) -> list[dict]:
    """epochs.csv or system.csv rows typed (`run_id` text, any other column a number), with
    every column the current stbench writes (None where a row has none)."""
    return [
        {
            **{k: typed(k, r.get(k), t) for k, t in types.items()},
            **{k: typed(k, v, float) for k, v in r.items() if k not in types},
        }
        for r in records
    ]


def conditions(run: Mapping) -> Conditions:
    """How busy the machine was while a run ran (a Run, or a study frame's row): its row's
    Conditions columns."""
    return Conditions(**{k: _value(run.get(k)) for k in asdict(Conditions())})


def _value(v: object) -> object:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


@dataclass(frozen=True)
class Folder:
    """One result folder read whole: the study it belongs to (folders that ran one matrix,
    on one machine or several) and its rows."""

    path: Path
    study: str  # the key of its study (store.results.study_key)
    question: str  # the command that made it, as a user types it
    runs: tuple[Run, ...]
    epochs: tuple[dict, ...] = ()
    system: tuple[dict, ...] = ()
    planned: int = 0  # its manifest's cells: fewer rows is a study not finished

    @property
    def name(self) -> str:
        """How a study names it: its folder's name; a tune's step with its tune's."""
        tuned = (self.path.parent / TUNE_FILE).exists()
        return f"{self.path.parent.name}/{self.path.name}" if tuned else self.path.name

    @property
    def incomplete(self) -> str:
        """'' for a finished study; else what it has and the line that finishes it."""
        have = len({r["run_id"] for r in self.runs})
        if not self.planned or have >= self.planned:
            return ""
        words = self.question.split()
        command = " ".join(words[:2]) if len(words) >= 2 else "stbench run"
        return (
            f"{self.name} has {have} of its {self.planned} cells' rows "
            f"(finish it: {command} --resume {self.path})"
        )


@dataclass(frozen=True)
class Skipped:
    """A folder left out, and why, in one line."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"skipped: {self.reason}"


def read_folder(path: Path, series: tuple[str, ...] = ()) -> Folder:
    """One result folder, strictly: StbenchError names the first thing that is not as stbench
    wrote it (a file, a line and a column)."""
    manifest = read_manifest(path)
    try:
        key = study_key(manifest)
    except (KeyError, TypeError, AttributeError):
        raise StbenchError(
            f"{path / 'manifest.json'} is corrupt: it lacks the study's matrix"
        ) from None
    runs = tuple(_rows(path / "runs.csv", read_runs(path), lambda r: run_of(r, str(path))))
    if not runs:
        raise StbenchError(f"{path / 'runs.csv'} holds no run yet (no cell has finished)")
    prices = manifest.get("prices") or {}
    runs = tuple(priced(r, prices) for r in runs) if prices else runs
    if manifest.get("question"):
        runs = tuple(asked(r, manifest["question"]) for r in runs)
    kept = {
        name: _series(path / name, SYSTEM_TYPES if name == "system.csv" else EPOCH_TYPES)
        for name in series
    }
    question = command_text(manifest.get("command") or []) if manifest.get("command") else ""
    return Folder(
        path,
        key,
        question or path.name,
        runs,
        kept.get("epochs.csv", ()),
        kept.get("system.csv", ()),
        len(manifest.get("cells") or ()),
    )


def asked(run: Run, question: Mapping) -> Run:
    """The run with what `stbench gpu-vs-cpu` asked of it (report/question.py): its size, the
    size's count of the axis' unit, and whether its CPU levers are the workload's defaults."""
    size = question["size"]
    value = run.columns.get("batch_size") if size["param"] == "batch_size" else None
    value = str(value if value is not None else run.params.get(size["param"]))
    counts = dict(zip(size["values"], size["counts"]))
    defaults = question.get("defaults") or {}
    found = {
        "q_size": value,
        "q_count": counts.get(value),
        "q_unit": size["unit"],
        "q_default": float(all(run.params.get(k) == v for k, v in defaults.items())),
    }
    return replace(run, columns={**run.columns, **found})


def priced(run: Run, prices: Mapping[str, float]) -> Run:
    """The run with what it cost at the study's prices (USD per device-hour, `--price`): the
    hour of the devices it held, a million samples, its target (None where a figure or a
    price is missing)."""
    rate = usd_per_second(run, prices)
    found = {
        "usd_per_hour": rate * 3600 if rate is not None else None,
        "usd_per_million_samples": cost_per_million_samples(run, prices),
        "usd_to_target": cost_to_target(run, prices),
    }
    return replace(run, columns={**run.columns, **found})


def _rows(path: Path, records: list[dict], make) -> list:
    out = []
    for line, record in enumerate(records, start=2):
        try:
            out.append(make(record))
        except BadValue as exc:
            raise StbenchError(f"results file {path} is corrupt: line {line}, {exc}") from None
    return out


def _series(path: Path, types: Mapping[str, type]) -> tuple[dict, ...]:
    if not path.exists():
        return ()
    rows = _rows(path, read_csv(path, ["run_id"]), lambda r: series_of([r], types)[0])
    return tuple(rows)


def read(paths: list[Path], series: tuple[str, ...] = ()) -> tuple[list[Folder], list[Skipped]]:
    """The result folders under `paths` (each a result folder or a folder holding them), and
    those left out. Nothing read at all is a user error (one line: why)."""
    read_ok, skipped = [], []
    for path in find_folders(paths):
        try:
            read_ok.append(read_folder(path, series))
        except StbenchError as exc:
            skipped.append(Skipped(path, str(exc)))
    if not read_ok:
        if len(skipped) == 1:
            raise StbenchError(skipped[0].reason)
        raise StbenchError(
            f"none of the {len(skipped)} result folders could be read: "
            + "; ".join(str(s) for s in skipped)
        )
    return read_ok, skipped


def newest(root: Path = Path("results")) -> Path:
    """The study a user made last under `root` (one level down: results/<stamp>-<host>-<name>;
    the committed references in results/reference/ are not among them)."""
    found = [p.parent for p in root.glob("*/runs.csv")]
    if not found:
        raise StbenchError(
            f"no study in {root}/ yet: run one (`stbench run WORKLOAD`), or name "
            "result folders (`stbench compare results/reference/`)"
        )
    return max(found, key=lambda p: os.stat(p / "runs.csv").st_mtime)  # the last written to

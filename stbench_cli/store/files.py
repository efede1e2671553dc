"""The normalized result files: runs.csv, epochs.csv, system.csv, ranks.csv.

Files are only ever appended to, one finished cell at a time, and each write replaces the
file atomically (write a temporary file, fsync, rename), so a kill at any moment leaves
either the old or the new file, never a torn one. runs.csv is written last: a cell is
done exactly when its row is there, and epoch/system rows of a cell without one (a kill
between two writes) are dropped before a resume re-runs it.

A row with a column the file lacks (a newer stbench, a workload's `x.` figure) extends the
header at the end; earlier rows read back with that column empty. Nothing is ever dropped.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict
from pathlib import Path

from ..errors import StbenchError
from .rows import EPOCH_COLUMNS, RANK_COLUMNS, RUN_COLUMNS, SCHEMA, SYSTEM_COLUMNS, EpochRow, RankRow, RunRow, SystemRow

REQUIRED = ["schema", "run_id", "workload", "device", "status"]


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _csv_text(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buf.getvalue()


def append(path: Path, rows: list[dict], columns: list[str]) -> None:
    """Append rows by rewriting the file atomically. The file's own header comes first (a
    study written by an older stbench stays aligned), then any column new to it."""
    old = read_csv(path, []) if path.exists() else []
    header = _header(path) if path.exists() else []
    new = [c for c in [*columns, *(k for r in rows for k in r)] if c not in header]
    atomic_write(path, _csv_text(old + rows, header + list(dict.fromkeys(new))))


def _header(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def write_cell(folder: Path, row: RunRow, epochs: list[EpochRow], system: list[SystemRow]) -> None:
    """Record one finished cell; runs.csv last, so the row marks the cell as done."""
    append(folder / "epochs.csv", [asdict(e) for e in epochs], EPOCH_COLUMNS)
    append(folder / "system.csv", [asdict(s) for s in system], SYSTEM_COLUMNS)
    append(folder / "runs.csv", [row.record()], RUN_COLUMNS)


def write_ranks(folder: Path, ranks: list[RankRow]) -> None:
    """Every rank's own totals of one cell, written before its runs.csv row (write_cell)."""
    append(folder / "ranks.csv", [asdict(r) for r in ranks], RANK_COLUMNS)


def read_csv(path: Path, required: list[str]) -> list[dict]:
    """Rows of a results CSV; StbenchError naming the file if it is missing or corrupt (a line
    with more or fewer fields than the header: its line, the column where it goes wrong)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise StbenchError(f"results file {path} is corrupt: header lacks "
                                   f"{', '.join(missing[:5])}; expected stbench columns "
                                   f"({', '.join(required[:4])}, …)")
            rows = []
            for row in reader:
                _check_fields(path, reader.line_num, row, header)
                rows.append(row)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise StbenchError(f"results file {path} cannot be read ({exc})") from None
    return rows


def _check_fields(path: Path, line: int, row: dict, header: list[str]) -> None:
    """One field per column of the header, or the line is corrupt (a file cut short ends so)."""
    short = [c for c in header if row.get(c) is None]
    if None not in row and not short:
        return
    found = len(header) - len(short) + len(row.get(None) or ())
    column = short[0] if short else f"after {header[-1]}"
    raise StbenchError(f"results file {path} is corrupt: line {line}, column {column}: expected "
                       f"{len(header)} fields as in the header, found {found}")


def read_runs(folder: Path) -> list[dict]:
    """The rows of folder/runs.csv (text values); StbenchError if it is not a result folder."""
    path = folder / "runs.csv"
    if not path.exists():
        raise StbenchError(f"{folder} is not a result folder: it has no runs.csv")
    rows = read_csv(path, REQUIRED)
    for row in rows:
        if row["schema"] != str(SCHEMA):
            raise StbenchError(f"{path}: schema {row['schema']!r} is not one this stbench reads (schema {SCHEMA})")
    return rows


def prune_orphans(folder: Path, done: set[str]) -> None:
    """Drop epoch/system/rank rows whose cell has no runs.csv row (the parent died mid-write)."""
    for name in ("epochs.csv", "system.csv", "ranks.csv"):
        path = folder / name
        if path.exists():
            rows = read_csv(path, ["run_id"])
            kept = [r for r in rows if r["run_id"] in done]
            if len(kept) != len(rows):
                atomic_write(path, _csv_text(kept, _header(path)))


def find_folders(paths: list[Path]) -> list[Path]:
    """Each path is a result folder (has runs.csv) or a folder of result folders."""
    found = []
    for p in paths:
        if not p.exists():
            raise StbenchError(f"{p} does not exist; give result folders (each holds runs.csv) or their parent")
        if (p / "runs.csv").exists():
            found.append(p)
            continue
        inner = sorted(q.parent for q in p.glob("*/runs.csv"))
        if not inner:
            raise StbenchError(f"{p} holds no result folder (no runs.csv in it or its sub-folders)")
        found.extend(inner)
    return found

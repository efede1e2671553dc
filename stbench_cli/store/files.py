"""The normalized result files: runs.csv, epochs.csv, system.csv, ranks.csv.

Files are only ever appended to, one finished cell at a time: a cell's rows in one write at
the file's end, fsynced, and cut back off if the write fails (a full disk), so a study of
thousands of cells pays for its new rows only, not for the file (rewriting the whole file per
cell made recording a cell grow with the study: benchmarks/append_cost.py). A write that must
change what is there (a column new to the file, the rows of a cell run again) replaces the file
atomically instead (write a temporary file, fsync, rename). Either way a failed write leaves
the file as it was. runs.csv is written last: a cell is done exactly when its row is there,
and epoch/system rows of a cell without one (a kill between two writes) are dropped before a
resume re-runs it.

A row with a column the file lacks (a workload's `x.` figure) extends the header at the end;
earlier rows read back with that column empty. Nothing is ever dropped. A folder of an older
schema is read by no reader (one line says so).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import locale
import os
from dataclasses import MISSING, asdict, fields
from pathlib import Path

from ..errors import StbenchError
from .cell_result import EpochRow, RankRow
from .rows import (
    EPOCH_COLUMNS,
    RANK_COLUMNS,
    RUN_COLUMNS,
    SCHEMA,
    SYSTEM_COLUMNS,
    BadValue,
    PredictedLine,
    Run,
    RunRow,
    SystemRow,
    row_of,
    run_of,
)

REQUIRED = ["schema", "run_id", "workload", "device", "status"]


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` by `text` at once; a write that fails (a full disk) leaves the old file
    as it was and no temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _csv_text(rows: list[dict], columns: list[str], header: bool = True) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buf.getvalue()


def append(path: Path, rows: list[dict], columns: list[str], replacing: str | None = None) -> None:
    """Append rows: the file's own header comes first, then any column new to it. replacing:
    a run_id whose earlier rows go (a failed or hung cell run again)."""
    header = _header_to_append_under(path, rows, columns, replacing) if path.exists() else None
    if header is not None:
        if rows:
            _write_at_end(path, _csv_text(rows, header, header=False))
        return
    found = read_csv(path, []) if path.exists() else []
    old = [r for r in found if replacing is None or r.get("run_id") != replacing]
    if not rows and path.exists() and len(old) == len(found):
        return  # nothing to add, nothing gone: a window's empty epochs and samples cost no write
    header = _header(path) if path.exists() else []
    new = [c for c in [*columns, *(k for r in rows for k in r)] if c not in header]
    atomic_write(path, _csv_text(old + rows, header + list(dict.fromkeys(new))))


def _header_to_append_under(
    path: Path, rows: list[dict], columns: list[str], replacing: str | None
) -> list[str] | None:
    """The file's header where the rows can go at its end as they are (every column in it, the
    file ending a line, no row of `replacing` there: a run_id found anywhere in the file, even
    inside another value, takes the rewrite, which compares whole fields); else None. The file
    is read once."""
    data = path.read_bytes()
    if not data.endswith(b"\n") or (replacing is not None and replacing.encode() in data):
        return None
    first = data.split(b"\n", 1)[0].decode(locale.getpreferredencoding(False))
    header = next(csv.reader([first]), [])
    known = set(header)
    if any(c not in known for c in columns) or any(k not in known for r in rows for k in r):
        return None
    return header


def _write_at_end(path: Path, text: str) -> None:
    """`text` at the end of `path` in one write, fsynced; a write that fails (a full disk, a
    short write) is cut back off, leaving the file as it was."""
    data = text.encode(locale.getpreferredencoding(False))  # what open() reads it with
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, f"{path}: a short write")
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def rewrite(path: Path, rows: list[dict], columns: list[str]) -> None:
    """Replace a results CSV with these rows under these columns, atomically."""
    atomic_write(path, _csv_text(rows, columns))


def _header(path: Path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def write_cell(folder: Path, row: RunRow, epochs: list[EpochRow], system: list[SystemRow]) -> None:
    """Record one finished cell; runs.csv last, so the row marks the cell as done. Rows an
    earlier run of the same cell left (it failed or hung, and a resume ran it again) go."""
    run_id = row.identity.run_id
    append(folder / "epochs.csv", [asdict(e) for e in epochs], EPOCH_COLUMNS, run_id)
    append(folder / "system.csv", [asdict(s) for s in system], SYSTEM_COLUMNS, run_id)
    append(folder / "runs.csv", [row.record()], RUN_COLUMNS, run_id)


def write_ranks(folder: Path, ranks: list[RankRow], run_id: str | None = None) -> None:
    """Every rank's own totals of one cell, written before its runs.csv row (write_cell), in
    place of any an earlier run of the cell (`run_id`) left."""
    append(folder / "ranks.csv", [asdict(r) for r in ranks], RANK_COLUMNS, run_id)


def read_csv(path: Path, required: list[str]) -> list[dict]:
    """Rows of a results CSV; StbenchError naming the file if it is missing or corrupt (a line
    with more or fewer fields than the header: its line, the column where it goes wrong)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise StbenchError(
                    f"results file {path} is corrupt: header lacks "
                    f"{', '.join(missing[:5])}; expected stbench columns "
                    f"({', '.join(required[:4])}, …)"
                )
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
    raise StbenchError(
        f"results file {path} is corrupt: line {line}, column {column}: expected "
        f"{len(header)} fields as in the header, found {found}"
    )


def read_runs(folder: Path) -> list[Run]:
    """The rows of folder/runs.csv, typed; StbenchError if it is not a result folder, is of
    another schema, or a value is not what its column holds (its line and column named)."""
    path = folder / "runs.csv"
    if not path.exists():
        raise StbenchError(f"{folder} is not a result folder: it has no runs.csv")
    rows = read_csv(path, REQUIRED)
    for row in rows:
        check_schema(folder, row["schema"])
    return _typed(path, rows, lambda r: run_of(r, str(folder)))


def read_series(folder: Path, name: str) -> list[EpochRow] | list[SystemRow]:
    """The rows of folder/epochs.csv (EpochRow) or system.csv (SystemRow), typed ([] where the
    file is absent)."""
    return read_lines(folder / name, SystemRow if name == "system.csv" else EpochRow)


def read_predicted(folder: Path) -> list[PredictedLine]:
    """The lines of folder/predicted.csv, typed ([] where the file is absent)."""
    return read_lines(folder / PREDICTED, PredictedLine)


def read_lines(path: Path, kind: type) -> list:
    """A results file whose lines are one dataclass (`kind`), each typed ([] where the file is
    absent); StbenchError names a line that is not one, or the columns a file lacks of the
    fields every line has (those without a default: a field added later has one, None in
    older files), where they would otherwise read as gaps (a predicted.csv without its bounds
    read as lines with none)."""
    if not path.exists():
        return []
    required = [
        f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING
    ]
    return _typed(path, read_csv(path, required), lambda r: row_of(r, kind))


def write_lines(path: Path, lines: list) -> None:
    """A results file of dataclass lines (its columns their fields), written at once."""
    rewrite(path, [asdict(line) for line in lines], [f.name for f in fields(lines[0])])


def _typed(path: Path, records: list[dict], make) -> list:
    out = []
    for line, record in enumerate(records, start=2):
        try:
            out.append(make(record))
        except BadValue as exc:
            raise StbenchError(f"results file {path} is corrupt: line {line}, {exc}") from None
    return out


def check_schema(folder: Path, schema: object) -> None:
    """A folder of another schema than this stbench's is one line (readers carry no branch for
    older folders: every folder there is was rewritten to this schema once, and the code that
    did it is in the git log)."""
    if str(schema) == str(SCHEMA):
        return
    if str(schema).isdigit() and int(str(schema)) < SCHEMA:
        raise StbenchError(
            f"{folder} holds results of schema {schema}; this stbench reads schema "
            f"{SCHEMA} only: run the study again with this stbench"
        )
    raise StbenchError(
        f"{folder}: schema {schema!r} is not one this stbench reads (schema "
        f"{SCHEMA}); a newer stbench wrote it"
    )


def prune_orphans(folder: Path, done: set[str]) -> None:
    """Drop epoch/system/rank rows whose cell has no runs.csv row (the parent died mid-write)."""
    for name in ("epochs.csv", "system.csv", "ranks.csv"):
        path = folder / name
        if path.exists():
            rows = read_csv(path, ["run_id"])
            kept = [r for r in rows if r["run_id"] in done]
            if len(kept) != len(rows):
                rewrite(path, kept, _header(path))


TUNE_FILE = "tune.json"  # a tune's folder: its request and result, beside its step studies
PREDICTED = "predicted.csv"  # a gpu-vs-cpu study's GPU predictions (plan/predict.py), not rows
ANATOMY = "anatomy.json"  # what its step is made of, measured on the CPU (child/anatomy.py)


def read_tune(root: Path) -> dict:
    """A tune's tune.json, the one place that reads it: how many cells ran contended is a
    count and its total (`contended`, `cells`) in every step and in the gain; a tune.json
    written before they were counts ("2 of 42") is read as counts here, and nowhere else."""
    state = json.loads((root / TUNE_FILE).read_text())
    records = [*state.get("steps", []), (state.get("result") or {}).get("gain") or {}]
    for record in records:
        said = record.get("contended")
        if isinstance(said, str):
            hit, _, total = said.partition(" of ")
            record["contended"], record["cells"] = int(hit or 0), int(total or 0)
    return state


def find_folders(paths: list[Path], tune_steps: bool = True) -> list[Path]:
    """The result folders under `paths`: each path a result folder (it has runs.csv), a tune's
    folder (tune.json: its step studies, unless `tune_steps` is False: its answer is then all
    a reader shows of it), or a folder holding either."""
    found = []
    for p in paths:
        if not p.exists():
            raise StbenchError(
                f"{p} does not exist; give result folders (each holds runs.csv) or their parent"
            )
        if (p / "runs.csv").exists():
            found.append(p)
            continue
        tunes = find_tunes([p])
        inner = [] if p in tunes else sorted(q.parent for q in p.glob("*/runs.csv"))
        if tune_steps:
            inner += sorted(q.parent for t in tunes for q in t.glob("*/runs.csv"))
        elif tunes and not inner:
            continue  # a tune's folder (or a parent of tunes only): its answer stands for it
        if not inner:
            # one level further down (results/reference/...): name where they are
            deeper = sorted({q.parent.parent for q in p.glob("*/*/runs.csv")})
            where = f"; {', '.join(map(str, deeper))} holds some" if deeper else ""
            raise StbenchError(
                f"{p} holds no result folder (no runs.csv in it or in a folder directly in "
                f"it){where}"
            )
        found.extend(dict.fromkeys(inner))
    return found


def find_tunes(paths: list[Path]) -> list[Path]:
    """The tunes' folders under `paths` (each path one, or a folder holding them)."""
    found = []
    for p in paths:
        if (p / TUNE_FILE).exists():
            found.append(p)
        elif p.is_dir():
            found += sorted(q.parent for q in p.glob(f"*/{TUNE_FILE}"))
    return found

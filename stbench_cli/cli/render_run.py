"""What `stbench run` shows: a progress bar over the matrix (a line per cell into a file or a
pipe) and, at the end, one line per run with the study's finding and flags. Rich, as render.py."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from ..contract.params import setting
from ..plan.spec import cell_label, varied_params
from ..store.progress import cell_work, read_beats
from .render import err, out, table_width


class RunningCell:
    """The cell running now and how far its training got, from its rank 0's beat (the stall
    watchdog's file): a cell of a 15-epoch stnn study trains for 16 minutes on 2 cores, and a
    bar or a log that moves only when a cell ends says nothing all that time."""

    def __init__(self, folder: Path | None):
        self.folder, self.spec, self.since = folder, None, 0.0
        self._read_at, self._words = 0.0, ""

    def begin(self, spec) -> None:
        self.spec, self.since, self._read_at, self._words = spec, time.monotonic(), 0.0, ""

    def words(self) -> str:
        """'epoch 4/15 (23%)', read at most once a second; '' before its first step."""
        now = time.monotonic()
        if self.folder is not None and self.spec is not None and now - self._read_at >= 1.0:
            self._read_at = now
            beat = read_beats(cell_work(self.folder, self.spec.run_id)).get(0)
            self._words = beat.done_words() if beat else ""
        return self._words


class _CellColumn(ProgressColumn):
    def __init__(self, cell: RunningCell):
        super().__init__()
        self.cell = cell

    def render(self, task) -> Text:
        return Text(self.cell.words(), no_wrap=True)  # a narrow bar, never a second line


@contextmanager
def progress(total: int, done: int, varied: tuple[str, ...] = (), folder: Path | None = None):
    """A progress bar over the matrix, with how far the running cell's training got (from
    `folder`'s beats); yields (on_start, on_done) callbacks for run_matrix. Into a file or a pipe
    (a Slurm or nohup log), where a bar shows nothing until it ends, one line per finished cell
    instead, and one a minute on a cell still training. Each cell is named with the parameters
    of `varied`."""
    cell = RunningCell(folder)
    if not err.is_terminal:
        yield from _progress_lines(total, done, varied, cell)
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _CellColumn(cell),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    with bar:
        task = bar.add_task("cells", total=total, completed=done)

        def on_start(spec):
            cell.begin(spec)
            bar.update(task, description=cell_label(spec, varied))

        def on_done(spec, row):
            status = row["status"]
            if status != "ok":
                bar.console.print(
                    f"  {cell_label(spec, varied)}: [yellow]{status}[/] {row.get('reason', '')}"
                )
            bar.advance(task)

        yield on_start, on_done


def window_label(spec, varied: tuple[str, ...] = ()) -> str:
    """'cpu batch=64 threads=auto round 2': a window of the questions' engine (a window trains
    for seconds, not epochs, in a process of one rank), its parameters as a user reads them."""
    params = spec.param_dict
    said = "".join(f" {setting(k, params.get(k))}" for k in varied)
    return f"{spec.device} batch={spec.batch_size}{said} round {spec.repeat + 1}"


@contextmanager
def budget_progress(budget_s: float, cells):
    """A bar over a question's budget (its seconds spent, the windows done, the last one named by
    what sets it apart among `cells`, the study's), for the questions' engine; yields its on_row
    callback. A window that did not end ok is a line of its own; into a file or a pipe, only
    those lines (the engine says what each process runs)."""
    varied = varied_params(cells)

    def name(spec) -> str:
        return window_label(spec, varied)

    def not_ok(spec, row) -> str:
        return f"  {name(spec)}: {row['status']} {row['reason'] or ''}"

    started, windows = time.monotonic(), 0
    if not err.is_terminal:

        def on_row(spec, row):
            if row["status"] != "ok":
                err.print(not_ok(spec, row), markup=False)

        yield on_row
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[windows]} windows"),
        TimeElapsedColumn(),
        TextColumn(f"of {budget_s:,.0f} s"),
        console=err,
        transient=True,  # the engine's lines and the answer stay; the bar was the wait
    )
    with bar:
        task = bar.add_task("starting", total=budget_s, windows=0)

        def on_row(spec, row):
            nonlocal windows
            windows += 1
            if row["status"] != "ok":
                bar.console.print(not_ok(spec, row), markup=False, style="yellow")
            bar.update(
                task,
                completed=min(time.monotonic() - started, budget_s),
                description=name(spec),
                windows=windows,
            )

        yield on_row


LINE_S = 60.0  # into a file: a line on a cell still training, at most this often
POLL_S = 5.0  # how often the line's thread looks


def _progress_lines(total: int, done: int, varied: tuple[str, ...], cell: RunningCell):
    started = time.monotonic()
    said = threading.Event()  # set: the watching thread stops

    def clock(since: float) -> str:
        minutes, seconds = divmod(int(time.monotonic() - since), 60)
        return f"{minutes}:{seconds:02d}"

    def watch():  # a line a minute while a cell trains, where the log would say nothing
        last = time.monotonic()
        while not said.wait(POLL_S):
            spec, since = cell.spec, cell.since
            if spec is None or time.monotonic() - max(last, since) < LINE_S:
                continue
            words = cell.words()
            if words and cell.spec is spec:  # still the same cell
                last = time.monotonic()
                label = cell_label(spec, varied)
                err.print(
                    f"  [{done + 1}/{total}] {label}: {words}, {clock(since)} in", markup=False
                )

    def on_done(spec, row):
        nonlocal done
        done += 1
        cell.spec = None
        reason = f" {row.get('reason', '')}" if row["status"] != "ok" else ""
        wall = row.get("wall_s")
        took = f" in {float(wall):.1f} s" if wall not in (None, "") else ""
        err.print(
            f"[{done}/{total}] {cell_label(spec, varied)}: {row['status']}{took}{reason} "
            f"({clock(started)} so far)",
            markup=False,
        )

    watcher = threading.Thread(target=watch, name="stbench-progress", daemon=True)
    watcher.start()
    try:
        yield cell.begin, on_done
    finally:
        said.set()
        watcher.join()


# The run summary's columns, the most important first; a narrow terminal drops them from the end.
SUMMARY = (
    ("device", "device"),
    ("status", "status"),
    ("wall s", "wall_s"),
    ("samples/s", "samples_per_s"),
    ("epochs", "epochs_done"),
    ("batch", "batch_size"),
    ("val", "val_value"),
    ("naive", "naive_baseline"),
    ("strategy", "strategy"),
    ("world", "world_size"),
    ("nodes", "nodes"),
    ("rep", "repeat"),
)
_AXES = ("batch_size", "strategy", "world_size", "nodes")
_FORMATS = {
    "wall_s": "{:.2f}",
    "epochs_done": "{:.3g}",
    "time_to_target_s": "{:.3g}",
    "compile_s": "{:.1f}",
    "samples_per_s": "{:,.0f}",
    "val_value": "{:.3g}",
    "naive_baseline": "{:.3g}",
}


def _summary_cell(row: dict, key: str) -> str:
    from ..comparison import number
    from ..report.labels import show

    value = row.get(key)
    if key == "p.threads" and show(value) == "0":  # 0 asks stbench to choose: say what it chose
        used = number(row.get("threads"))
        return "auto" if used is None else f"auto: {used:.0f}"
    if key == "time_to_target_s" and show(value) == "-":
        return "not reached" if row.get("target_reached") == 0 else "-"
    if key not in _FORMATS:
        return show(value)
    return "-" if show(value) == "-" else _FORMATS[key].format(float(value))


def _summary_columns(study) -> tuple[tuple[str, str], ...]:
    """What tells the cells apart first (an axis of the matrix, a parameter, where it varies),
    then wall time and samples/s, compile time where a cell compiled, time to target where a
    target was set, then the rest (the repeat is the rows' order)."""
    from ..report.model import PARAM, axes

    s = study.runs
    varied = axes(s)
    compiled = (("compile s", "compile_s"),) if s["compile_s"].notna().any() else ()
    ttt = (("to target s", "time_to_target_s"),) if s["target"].notna().any() else ()
    named = {k.column for k in varied}
    by_axis = tuple(c for c in SUMMARY[4:] if c[1] in _AXES and c[1] in named)
    params = tuple((k.name, k.column) for k in varied if k.column.startswith(PARAM))
    rest = tuple(c for c in SUMMARY[4:] if c not in by_axis)
    return SUMMARY[:2] + by_axis + params + SUMMARY[2:4] + compiled + ttt + rest


def run_summary(study, shown, folder: Path) -> None:
    """One line per run; columns that do not fit the terminal are left out whole (named
    below the table, with their value where every row has the same), never cut; then the
    study's finding and its flags (`shown`: its view), as compare says them."""
    from ..report.text import finding_text, fit_columns, fold_pairs

    columns = _summary_columns(study)
    rows = study.runs.to_dict("records")
    cells = {head: [_summary_cell(r, key) for r in rows] for head, key in columns}
    widths = {head: max([len(head), *map(len, values)]) for head, values in cells.items()}
    kept = fit_columns(
        widths, out.width, [h for h, _ in reversed(columns[2:])], lambda n: 3 * n + 1
    )
    table = Table(show_lines=False)
    for head in kept:
        left = head in ("device", "strategy", "status")
        table.add_column(head, justify="left" if left else "right", no_wrap=True)
    for i in range(len(rows)):
        table.add_row(*(cells[h][i] for h in kept))
    out.print(f"results in {folder}", soft_wrap=False, overflow="fold")
    out.print(table)
    left = [f"{h} {cells[h][0]}" if len(set(cells[h])) == 1 else h for h in widths if h not in kept]
    if left:  # a long list folds between columns, never inside one
        out.print(
            fold_pairs(f"not shown: {', '.join(left)} (every column is in runs.csv)", out.width),
            soft_wrap=False,
        )
    out.print(finding_text(shown, out.width), soft_wrap=False, markup=False)


def print_answer(folder: Path, rows: list) -> None:
    """A question's answer as compare prints it (the finding, its flags, a line per size or
    configuration with its interval): what a study of rounds ends with, where a row a window
    would fill the screen with repeats."""
    from ..report import read, text
    from ..report.model import studies

    found = studies([read.folder_of(folder, rows)])
    shown = text.compare(found, width=table_width(), limit=None)  # the whole answer
    out.print(f"results in {folder}", soft_wrap=False, overflow="fold")
    out.print(shown, markup=False, end="")

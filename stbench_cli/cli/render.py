"""Everything stbench shows on the terminal (Rich lives here and only here)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)
err = Console(
    stderr=True, highlight=False, soft_wrap=True
)  # an error stays one line, however narrow the terminal


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")


@contextmanager
def interrupted(progress):
    """Ctrl-C inside: one line saying how far it got (`progress()`), exit 130 as a shell reports
    SIGINT, and no traceback (the user asked it to stop; nothing went wrong)."""
    import typer

    try:
        yield
    except KeyboardInterrupt:
        err.print(f"interrupted: {progress()}", markup=False)
        raise typer.Exit(130) from None


def cell_label(spec) -> str:
    world = ""
    if spec.distributed:
        world = (
            f" x{spec.world_size}" if spec.nodes == 1 else f" {spec.nodes}x{spec.nproc_per_node}"
        )
    return (
        f"{spec.device} {spec.strategy}{world} batch={spec.batch_size} epochs={spec.epochs} "
        f"repeat={spec.repeat}"
    )


@contextmanager
def progress(total: int, done: int):
    """A progress bar over the matrix; yields (on_start, on_done) callbacks for run_matrix.
    Into a file or a pipe (a Slurm or nohup log), where a bar shows nothing until it ends, one
    line per finished cell instead."""
    if not err.is_terminal:
        yield from _progress_lines(total, done)
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    with bar:
        task = bar.add_task("cells", total=total, completed=done)

        def on_start(spec):
            bar.update(task, description=cell_label(spec))

        def on_done(spec, row):
            status = row["status"]
            if status != "ok":
                bar.console.print(
                    f"  {cell_label(spec)}: [yellow]{status}[/] {row.get('reason', '')}"
                )
            bar.advance(task)

        yield on_start, on_done


def _progress_lines(total: int, done: int):
    started = time.monotonic()

    def on_done(spec, row):
        nonlocal done
        done += 1
        reason = f" {row.get('reason', '')}" if row["status"] != "ok" else ""
        wall = row.get("wall_s")
        took = f" in {float(wall):.1f} s" if wall not in (None, "") else ""
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        err.print(
            f"[{done}/{total}] {cell_label(spec)}: {row['status']}{took}{reason} "
            f"({minutes}:{seconds:02d} so far)",
            markup=False,
        )

    yield (lambda spec: None), on_done


def table_width() -> int | None:
    """The width tables must fit: the terminal's (COLUMNS respected), or None when the output
    goes to a file or a pipe, which gets every table whole."""
    return out.width if out.is_terminal or os.environ.get("COLUMNS") else None


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
    from ..report.labels import show

    value = row.get(key)
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


def left_out(skipped, code: int | None = None) -> None:
    """Each result folder left out, one line on stderr, then the exit: `code`, or where none is
    given 4 when a folder was left out (report.read.SKIPPED_EXIT)."""
    import typer

    from ..report.read import SKIPPED_EXIT

    for s in skipped:
        err.print(str(s), markup=False, highlight=False)
    code = code if code is not None else (SKIPPED_EXIT if skipped else 0)
    if code:
        raise typer.Exit(code)


def workloads_table(items) -> None:
    """`stbench list`: one line per workload."""
    items = list(items)
    name_width = max(len(w.name) for w in items) + 2
    for w in items:
        out.print(
            f"[bold]{w.name:<{name_width}}[/]{fit_text(w.summary, out.width - name_width)}",
            soft_wrap=False,
        )
    out.print(
        "stbench list WORKLOAD: its parameters, presets, strategies and data", soft_wrap=False
    )


def fit_text(text: str, width: int) -> str:
    """The text, or its first clauses that fit (a summary reads as 'what; details')."""
    if len(text) <= width:
        return text
    for sep in ("; ", ", "):
        clauses = text.split(sep)
        while len(clauses) > 1:
            clauses.pop()
            if len(shorter := sep.join(clauses)) <= width:
                return shorter
    words = text[: width - 2].rsplit(" ", 1)[0]
    return f"{words} …"


def workload_detail(w) -> None:
    """`stbench list WORKLOAD`: summary, strategies, data, parameters and presets, wrapped."""
    say = lambda text: out.print(text, soft_wrap=False)  # noqa: E731
    say(f"[bold]{w.name}[/]: {w.summary}")
    say(f"strategies: {', '.join(w.strategies)}")
    for source in w.data_sources:
        say(f"data: {source}")
    if w.target_ratio:
        say(
            escape(
                f"default target (time to quality): {w.target_ratio:g} x the naive baseline; "
                f"{w.target_note}"
            )
        )
    table = Table(show_header=True, box=None, padding=(0, 2, 0, 0))
    table.add_column("parameter", no_wrap=True)
    table.add_column("default", no_wrap=True)
    table.add_column("meaning", overflow="fold")
    own = [p.name for p in w.params]  # the workload's own first, then the trainer's common ones
    for p in sorted(w.all_params.values(), key=lambda p: p.name not in own):
        allowed = " | ".join(map(str, p.choices)) if p.choices else p.kind.__name__
        if p.minimum is not None:
            allowed += f" >= {p.minimum:g}"
        table.add_row(
            escape(p.name),
            escape(str(p.default)) if p.default != "" else '""',
            escape(f"{p.help} [{allowed}]"),
        )
    out.print(table)
    for name, values in w.presets.items():
        say(f"preset [bold]{name}[/]: " + ", ".join(f"{k}={v}" for k, v in values.items()))


def peak_text(p: dict) -> str:
    if "unavailable" in p:
        return f"unavailable: {p['unavailable']}"
    tf32 = f", {p['tf32_matmul_gflops']:,.1f} tf32" if p.get("tf32_matmul_gflops") else ""
    return (
        f"{p['matmul_gflops']:,.1f} GFLOP/s {p.get('matmul_precision', 'fp32')} matmul{tf32}, "
        f"{p['mem_gbps']:.1f} GB/s copy ({p['threads']} threads, measured)"
    )


def env_report(env, peaks: dict) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2))
    d = env.to_dict()
    for key in (
        "host",
        "os",
        "python",
        "cpu_model",
        "cores_physical",
        "cores_logical",
        "threads",
        "ram_gb",
        "torch",
        "cuda",
        "cudnn",
        "nccl",
        "gpu_count",
    ):
        table.add_row(key, str(d[key]))
    for g in env.gpus:
        label = (
            f"gpu {g['index']}" if g.get("index") is not None else "gpu (not usable by this torch)"
        )
        memory = f"{g['memory_mb'] / 1024:.1f} GiB" if g.get("memory_mb") else "memory unknown"
        table.add_row(
            label, f"{g.get('name')}, {memory}, driver {g.get('driver')}, {g.get('uuid')}"
        )
    if not env.gpus:
        table.add_row("gpus (NVML)", "none visible")
    for device, p in peaks.items():
        table.add_row(f"peak {device}", peak_text(p))
    out.print(table)


_STATUS = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}


def check_line(check) -> None:
    """One line per doctor check as it finishes."""
    out.print(
        f"[{_STATUS[check.status]}]{check.status}[/] {check.name} {check.device}: {check.detail}",
        markup=True,
    )


def checks_table(checks, path: Path) -> None:
    table = Table(title=f"stbench doctor: {path}", show_lines=False)
    for col in ("check", "device", "status"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.name, c.device, f"[{_STATUS[c.status]}]{c.status}[/]")
    out.print(table)

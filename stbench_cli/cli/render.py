"""What stbench shows on the terminal: its two consoles, errors and warnings, `list`, `env` and
`doctor`. Rich lives here and in render_run.py (a study's progress and its summary) only."""

from __future__ import annotations

import os
import signal
import textwrap
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)
# an error stays one line, however narrow the terminal
err = Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    from rich.markup import escape  # a message may hold brackets: --set key=[...]

    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")


def note(message: str) -> None:
    """A line of progress that is neither a result nor a warning (on stderr, as the bar): on a
    terminal folded between words at its width, a long word (a path) never cut, so it copies
    whole; in a log or a pipe one line, whole for grep."""
    if err.is_terminal:
        message = textwrap.fill(message, err.width, break_long_words=False, break_on_hyphens=False)
    err.print(message, markup=False)


def exit_code(exc: KeyboardInterrupt) -> int:
    """What a shell reports for the signal that stopped the command (cli.Stopped's, or SIGINT's
    for Ctrl-C: 130)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


@contextmanager
def interrupted(progress):
    """Ctrl-C (or SIGTERM, SIGHUP) inside: one line saying how far it got (`progress()`), exit
    130 (143, 129) as a shell reports the signal, and no traceback (the user or the scheduler
    asked it to stop; nothing went wrong)."""
    import typer

    try:
        yield
    except KeyboardInterrupt as exc:  # or a stop signal (cli.Stopped): exit 128 + its number
        err.print(f"interrupted: {progress()}", markup=False)
        raise typer.Exit(exit_code(exc)) from None


def table_width() -> int | None:
    """The width tables must fit: the terminal's (COLUMNS respected), or None when the output
    goes to a file or a pipe, which gets every table whole."""
    return out.width if out.is_terminal or os.environ.get("COLUMNS") else None


def folded(text: str) -> str:
    """An answer in lines that fit the terminal (100 columns into a file or a pipe), folded
    between words; a step's line ("  ...") goes on indented."""
    width = table_width() or 100
    return "\n".join(
        textwrap.fill(line, width, subsequent_indent="    " if line.startswith("  ") else "")
        for line in text.splitlines()
    )


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
    if w.size:  # what `stbench gpu-vs-cpu` sweeps
        sizes = ", ".join(
            f"{w.size.counted(v):,.0f}"
            if w.size.count is None
            else f"{v} ({w.size.counted(v):,.0f})"
            for v in w.size.values
        )
        say(escape(f"size axis of gpu-vs-cpu ({w.size.param}, in {w.size.unit}): {sizes}"))
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


_STATUS = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow", "UNSURE": "yellow"}


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
    table.add_column("s", justify="right")
    for c in checks:
        seconds = "" if c.seconds is None else f"{c.seconds:.1f}"
        table.add_row(c.name, c.device, f"[{_STATUS[c.status]}]{c.status}[/]", seconds)
    out.print(table)


def out_folder(path: Path | None, flag: str = "--out") -> Path | None:
    """A folder a command writes into (None: none asked): errors.a_folder's one line where a
    file stands in its place."""
    from ..errors import a_folder

    return None if path is None else a_folder(path, flag)

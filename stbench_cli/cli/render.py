"""Everything stbench shows on the terminal (Rich lives here and only here)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # an error stays one line, however narrow the terminal


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}")


def cell_label(spec) -> str:
    world = ""
    if spec.distributed:
        world = f" x{spec.world_size}" if spec.nodes == 1 else f" {spec.nodes}x{spec.nproc_per_node}"
    return f"{spec.device} {spec.strategy}{world} batch={spec.batch_size} epochs={spec.epochs} repeat={spec.repeat}"


@contextmanager
def progress(total: int, done: int):
    """A progress bar over the matrix; yields (on_start, on_done) callbacks for run_matrix."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=False)
    with bar:
        task = bar.add_task("cells", total=total, completed=done)

        def on_start(spec):
            bar.update(task, description=cell_label(spec))

        def on_done(spec, row):
            status = row["status"]
            if status != "ok":
                bar.console.print(f"  {cell_label(spec)}: [yellow]{status}[/] {row.get('reason', '')}")
            bar.advance(task)

        yield on_start, on_done


def run_summary(rows: list[dict], folder: Path) -> None:
    table = Table(title=f"results in {folder}", show_lines=False)
    for col in ("device", "strategy", "world", "nodes", "batch", "epochs", "rep", "status", "wall s", "samples/s", "val",
                "naive"):
        table.add_column(col, justify="right" if col not in ("device", "strategy", "status") else "left")
    for r in rows:
        def num(key, fmt="{:.3g}"):
            try:  # rows come back from runs.csv as text
                return fmt.format(float(r.get(key)))
            except (TypeError, ValueError):
                return "-"
        table.add_row(r["device"], r["strategy"], str(r["world_size"]), str(r.get("nodes") or 1), str(r["batch_size"]),
                      str(r["epochs"]),
                      str(r["repeat"]), r["status"], num("wall_s", "{:.2f}"), num("samples_per_s", "{:,.0f}"),
                      num("val_value"), num("naive_baseline"))
    out.print(table)


def workloads_table(items) -> None:
    for w in items:
        out.print(f"[bold]{w.name}[/] — {w.summary}")
        out.print(f"  strategies: {', '.join(w.strategies)}   presets: {', '.join(w.presets)}")
        if w.data_sources:
            out.print(f"  data: {'; '.join(w.data_sources)}")
        table = Table(show_header=True, box=None, padding=(0, 2))
        for col in ("parameter", "type", "default", "allowed", "help"):
            table.add_column(col)
        for p in w.all_params.values():
            allowed = ", ".join(map(str, p.choices)) if p.choices else (f">= {p.minimum:g}" if p.minimum is not None else "any")
            table.add_row(p.name, p.kind.__name__, str(p.default), allowed, p.help)
        out.print(table)
        for name, values in w.presets.items():
            out.print(f"  preset [bold]{name}[/]: " + ", ".join(f"{k}={v}" for k, v in values.items()))
        out.print()


def env_report(env, peaks: dict) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2))
    d = env.to_dict()
    for key in ("host", "os", "python", "cpu_model", "cores_physical", "cores_logical", "threads", "ram_gb",
                "torch", "cuda", "cudnn", "nccl", "gpu_count"):
        table.add_row(key, str(d[key]))
    for g in env.gpus:
        table.add_row(f"gpu {g['index']}", f"{g['name']}, {g['memory_mb'] / 1024:.1f} GiB, driver {g['driver']}")
    if not env.gpus:
        table.add_row("gpus (NVML)", "none visible")
    for device, p in peaks.items():
        table.add_row(f"peak {device}", f"{p['matmul_gflops']:,.1f} GFLOP/s fp32 matmul, {p['mem_gbps']:.1f} GB/s copy "
                                         f"({p['threads']} threads, measured)")
    out.print(table)

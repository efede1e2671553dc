"""lstm-era5's three training pipelines side by side: stbench's per-item and vectorized loaders
and the study's own notebook loop, 2 epochs of the paper preset with workers=0.

    python benchmarks/lstm_pipelines.py [--rounds 3] [--epochs 2] [--threads 0] [--before BIN]

Every run is a fresh process (allocator, thread pool and caches start cold, as a cell's do), and
the pipelines take turns round by round (ABC.., ..CBA) so that the load of a shared machine falls
on all of them alike; the figures are medians over rounds. `--before BIN`: also run the stbench
pipelines with the `stbench` of another checkout's venv (e.g. /tmp/base/.venv/bin), in the same
rounds. The notebook runs twice: as written (glibc's default allocator) and with the cell's
allocator policy (stbench.child.allocator), to tell the loader's share from the allocator's.
A benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stbench.store.files import read_runs

COLUMNS = ("train_s", "data_s", "compute_s")


def notebook(epochs: int, threads: int, keep: bool) -> dict:
    """The study's loop: its per-item Dataset, a shuffling DataLoader, Adam, MSE; train time is
    the steps' own seconds (waiting for the batch, then forward, backward, step), evaluation
    after each epoch left out, as stbench's train_s leaves it out."""
    import torch
    from torch.utils.data import DataLoader

    from stbench.child.allocator import keep_freed_memory
    from stbench.contract import BuildContext
    from stbench.plan.registry import get
    from stbench.workloads.lstm_era5.task import make_task

    if keep:
        keep_freed_memory()
    if threads:
        torch.set_num_threads(threads)
    workload = get("lstm-era5")
    params = {p.name: p.default for p in workload.params}
    params.update(
        {k: v for k, v in workload.presets["paper"].items() if k not in ("batch_size", "epochs")}
    )
    task = make_task({**params, "workers": 0}, BuildContext(seed=0))
    model = task.model.module
    optimizer = torch.optim.Adam(model.parameters(), lr=params["lr"])
    loader = DataLoader(
        task.data.train,
        batch_size=128,
        shuffle=True,
        drop_last=True,  # stbench drops it too
        generator=torch.Generator().manual_seed(0),
    )
    data = compute = 0.0
    for _ in range(epochs):
        model.train()
        losses = []
        t = time.perf_counter()
        for x, y in loader:
            t1 = time.perf_counter()
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            t2 = time.perf_counter()
            data, compute, t = data + t1 - t, compute + t2 - t1, t2
            losses.append(loss.detach())
        model.eval()
        with torch.no_grad():
            for x, y in DataLoader(task.data.val, batch_size=128):
                model(x)
    return {
        "train_s": data + compute,
        "data_s": data,
        "compute_s": compute,
        "loss": torch.stack(losses).mean().item(),
    }  # the last epoch's mean, as stbench's final_train_loss


def stbench_cell(
    bin_dir: Path, loader: str, epochs: int, threads: int, extra: tuple[str, ...]
) -> dict:
    """One `stbench run` of one cell in its own result folder; its runs.csv row."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            str(bin_dir / "stbench"),
            "run",
            "lstm-era5",
            "--preset",
            "paper",
            "--epochs",
            str(epochs),
            "--set",
            "workers=0",
            "--set",
            f"loader={loader}",
            "--set",
            f"threads={threads}",
            *extra,
            "--out",
            out,
        ]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        (row,) = read_runs(next(Path(out).glob("*/runs.csv")).parent)
    return {**{c: row[c] for c in COLUMNS}, "loss": row["final_train_loss"]}


def run_notebook(epochs: int, threads: int, keep: bool) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--notebook",
        "--epochs",
        str(epochs),
        "--threads",
        str(threads),
    ]
    out = subprocess.run(
        [*cmd, *(["--keep"] if keep else [])], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.splitlines()[-1])


def pipelines(args) -> dict:
    here = Path(sys.executable).parent
    runs = {
        f"stbench {loader}": (
            lambda loader=loader: stbench_cell(here, loader, args.epochs, args.threads, ())
        )
        for loader in ("per-item", "vectorized")
    }
    if args.before:
        runs.update(
            {
                f"before {loader}": (
                    lambda loader=loader: stbench_cell(
                        Path(args.before), loader, args.epochs, args.threads, ()
                    )
                )
                for loader in ("per-item", "vectorized")
            }
        )
    runs["notebook"] = lambda: run_notebook(args.epochs, args.threads, keep=False)
    runs["notebook, cell's allocator"] = lambda: run_notebook(args.epochs, args.threads, keep=True)
    return runs


def table(results: dict) -> str:
    base = statistics.median(r["train_s"] for r in results["notebook"])
    lines = [
        "| pipeline | train s | data s | compute s | notebook train / train | loss "
        "| rounds (train s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        med = {c: statistics.median(r[c] for r in rows) for c in (*COLUMNS, "loss")}
        each = ", ".join(f"{r['train_s']:.1f}" for r in rows)
        lines.append(
            f"| {name} | {med['train_s']:.2f} | {med['data_s']:.2f} | {med['compute_s']:.2f} | "
            f"{base / med['train_s']:.2f}x | {med['loss']:.5f} | {each} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument(
        "--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)"
    )
    ap.add_argument(
        "--before", help="bin folder of another checkout's venv, run in the same rounds"
    )
    ap.add_argument(
        "--notebook", action="store_true", help=argparse.SUPPRESS
    )  # one notebook run (a child)
    ap.add_argument("--keep", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.notebook:
        print(json.dumps(notebook(args.epochs, args.threads, args.keep)))
        return
    runs = pipelines(args)
    results: dict = {name: [] for name in runs}
    for r in range(args.rounds):
        for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            results[name].append(runs[name]())
            last = {k: round(v, 3) for k, v in results[name][-1].items()}
            print(f"round {r} {name}: {json.dumps(last)}", flush=True)
    print(table(results))


if __name__ == "__main__":
    main()

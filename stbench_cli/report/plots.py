"""PNG plots for `compare --plot` (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..store.rows import PHASE_COLUMNS  # noqa: E402

PHASES = list(PHASE_COLUMNS)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_plots(df: pd.DataFrame, folder: Path) -> list[Path]:
    """time-vs-epochs per device, speedup/efficiency vs nproc, stacked phase bars."""
    folder.mkdir(parents=True, exist_ok=True)
    ok = df[df["status"] == "ok"]
    paths = []
    for workload, w in ok.groupby("workload"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, g in w.groupby("label"):
            med = g.groupby("epochs")["wall_s"].median()
            ax.plot(med.index, med.values, marker="o", label=label)
        ax.set(xlabel="epochs", ylabel="wall time (s)", title=f"{workload}: wall time")
        ax.legend()
        paths.append(_save(fig, folder / f"{workload}-wall-vs-epochs.png"))

        ddp = w[w["strategy"] == "ddp"]
        if ddp["world_size"].nunique() > 1:
            fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4))
            for label, g in ddp.groupby("label"):
                med = g.groupby("world_size")["samples_per_s"].median()
                if 1 in med.index:
                    speed = med / med[1]
                    a1.plot(speed.index, speed.values, marker="o", label=label)
                    a2.plot(speed.index, 100 * speed.values / speed.index, marker="o", label=label)
            a1.plot(sorted(ddp["world_size"].unique()), sorted(ddp["world_size"].unique()), "k--", label="ideal")
            a1.set(xlabel="nproc", ylabel="speedup", title="speedup vs nproc=1")
            a2.set(xlabel="nproc", ylabel="efficiency (%)", title="scaling efficiency")
            a1.legend()
            paths.append(_save(fig, folder / f"{workload}-scaling.png"))

        keys = ["label", "strategy", "world_size", "batch_size", "epochs"]
        phases = w.groupby(keys)[PHASES].median()
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(phases)), 4))
        bottom = pd.Series(0.0, index=phases.index)
        names = [" ".join(map(str, k)) for k in phases.index]
        for p in PHASES:
            ax.bar(names, phases[p], bottom=bottom, label=p[:-2])
            bottom += phases[p]
        ax.set(ylabel="seconds", title=f"{workload}: where the time went")
        ax.tick_params(axis="x", rotation=60)
        ax.legend()
        paths.append(_save(fig, folder / f"{workload}-phases.png"))
        if "param_mb" in w.columns and w["param_mb"].notna().any():
            from .memory import memory_figure
            from .tables import _varying, keys_of

            varying = _varying(w, keys_of(w)) or ["label"]
            paths.append(_save(memory_figure(w, varying, workload), folder / f"{workload}-memory.png"))
    return paths

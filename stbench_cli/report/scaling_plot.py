"""The scaling study as a plot (`compare --plot`): per workload, samples/s and milliseconds per
gradient synchronisation against the world size, one line per node count, so the jump where a
new node joins shows. Kept apart from plots.py: its own figure, from the same pure table data."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .scaling import with_layout  # noqa: E402


def write_scaling_plot(df: pd.DataFrame, folder: Path) -> list[Path]:
    """`<workload>-scaling-nodes.png` for each workload whose multi-process rows span two worlds."""
    df = with_layout(df)
    multi = df[(df["strategy"] != "single") & (df["status"] == "ok")].copy()
    multi["ms_per_sync"] = 1000 * multi["sync_s"] / multi["sync_count"].where(multi["sync_count"] > 0)
    paths = []
    for workload, w in multi.groupby("workload"):
        if len(w[["world_size", "nodes"]].drop_duplicates()) < 2:
            continue
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4))
        for (label, nodes), g in w.groupby(["label", "nodes"]):
            med = g.groupby("world_size")[["samples_per_s", "ms_per_sync"]].median()
            name = f"{label}, {nodes} node{'s' if nodes > 1 else ''}"
            a1.plot(med.index, med["samples_per_s"], marker="o", label=name)
            a2.plot(med.index, med["ms_per_sync"], marker="o", label=name)
        a1.set(xlabel="world size (processes)", ylabel="samples/s", title=f"{workload}: throughput")
        a2.set(xlabel="world size (processes)", ylabel="ms per gradient sync", title="one synchronisation")
        a1.legend()
        fig.tight_layout()
        path = folder / f"{workload}-scaling-nodes.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths

"""PNG plots for `compare --plot`: the report's timing figures (report.figures), one line per
cell, so no point is ever a median over different cells."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import figures
from .memory import memory_picture


def write_plots(df: pd.DataFrame, folder: Path) -> list[Path]:
    """Per workload: time vs epochs per cell, stacked phase shares, DDP scaling and memory, where the
    rows have something to show; the paths written. df is document.runs_frame's (sync_ms)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for workload, w in df.groupby("workload", sort=True):
        for pic in (figures.time_vs_epochs(w, workload), figures.phase_bars(w, workload), figures.scaling(w, workload),
                    memory_picture(w, workload)):
            if pic is not None:
                path = folder / f"{pic.name}.png"
                path.write_bytes(pic.png)
                paths.append(path)
    return paths

"""Where the memory went, per rank: parameters, gradients, optimizer state and the activation
peak of each cell, beside its time (pure: rows in, a table or a figure out; no torch)."""

from __future__ import annotations

import pandas as pd

from .figures import Picture, caption
from .frame import keys_of, varying
from .stats import format_number
from .style import png

PARTS = {"param_mb": "parameters", "grad_mb": "gradients", "optim_state_mb": "optimizer state",
         "activation_peak_mb": "activations (peak)"}
# Okabe-Ito: distinguishable with any colour vision
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")


def _cells(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    ok = df[(df["status"] == "ok")]
    if "param_mb" not in ok.columns or ok["param_mb"].isna().all():
        return ok.iloc[0:0]
    ok = ok[ok["param_mb"].notna()]
    return ok.groupby(keys, sort=True, dropna=False)[[*PARTS, "wall_s"]].median().reset_index()


def memory_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per workload: median MiB per rank of each part, and wall seconds, per cell (rows written
    before stbench counted memory are left out)."""
    out = {}
    for workload, w in df.groupby("workload", sort=True):
        keys = varying(w, keys_of(df)) or ["label"]
        cells = _cells(w, keys)
        if cells.empty:
            continue
        for col in [*PARTS, "wall_s"]:
            cells[col] = [format_number(v) for v in cells[col]]
        table = cells.rename(columns={"label": "device", **PARTS, "wall_s": "wall s"})
        table.attrs["keys"] = ["device" if k == "label" else k for k in keys]  # what a narrow terminal repeats
        out[workload] = table
    return out


def memory_picture(w: pd.DataFrame, workload: str):
    """Stacked horizontal bars of the memory parts per cell, and each cell's wall time beside
    them on the same rows; None where no row counted memory."""
    keys = varying(w, keys_of(w)) or ["label"]
    cells = _cells(w, keys)
    if cells.empty:
        return None
    import textwrap

    import matplotlib.pyplot as plt

    # name a cell by what varies among the cells drawn (the workload's other studies left out)
    named = [k for k in keys if cells[k].astype(str).nunique() > 1] or keys[:1]
    names = ["\n".join(textwrap.wrap(", ".join(str(v) if k == "label" else f"{k.removeprefix('p.')}={v}"
                                                 for k, v in zip(named, row)), 40))
             for row in cells[named].itertuples(index=False)]
    height = 1.6 + sum(0.2 + 0.18 * (name.count("\n") + 1) for name in names)  # room for wrapped names
    fig, (mem, time) = plt.subplots(1, 2, figsize=(10, height), sharey=True, layout="constrained",
                                    gridspec_kw={"width_ratios": [3, 1.4]})
    left = pd.Series(0.0, index=cells.index)
    for (col, label), colour in zip(PARTS.items(), COLOURS):
        mem.barh(names, cells[col].fillna(0), left=left, label=label, color=colour)
        left += cells[col].fillna(0)
    mem.set(xlabel="MiB per rank (max over ranks)", title=f"{workload}: where the memory went")
    mem.invert_yaxis()  # the first cell on top
    time.barh(names, cells["wall_s"], color="#555555")
    time.set(xlabel="wall time (s)", title="time of the same cells")
    # below everything, in space the constrained layout keeps free for it
    fig.legend(*mem.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    text = caption("per rank, the maximum over ranks: parameters, gradients and optimizer state counted from "
                   "the tensors the rank holds; activations: one step's peak above its start less its gradients",
                   "medians over repeats", f"cells differ in {', '.join('device' if k == 'label' else k.removeprefix('p.') for k in named)}"
                   if len(cells) > 1 else "")
    return Picture(f"{workload}-memory", f"{workload}: where the memory went", text, png(fig))

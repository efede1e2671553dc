"""`stbench report`: what the report holds, per workload (pure: rows in, tables and PNGs out).

The result rows of every study folder (runs, epochs, system), each tagged with its folder
(`study`), become one Section per workload: the study table in the published layout, the
phase shares, data-parallel scaling, and the figures. html.py writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import figures, quality, tables
from .memory import memory_picture, memory_tables
from .figures import Picture
from .machines import machine_table

STUDY_TITLE = ("wall time (s) by hardware: median ± 95% CI half-width over repeats, "
               "speedup against the first column")


@dataclass(frozen=True)
class Section:
    workload: str
    tables: tuple[tuple[str, pd.DataFrame], ...]
    pictures: tuple[Picture, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    machines: pd.DataFrame  # one line per labelled hardware
    studies: pd.DataFrame  # one line per result folder
    sections: tuple[Section, ...] = field(default_factory=tuple)


def numeric(rows: list[dict], text: tuple[str, ...] = ("study", "run_id")) -> pd.DataFrame:
    """epochs.csv / system.csv rows as numbers (they come back from the files as text)."""
    df = pd.DataFrame(rows)
    for col in df.columns:
        if col not in text:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def runs_frame(runs: list[dict], epochs: pd.DataFrame) -> pd.DataFrame:
    """The runs as tables.frame has them (each tagged with its `study` folder), with the ms
    of exposed gradient sync per training step from epochs.csv."""
    df = tables.frame(runs)
    if not epochs.empty:
        per_run = epochs.groupby(["study", "run_id"])[["sync_s", "steps"]].sum().reset_index()
        per_run["sync_ms"] = 1000 * per_run["sync_s"] / per_run["steps"].where(per_run["steps"] > 0)
        df = df.merge(per_run[["study", "run_id", "sync_ms"]], on=["study", "run_id"], how="left")
    else:
        df["sync_ms"] = float("nan")
    return df


def section(df: pd.DataFrame, w: pd.DataFrame, workload: str, epochs: pd.DataFrame, system: pd.DataFrame) -> Section:
    """One workload's tables, figures and the notes on what could not be drawn."""
    found = []
    main = tables.pivot(df[df["workload"] == workload], "wall_s", "epochs", "device", first_is_baseline=True)
    found.append((STUDY_TITLE, main[workload]))
    phases, scale = tables.phase_shares(w), tables.scaling(w)
    if workload in phases:
        found.append(("where the time went: median share of train + eval time", phases[workload]))
    if workload in scale:
        found.append(("data-parallel scaling against the smallest world", scale[workload]))
    memory = memory_tables(w, tables.keys_of, tables._varying)
    if workload in memory:
        found.append(("where the memory went: MiB per rank, median", memory[workload]))
    pictures, notes = [], []
    for pic, note in ((figures.time_vs_epochs(w, workload), "no cell ran at two or more epoch counts: no time-vs-epochs plot"),
                      (figures.phase_bars(w, workload), "no finished cell: no phase bars"),
                      (figures.scaling(w, workload), ""),
                      (memory_picture(w, workload), ""),
                      (quality.time_to_quality(w, epochs, workload), "no cell ran two or more epochs with a validation metric (epochs.csv): no time-to-quality plot")):
        if pic is not None:
            pictures.append(pic)
        elif note:
            notes.append(note)
    pictures += quality.system_timelines(w, system, workload)
    return Section(workload, tuple(found), tuple(pictures), tuple(notes))


def build(runs: list[dict], epochs: list[dict], system: list[dict], studies: pd.DataFrame) -> Report:
    """The report of result rows tagged with their `study` folder."""
    ep, sy = numeric(epochs), numeric(system)
    df = runs_frame(runs, ep)
    sections = tuple(section(df, w, workload, ep, sy) for workload, w in df.groupby("workload", sort=True))
    return Report(machine_table(df), studies, sections)

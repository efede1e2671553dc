"""`stbench report`: what the report holds, per study (pure: rows in, tables and PNGs out).

The result rows of every folder (runs, epochs, system), each tagged with its folder (`study`),
its study (`study_key`) and the study's command (`question`), become one Section per study,
headed by its question: the study table in the published layout with its figure first, then
each further table with the figure that illustrates it. html.py writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from . import figures, quality, tables
from .ttt import TITLE as TTT_TITLE, ttt_tables
from .frame import numeric, runs_frame
from .studies import studies
from .memory import memory_picture, memory_tables
from .figures import Picture
from .machines import machine_table

STUDY_TITLE = ("wall time (s) by hardware: median ± 95% CI half-width over repeats, "
               "speedup against the first column")


@dataclass(frozen=True)
class Block:
    """A table and the figure that illustrates it (either may be missing)."""

    title: str
    table: pd.DataFrame | None = None
    picture: Picture | None = None


@dataclass(frozen=True)
class Section:
    workload: str
    question: str  # the command that made the study
    anchor: str
    blocks: tuple[Block, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    machines: pd.DataFrame  # one line per labelled hardware
    studies: pd.DataFrame  # one line per result folder
    sections: tuple[Section, ...] = field(default_factory=tuple)


def _blocks(w: pd.DataFrame, workload: str, epochs: pd.DataFrame) -> tuple[list[Block], list[str]]:
    main = tables.pivot(w, "wall_s", "epochs", "device", first_is_baseline=True)[workload]
    blocks, notes = [Block(STUDY_TITLE, main, figures.time_vs_epochs(w, workload))], []
    if blocks[0].picture is None:
        notes.append("no cell ran at two or more epoch counts: no time-vs-epochs plot")
    # a study of time to quality: its score and its curves come right after the headline
    ttq, ttt = quality.time_to_quality(w, epochs, workload), ttt_tables(w).get(workload)
    if ttq is None:
        notes.append("no cell evaluated twice or more (epochs.csv): no time-to-quality plot")
    if ttq is not None or ttt is not None:
        blocks.append(Block(TTT_TITLE if ttt is not None else "time to quality", ttt, ttq))
    for title, table, picture in (
            ("where the time went: median share of train + eval time", tables.phase_shares(w), figures.phase_bars),
            ("data-parallel scaling against the smallest world", tables.scaling(w), figures.scaling),
            ("where the memory went: MiB per rank, median", memory_tables(w), memory_picture)):
        if workload in table:
            blocks.append(Block(title, table[workload], picture(w, workload)))
    return blocks, notes


def section(w: pd.DataFrame, workload: str, question: str, number: int, epochs: pd.DataFrame,
            system: pd.DataFrame) -> Section:
    """One study's blocks and the notes on what could not be drawn; its figures are named by
    the study's number, so two studies of a workload never overwrite each other's PNGs."""
    folders = set(w["study"])
    ep = epochs[epochs["study"].isin(folders)] if not epochs.empty else epochs
    sy = system[system["study"].isin(folders)] if not system.empty else system
    blocks, notes = _blocks(w, workload, ep)
    blocks += [Block(p.title, picture=p) for p in quality.system_timelines(w, sy, workload)]
    anchor = f"study-{number}"
    named = [replace(b, picture=replace(b.picture, name=f"{anchor}-{b.picture.name}")) if b.picture else b
             for b in blocks]
    return Section(workload, question, anchor, tuple(named), tuple(notes))


def build(runs: list[dict], epochs: list[dict], system: list[dict], studies_table: pd.DataFrame,
          defaults=None) -> Report:
    """The report of result rows tagged with their folder, study and question."""
    ep, sy = numeric(epochs), numeric(system)
    df = runs_frame(runs, ep, defaults)
    sections = tuple(section(w, workload, question, i, ep, sy)
                     for i, (workload, question, w) in enumerate(studies(df), 1))
    return Report(machine_table(df), studies_table, sections)

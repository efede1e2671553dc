"""`stbench report`: what the report holds, per study (pure: rows in, tables and PNGs out).

The result rows of every folder (runs, epochs, system), each tagged with its folder (`study`),
its study (`study_key`) and the study's command (`question`), become one Section per study,
headed by its folder and question and opened by its finding (report.findings): the table behind
the finding, the study table in the published layout with its figure, then each further table
with the figure that illustrates it. The report opens with every finding, the hardware and a
headline figure. html.py writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd

from . import figures, quality, tables
from .ttt import TITLE as TTT_TITLE, ttt_tables
from .frame import numeric, runs_frame
from .findings import Finding, Flagger, finding_of
from .studies import folders, studies
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
    name: str = ""  # its result folder(s)
    finding: Finding | None = None


@dataclass(frozen=True)
class Report:
    machines: pd.DataFrame  # one line per labelled hardware
    studies: pd.DataFrame  # one line per result folder
    sections: tuple[Section, ...] = field(default_factory=tuple)
    headline: tuple[Section, Picture] | None = None  # the figure the report opens with, and its study


# the kind of study whose figure heads the report, most telling first (report.findings' kinds)
HEADLINE_KINDS = ("device", "target", "scaling", "batch", "precision", "size", "tradeoff", "epochs")
HEADLINE_FIGURE = {"target": "time-to-quality", "scaling": "scaling", "tradeoff": "memory", "size": "memory"}


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
            system: pd.DataFrame, flagger: Flagger | None = None) -> Section:
    """One study's finding, its blocks (the finding's table first) and the notes on what could
    not be drawn; its figures are named by the study's number, so two studies of a workload
    never overwrite each other's PNGs."""
    in_study = set(w["study"])
    ep = epochs[epochs["study"].isin(in_study)] if not epochs.empty else epochs
    sy = system[system["study"].isin(in_study)] if not system.empty else system
    finding = finding_of(w, flagger)
    blocks, notes = _blocks(w, workload, ep)
    if finding.table is not None:  # the table behind the finding first, said once
        blocks = [Block(finding.title, finding.table)] + [
            replace(b, table=None) if b.title == finding.title else b for b in blocks]
        blocks = [b for b in blocks if b.table is not None or b.picture is not None]
    blocks += [Block(p.title, picture=p) for p in quality.system_timelines(w, sy, workload)]
    anchor = f"study-{number}"
    named = [replace(b, picture=replace(b.picture, name=f"{anchor}-{b.picture.name}")) if b.picture else b
             for b in blocks]
    return Section(workload, question, anchor, tuple(named), tuple(notes), folders(w, workload), finding)


def headline(sections: tuple[Section, ...]) -> tuple[Section, Picture] | None:
    """The figure the report opens with: of the most telling kind of study present (HEADLINE_KINDS),
    the study with the fewest cells that still compares two, its first figure."""
    def cells(s: Section) -> int:
        return max((len(b.table) for b in s.blocks if b.table is not None), default=0)

    for kind in HEADLINE_KINDS:
        found = [s for s in sections if s.finding and s.finding.kind == kind and cells(s) >= 2
                 and any(b.picture for b in s.blocks)]
        if found:
            best = min(found, key=cells)
            pictures = [b.picture for b in best.blocks if b.picture]
            wanted = [p for p in pictures if p.name.endswith(HEADLINE_FIGURE.get(kind, "-"))]
            return best, (wanted or pictures)[0]
    return None


def build(runs: list[dict], epochs: list[dict], system: list[dict], studies_table: pd.DataFrame,
          defaults=None, progress: Callable[[str], None] | None = None, flagger: Flagger | None = None) -> Report:
    """The report of result rows tagged with their folder, study and question; `progress` hears
    of each study as its figures are drawn (the slow part)."""
    ep, sy = numeric(epochs), numeric(system)
    df = runs_frame(runs, ep, defaults)
    found = studies(df)
    sections = []
    for i, (workload, question, w) in enumerate(found, 1):
        if progress:
            progress(f"[{i}/{len(found)}] {folders(w, workload)}")
        sections.append(section(w, workload, question, i, ep, sy, flagger))
    return Report(machine_table(df), studies_table, tuple(sections), headline(tuple(sections)))

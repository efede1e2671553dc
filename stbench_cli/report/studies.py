"""`compare`'s text, one section per study: headed by its folder and command, its finding
(report.findings) and the table that supports it first, and with `full` every other table:
the metric by epochs and hardware, time to target, where the time and memory went and
data-parallel scaling (pure).

A study is the folders that ran the same matrix (store.results.study_of), on one machine or
several; the machines become columns. Rows of two studies are never pooled: rows without a
study (a frame built by hand) are one study.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from .findings import Finding, Flagger, finding_of
from .fit import fit_table
from .memory import memory_tables
from .tables import check_baseline, markdown, phase_shares, pivot, scaling
from .order import sort_natural
from .ttt import TITLE as TTT_TITLE, asked, budgeted, reached_any, ttt_tables

DEFAULT_VIEW = ("wall_s", "epochs", "device", None)  # compare's own options: the finding's table

DETAILS = (("where the time went (share of train + eval)", phase_shares),
           ("data-parallel scaling against the smallest world", scaling),
           ("where the memory went (MiB per rank, median)", memory_tables))


def fold_pairs(heading: str, width: int) -> str:
    """A heading of key=value pairs folded between pairs to fit width, never inside a value
    (a value may hold spaces: "EPYC (2 cores)")."""
    lines: list[str] = []
    for pair in heading.split(", "):
        if lines and len(lines[-1]) + 2 + len(pair) < width:  # < : room for the comma that ends a line
            lines[-1] += f", {pair}"
        else:
            lines.append(pair)
    return ",\n".join(lines)


def section(title: str, table: pd.DataFrame, width: int | None = None) -> str:
    """A titled Markdown table; with a width, split (never cut) to fit it (report.fit)."""
    if width is None:
        return f"{title}\n\n{markdown(table)}"
    parts = [textwrap.fill(title, width, break_on_hyphens=False)]  # a long title wraps, as the tables do
    for heading, piece in fit_table(table, width, markdown):
        parts.append((f"{fold_pairs(heading, width)}\n\n" if heading else "") + markdown(piece))
    return "\n\n".join(parts)


def studies(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(workload, question, rows) per study, by workload and then question."""
    if "study_key" not in df.columns:
        return [(w, "", g) for w, g in df.groupby("workload", sort=True)]
    out = [(g["workload"].iloc[0], str(g["question"].iloc[0]), g) for _, g in df.groupby("study_key", sort=False)]
    return sorted(out, key=lambda s: (s[0], s[1]))


def folders(s: pd.DataFrame, workload: str) -> str:
    """A study's name: its result folders ("a + b" where machines ran it into several), or the
    workload for rows that do not say where they came from."""
    if "study" not in s.columns:
        return workload
    return " + ".join(sorted(dict.fromkeys(PurePath(str(f)).name for f in s["study"])))


@dataclass(frozen=True)
class Part:
    """One study in compare: its name, its command, its finding and the tables after it."""

    name: str
    command: str
    finding: Finding
    tables: tuple[tuple[str, pd.DataFrame], ...]


def tables_of(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
              baseline: tuple[str, str] | None = None, full: bool = True, flagger: Flagger | None = None) -> list[Part]:
    """Per study: its finding and the table that supports it; with `full`, every other table too.
    A table asked for by name (--metric, --rows, --cols, --baseline) follows the finding in place
    of the finding's own."""
    if baseline:
        check_baseline(df, cols, baseline)
    asked_for = (metric, rows, cols, baseline) != DEFAULT_VIEW
    out = []
    for workload, question, s in studies(df):
        finding = finding_of(s, flagger)
        found = [] if asked_for or finding.table is None else [(finding.title, finding.table)]
        if full or asked_for:
            found += [t for t in _tables(s, workload, metric, rows, cols, baseline, full) if t[0] not in dict(found)]
        out.append(Part(folders(s, workload), question, finding, tuple(found)))
    return out


def _tables(s: pd.DataFrame, workload: str, metric: str, rows: str, cols: str, baseline, full: bool) -> list:
    """The tables compare printed before findings: the metric's pivot (under a time budget only in
    the full view: the wall time is the budget), time to target, and with `full` the details."""
    found = []
    ttt = ttt_tables(s).get(workload)
    if full or metric != "wall_s" or ttt is None or not budgeted(s):
        found.append((f"{metric} (median ± 95% CI half-width over repeats)",
                      pivot(s, metric, rows, cols, baseline, missing_baseline_ok=True)[workload]))
    if ttt is not None and (full or asked(s) or reached_any(s)):
        found.append((TTT_TITLE, sort_natural(ttt, ttt.attrs["keys"])))
    for title, build in DETAILS if full else ():
        table = build(s).get(workload)
        if table is not None:
            found.append((title, table))
    return found


HINT = ("Each study: its finding, then the table behind it. --full adds every other table (wall time, where the "
        "time and memory went, scaling); --rows/--cols/--metric pick the table.")


def _wrap(text: str, width: int | None, indent: str = "") -> str:
    if not width:
        return text
    return textwrap.fill(text, width, subsequent_indent=indent, break_on_hyphens=False)


def to_markdown(parts: list[Part], width: int | None = None, full: bool = True) -> str:
    """The sections as Markdown, each headed by its folder and command and opened by its finding;
    `width` fits a terminal (see report.fit); the hint to --full first."""
    text = [] if full else [_wrap(HINT, width)]
    for part in parts:
        text.append(_wrap(f"## {part.name}", width, "   ") + (f"\n{_wrap(part.command, width, '    ')}"
                                                                  if part.command else ""))
        text.append(_wrap(f"Finding: {part.finding.text}", width))
        text += [_wrap(f"! {flag}", width, "  ") for flag in part.finding.flags]
        text += [section(f"### {title}", table, width) for title, table in part.tables]
    return "\n\n".join(text) + "\n"


def report(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
           baseline: tuple[str, str] | None = None, width: int | None = None, full: bool = True) -> str:
    """The whole compare output as Markdown."""
    return to_markdown(tables_of(df, metric, rows, cols, baseline, full), width, full)

"""`compare`'s text, one section per study: the study's question (its command), its headline
table first, and with `full` where the time and memory went and data-parallel scaling (pure).

A study is the folders that ran the same matrix (store.results.study_of), on one machine or
several; the machines become columns. Rows of two studies are never pooled: rows without a
study (a frame built by hand) are one study.
"""

from __future__ import annotations

import textwrap

import pandas as pd

from .fit import fit_table
from .memory import memory_tables
from .tables import check_baseline, markdown, phase_shares, pivot, scaling
from .ttt import TITLE as TTT_TITLE, asked, budgeted, reached_any, ttt_tables

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


def tables_of(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
              baseline: tuple[str, str] | None = None, full: bool = True) -> list[tuple[str, list]]:
    """Per study: its heading and its (title, table) pairs, the headline table first (with
    `full` False, only the headline: the metric, or under a time budget the time to target)."""
    if baseline:
        check_baseline(df, cols, baseline)
    out = []
    for workload, question, s in studies(df):
        found = []
        ttt = ttt_tables(s).get(workload)
        # under a time budget the wall time is the budget plus evaluation: the summary leaves it
        # to the full view, and the time to target is the headline
        if full or metric != "wall_s" or ttt is None or not budgeted(s):
            found.append((f"{metric} (median ± 95% CI half-width over repeats)",
                          pivot(s, metric, rows, cols, baseline, missing_baseline_ok=True)[workload]))
        # a study of time to quality has its score in the headline, reached or not; a throughput
        # study's column of "0/2" only in the full view
        if ttt is not None and (full or asked(s) or reached_any(s)):
            found.append((TTT_TITLE, ttt))
        for title, build in DETAILS if full else ():
            table = build(s).get(workload)
            if table is not None:
                found.append((title, table))
        out.append((f"## {workload}: {question}" if question else f"## {workload}", found))
    return out


def to_markdown(parts: list[tuple[str, list]], width: int | None = None, full: bool = True) -> str:
    """The sections as Markdown; `width` fits a terminal (see report.fit)."""
    text = []
    for heading, found in parts:
        # a long command folds between words in a terminal (a file keeps it on one line)
        text.append(textwrap.fill(heading, width, subsequent_indent="   ", break_long_words=False,
                                  break_on_hyphens=False) if width else heading)
        text += [section(f"### {title}", table, width) for title, table in found]
    if not full:
        text.append("(--full adds every other table per study: where time and memory went, scaling)")
    return "\n\n".join(text) + "\n"


def report(df: pd.DataFrame, metric: str = "wall_s", rows: str = "epochs", cols: str = "device",
           baseline: tuple[str, str] | None = None, width: int | None = None, full: bool = True) -> str:
    """The whole compare output as Markdown."""
    return to_markdown(tables_of(df, metric, rows, cols, baseline, full), width, full)

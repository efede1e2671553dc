"""`stbench compare`: result rows in; the Markdown text out (one section per study), and
optionally compare.md, compare.csv and PNG plots written into a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ..errors import StbenchError
from . import studies
from .findings import Flagger
from .frame import numeric, runs_frame, summarize


def parse_baseline(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise StbenchError(f"--baseline {text!r} is malformed; expected key=value, e.g. device=cpu")
    return key, value


def compare(rows: list[dict], *, row_axis: str, cols: str, metric: str, baseline: str | None, out: Path | None,
            plot: bool, width: int | None = None, epochs: list[dict] = (), full: bool = False,
            defaults: Mapping[str, Mapping[str, object]] | None = None, flagger: Flagger | None = None) -> str:
    """The Markdown text, fitted to `width` for a terminal: per study its finding and the table
    that supports it (with `full`, every table); compare.md keeps every table whole and every
    detail. Rows (and epochs, for the plots) carry their result folder as `study`, their study
    as `study_key` and its command as `question`; `defaults` fill parameters older rows lack;
    `flagger` names what makes a study's numbers doubtful (noisy repeats, a busy machine)."""
    df = runs_frame(rows, numeric(list(epochs)), defaults)
    def tables(whole: bool):
        return studies.tables_of(df, metric, row_axis, cols, parse_baseline(baseline), full=whole, flagger=flagger)

    parts = tables(True) if full or out else None  # every table: for --full and compare.md
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(studies.to_markdown(parts))
        per_study = [summarize(s, metric).assign(study=question) for _, question, s in studies.studies(df)]
        summary = pd.concat(per_study, ignore_index=True).drop(columns=["values"])  # never pooled across studies
        summary.rename(columns={"label": "device"}).to_csv(out / "compare.csv", index=False)
    if plot:
        from .plots import write_plots

        write_plots(df, out or Path("."))
    return studies.to_markdown(parts if full else tables(False), width, full)

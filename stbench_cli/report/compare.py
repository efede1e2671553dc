"""`stbench compare`: result rows in; the Markdown text out (one section per study), and
optionally compare.md, compare.csv and PNG plots written into a folder."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ..errors import StbenchError
from . import studies
from .ttt import TITLE as TTT_TITLE
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
            defaults: Mapping[str, Mapping[str, object]] | None = None) -> str:
    """The Markdown text, fitted to `width` for a terminal; compare.md keeps every table whole
    and every detail. Rows (and epochs, for the plots) carry their result folder as `study`,
    their study as `study_key` and its command as `question`; `defaults` fill parameters older
    rows lack."""
    df = runs_frame(rows, numeric(list(epochs)), defaults)
    parts = studies.tables_of(df, metric, row_axis, cols, parse_baseline(baseline), full=True)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(studies.to_markdown(parts))
        per_study = [summarize(s, metric).assign(study=question) for _, question, s in studies.studies(df)]
        summary = pd.concat(per_study, ignore_index=True).drop(columns=["values"])  # never pooled across studies
        summary.rename(columns={"label": "device"}).to_csv(out / "compare.csv", index=False)
    if plot:
        from .plots import write_plots

        write_plots(df, out or Path("."))
    # the headline of a study: its metric, and its time to target where a run reached it (a
    # throughput study's column of "0/2" is in --full)
    shown = parts if full else [
        (heading, [f for i, f in enumerate(found) if i == 0 or (f[0] == TTT_TITLE and _any_reached(f[1]))])
        for heading, found in parts]
    return studies.to_markdown(shown, width, full)


def _any_reached(ttt: pd.DataFrame) -> bool:
    """Whether any run of a time-to-target table reached its target ("reached" reads k/n)."""
    return any(not str(v).startswith("0/") for v in ttt["reached"])

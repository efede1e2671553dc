"""`stbench compare`: result rows in; the Markdown report out, and optionally compare.md,
compare.csv and PNG plots written into a folder."""

from __future__ import annotations

from pathlib import Path

from ..errors import StbenchError
from . import tables


def parse_baseline(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise StbenchError(f"--baseline {text!r} is malformed; expected key=value, e.g. device=cpu")
    return key, value


def compare(rows: list[dict], *, row_axis: str, cols: str, metric: str, baseline: str | None, out: Path | None,
            plot: bool) -> str:
    df = tables.frame(rows)
    text = tables.report(df, metric=metric, rows=row_axis, cols=cols, baseline=parse_baseline(baseline))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        summary = tables.summarize(df, metric).drop(columns=["values"])
        summary.rename(columns={"label": "device"}).to_csv(out / "compare.csv", index=False)
    if plot:
        from .plots import write_plots
        from .scaling_plot import write_scaling_plot

        write_plots(df, out or Path("."))
        write_scaling_plot(df, out or Path("."))
    return text

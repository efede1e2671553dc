"""`stbench compare`: result rows in; the Markdown report out, and optionally compare.md,
compare.csv and PNG plots written into a folder."""

from __future__ import annotations

from pathlib import Path

from ..errors import StbenchError
from . import tables
from .document import numeric, runs_frame


def parse_baseline(text: str | None) -> tuple[str, str] | None:
    if not text:
        return None
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise StbenchError(f"--baseline {text!r} is malformed; expected key=value, e.g. device=cpu")
    return key, value


def compare(rows: list[dict], *, row_axis: str, cols: str, metric: str, baseline: str | None, out: Path | None,
            plot: bool, width: int | None = None, epochs: list[dict] = ()) -> str:
    """The Markdown report; fitted to `width` for a terminal, while compare.md keeps every
    table whole. Rows (and epochs, for the plots) carry their result folder as `study`."""
    df = runs_frame(rows, numeric(list(epochs)))
    options = dict(metric=metric, rows=row_axis, cols=cols, baseline=parse_baseline(baseline))
    text = tables.report(df, **options)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        summary = tables.summarize(df, metric).drop(columns=["values"])
        summary.rename(columns={"label": "device"}).to_csv(out / "compare.csv", index=False)
    if plot:
        from .plots import write_plots

        write_plots(df, out or Path("."))
    return tables.report(df, **options, width=width) if width else text

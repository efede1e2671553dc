"""The report as files: one self-contained report.html (every figure embedded as a data URI,
so it opens offline and travels as one file) and report.md with the PNGs beside it."""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from .document import Report
from .tables import markdown

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1180px;
       padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1.2rem; font-size: 0.86rem; }
th, td { border: 1px solid #d0d0d0; padding: 0.25rem 0.55rem; text-align: left; white-space: nowrap; }
th { background: #f1f3f5; } tr:nth-child(even) td { background: #fafafa; }
.scroll { overflow-x: auto; } table.wrap td { white-space: normal; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #444; max-width: 60rem; }
nav a { margin-right: 1rem; } .note { color: #666; font-style: italic; }
"""


def _table(df: pd.DataFrame, wrap: bool = False) -> str:
    """An HTML table; wrap lets long text (command lines) wrap instead of scrolling."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f'<div class="scroll"><table{" class=wrap" if wrap else ""}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _figure(pic) -> str:
    data = base64.b64encode(pic.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(pic.title)}">'
            f"<figcaption><b>{html.escape(pic.title)}.</b> {html.escape(pic.caption)}</figcaption></figure>")


def to_html(report: Report) -> str:
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>stbench report</title><style>{STYLE}</style></head><body>", "<h1>stbench report</h1>",
             "<nav>" + "".join(f'<a href="#{html.escape(s.workload)}">{html.escape(s.workload)}</a>'
                               for s in report.sections) + "</nav>",
             "<h2>Hardware</h2>", _table(report.machines), "<h2>Result folders</h2>", _table(report.studies, wrap=True)]
    for s in report.sections:
        parts.append(f'<h2 id="{html.escape(s.workload)}">{html.escape(s.workload)}</h2>')
        for title, table in s.tables:
            parts += [f"<h3>{html.escape(title)}</h3>", _table(table)]
        parts += [_figure(p) for p in s.pictures]
        parts += [f'<p class="note">{html.escape(n)}</p>' for n in s.notes]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def to_markdown(report: Report) -> str:
    parts = ["# stbench report", "## Hardware", markdown(report.machines), "## Result folders", markdown(report.studies)]
    for s in report.sections:
        parts.append(f"## {s.workload}")
        for title, table in s.tables:
            parts += [f"### {title}", markdown(table)]
        parts += [f"![{p.title}]({p.name}.png)\n\n*{p.title}.* {p.caption}" for p in s.pictures]
        parts += [f"_{n}_" for n in s.notes]
    return "\n\n".join(parts) + "\n"


def write(report: Report, out: Path) -> Path:
    """report.html, report.md and one PNG per figure into `out`; returns report.html's path."""
    out.mkdir(parents=True, exist_ok=True)
    for s in report.sections:
        for p in s.pictures:
            (out / f"{p.name}.png").write_bytes(p.png)
    (out / "report.md").write_text(to_markdown(report))
    path = out / "report.html"
    path.write_text(to_html(report))
    return path

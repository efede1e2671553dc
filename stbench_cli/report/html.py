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
.scroll { overflow-x: auto; max-width: 100%; } table.wrap td { white-space: normal; overflow-wrap: anywhere; }
h2 code, nav code { font-size: 0.85em; white-space: normal; overflow-wrap: anywhere; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #444; max-width: 60rem; }
nav ul { padding-left: 1.2rem; } nav li { margin: 0.15rem 0; } .note { color: #666; font-style: italic; }
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


def _contents(report: Report) -> str:
    """The table of contents: each workload, and under it its studies by their question."""
    items = []
    for workload in dict.fromkeys(s.workload for s in report.sections):
        studies = "".join(f'<li><a href="#{s.anchor}"><code>{html.escape(s.question)}</code></a></li>'
                          for s in report.sections if s.workload == workload)
        items.append(f"<li>{html.escape(workload)}<ul>{studies}</ul></li>")
    return ('<nav><h2>Contents</h2><ul><li><a href="#hardware">Hardware</a></li>'
            '<li><a href="#folders">Result folders</a></li>' + "".join(items) + "</ul></nav>")


def to_html(report: Report) -> str:
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>stbench report</title><style>{STYLE}</style></head><body>", "<h1>stbench report</h1>",
             _contents(report), '<h2 id="hardware">Hardware</h2>', _table(report.machines),
             '<h2 id="folders">Result folders</h2>', _table(report.studies, wrap=True)]
    for s in report.sections:
        parts.append(f'<h2 id="{s.anchor}">{html.escape(s.workload)}: <code>{html.escape(s.question)}</code></h2>')
        for b in s.blocks:
            parts.append(f"<h3>{html.escape(b.title)}</h3>")
            if b.table is not None:
                parts.append(_table(b.table))
            if b.picture is not None:
                parts.append(_figure(b.picture))
        parts += [f'<p class="note">{html.escape(n)}</p>' for n in s.notes]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def to_markdown(report: Report) -> str:
    parts = ["# stbench report", "## Hardware", markdown(report.machines), "## Result folders", markdown(report.studies)]
    for s in report.sections:
        parts.append(f"## {s.workload}: `{s.question}`")
        for b in s.blocks:
            parts.append(f"### {b.title}")
            if b.table is not None:
                parts.append(markdown(b.table))
            if b.picture is not None:
                parts.append(f"![{b.picture.title}]({b.picture.name}.png)\n\n*{b.picture.title}.* {b.picture.caption}")
        parts += [f"_{n}_" for n in s.notes]
    return "\n\n".join(parts) + "\n"


def write(report: Report, out: Path) -> Path:
    """report.html, report.md and one PNG per figure into `out`; returns report.html's path."""
    out.mkdir(parents=True, exist_ok=True)
    for s in report.sections:
        for b in s.blocks:
            if b.picture is not None:
                (out / f"{b.picture.name}.png").write_bytes(b.picture.png)
    (out / "report.md").write_text(to_markdown(report))
    path = out / "report.html"
    path.write_text(to_html(report))
    return path

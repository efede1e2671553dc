"""`stbench report`'s files: every study's view (report.view) written as one self-contained
report.html (every figure embedded as a data URI, so it opens offline and travels as one file)
and as report.md with the PNGs beside it. Both open with every study's finding (one line each,
linking to its section), the hardware and a headline figure; the result folders come last."""

from __future__ import annotations

import base64
import html
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .labels import machine_table
from .model import Study, studies
from .read import Folder, Skipped
from .tables import markdown
from .view import REPORT, View, view

if TYPE_CHECKING:
    from .plotting import Picture

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1180px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1.2rem; font-size: 0.86rem; }
th, td { border: 1px solid #d0d0d0; padding: 0.25rem 0.55rem; text-align: left;
         white-space: nowrap; }
th { background: #f1f3f5; } tr:nth-child(even) td { background: #fafafa; }
.scroll { overflow-x: auto; max-width: 100%; }
table.wrap td { white-space: normal; overflow-wrap: anywhere; }
h2 code, nav code { font-size: 0.85em; white-space: normal; overflow-wrap: anywhere; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #444; max-width: 60rem; }
.note { color: #666; font-style: italic; } .lede { color: #333; margin-top: 0.2rem; }
.top { display: grid; grid-template-columns: minmax(0, 1fr); gap: 0 1.5rem; align-items: start; }
@media (min-width: 1000px) { .top { grid-template-columns: minmax(0, 11fr) minmax(0, 9fr); } }
figure.headline { margin: 0.5rem 0 1rem; } h2#findings { margin-top: 0.3rem; }
ul.findings { padding-left: 1.1rem; font-size: 0.88rem; margin: 0; }
ul.findings li { margin: 0.3rem 0; }
.command code { font-size: 0.82rem; white-space: normal; overflow-wrap: anywhere; color: #333; }
.finding { background: #f4f8fb; border-left: 3px solid #0072B2; padding: 0.4rem 0.7rem; }
.flag { color: #8a4b00; }
"""
LEFT_OUT = "Left out (could not be read):"


@dataclass(frozen=True)
class Report:
    views: tuple[View, ...]
    machines: pd.DataFrame  # one line per labelled hardware
    folders: pd.DataFrame  # one line per result folder
    headline: tuple[View, Picture] | None = None  # the figure the report opens with, its study
    skipped: tuple[Skipped, ...] = ()  # result folders left out, and why
    # each tune's (folder, command, answer); its step studies are views only with `report --full`
    tunes: tuple[tuple[str, str, str], ...] = ()


# the kind of study whose figure heads the report, most telling first (KINDS' names)
HEADLINE_KINDS = (
    "gpu-vs-cpu",
    "device",
    "target",
    "scaling",
    "batch",
    "precision",
    "size",
    "tradeoff",
    "epochs",
)


HEADLINE_FIGURE = {
    "target": "time-to-quality",
    "scaling": "scaling",
    "tradeoff": "memory",
    "size": "memory",
}


def headline(views: list[View]) -> tuple[View, Picture] | None:
    """The figure the report opens with, and its view: of the most telling kind of study
    present (HEADLINE_KINDS), the study with the fewest cells that still compares two, its
    first figure (of the kind HEADLINE_FIGURE names, where it has one)."""

    def cells(v: View) -> int:
        return max((len(b.table) for b in v.blocks if b.table is not None), default=0)

    for kind in HEADLINE_KINDS:
        found = [
            v
            for v in views
            if v.finding.kind == kind and cells(v) >= 2 and any(b.picture for b in v.blocks)
        ]
        if found:
            best = min(found, key=cells)
            pictures = [b.picture for b in best.blocks if b.picture]
            wanted = [p for p in pictures if p.name.endswith(HEADLINE_FIGURE.get(kind, "-"))]
            return best, (wanted or pictures)[0]
    return None


def build(
    folders: list[Folder],
    skipped: list[Skipped] = (),
    progress: Callable[[str], None] | None = None,
    tunes: tuple[tuple[str, str, str], ...] = (),
    workers: int = 1,
) -> Report:
    """The report of these result folders; `progress` hears of each study as its figures are
    drawn (the slow part), by up to `workers` processes (the command's choice: a spawned worker
    imports the caller's main module, which a script without a main guard would run again)."""
    found = studies(folders)
    views = list(_views(found, progress or (lambda line: None), workers))
    runs = pd.concat([s.runs for s in found], ignore_index=True)
    listed = pd.DataFrame(
        [
            {
                "folder": f.path.name,
                "workload": f.runs[0]["workload"],
                "rows": len(f.runs),
                "command": f.question,
            }
            for f in folders
        ]
    )
    ran = runs[runs["status"] != "skipped"]  # measured hardware only: a skipped cell ran nowhere
    machines = machine_table(ran if len(ran) else runs)
    return Report(tuple(views), machines, listed, headline(views), tuple(skipped), tuple(tunes))


# Studies from which worker processes draw the views: a worker's start (a fresh interpreter
# importing pandas and matplotlib, ~1.5 s) costs what a few studies' figures do.
POOLED_FROM = 4


def _views(found: list[Study], progress: Callable[[str], None], workers: int = 1):
    """Each study's view, in order. Its figures are the slow part (~0.3 s each; the committed
    references draw ~270): from POOLED_FROM studies on, up to `workers` processes draw them, a
    study at a time (spawned, not forked: a fork copies the parent's BLAS threads)."""
    numbers = range(1, len(found) + 1)
    workers = min(workers, len(found))
    if len(found) < POOLED_FROM or workers < 2:
        for i, s in zip(numbers, found):
            progress(f"[{i}/{len(found)}] {s.name}")
            yield view(s, REPORT, i)
        return
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn) as pool:
        progress(f"drawing {len(found)} studies' figures in {workers} processes")
        for i, done in zip(numbers, pool.map(view, found, repeat(REPORT), numbers)):
            progress(f"[{i}/{len(found)}] {done.study.name}")
            yield done


def _table(df: pd.DataFrame, wrap: bool = False) -> str:
    """An HTML table; wrap lets long text (command lines) wrap instead of scrolling."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False)
    )
    table = f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
    return f'<div class="scroll"><table{" class=wrap" if wrap else ""}>{table}</table></div>'


def _image(pic, css: str = "") -> str:
    data = base64.b64encode(pic.png).decode("ascii")
    return f'<figure{css}><img src="data:image/png;base64,{data}" alt="{html.escape(pic.title)}">'


def _figure(pic) -> str:
    caption = f"<b>{html.escape(pic.title)}.</b> {html.escape(pic.caption)}"
    return f"{_image(pic)}<figcaption>{caption}</figcaption></figure>"


def hardware_line(report: Report) -> str:
    """The hardware in one sentence, each fact once: '1 study, measured on EPYC (2 cores) (AMD
    EPYC 7B13, torch 2.13.0+cpu).' (the label says the cores; the model where it says more)."""
    parts = []
    for m in report.machines.to_dict("records"):
        label = str(m["hardware"])
        said = [
            m.get("cpu_model", ""),
            f"{m['cores']} cores" if m.get("cores") else "",
            m.get("gpu_names", ""),
            f"torch {m['torch']}" if m.get("torch") else "",
        ]
        said = [p for p in said if p and str(p) not in label]
        parts.append(f"{label} ({', '.join(said)})" if said else label)
    n = len(report.views)
    return f"{n} stud{'ies' if n != 1 else 'y'}, measured on " + "; ".join(parts) + "."


def _findings(report: Report) -> str:
    """Every study's finding, one line each, linking to its section."""
    items = "".join(
        f'<li><a href="#{v.anchor}">{html.escape(v.study.name)}</a>: {html.escape(v.finding.text)}'
        + (
            '<ul class="flags">'
            + "".join(f'<li class="flag">{html.escape(f)}</li>' for f in v.finding.flags)
            + "</ul>"
            if v.finding.flags
            else ""
        )
        + "</li>"
        for v in report.views
    )
    tunes = "".join(
        f"<li><b>{html.escape(name)}</b> (<code>{html.escape(command)}</code>): "
        f"{html.escape(said.splitlines()[0])}</li>"
        for name, command, said in report.tunes
    )
    return (
        '<section class="findings"><h2 id="findings">Findings</h2>'
        + (
            f'<p>Tunes (the CPU\'s best configuration):</p><ul class="findings">{tunes}</ul>'
            if tunes
            else ""
        )
        + f'<ul class="findings">{items}</ul></section>'
    )


def _headline(report: Report) -> str:
    if report.headline is None:
        return ""
    v, pic = report.headline
    source = f'<a href="#{v.anchor}">{html.escape(v.study.name)}</a>'
    said = html.escape(pic.caption.split("; ")[0].rstrip("."))
    image = _image(pic, ' class="headline"')
    return (
        f"{image}<figcaption><b>{html.escape(pic.title)}</b>, from {source}: {said}."
        "</figcaption></figure>"
    )


def _section(v: View) -> list[str]:
    parts = [
        f'<h2 id="{v.anchor}">{html.escape(v.study.name)}</h2>',
        f'<p class="command"><code>{html.escape(v.study.question)}</code></p>',
        f'<p class="finding"><b>Finding:</b> {html.escape(v.finding.text)}</p>',
    ]
    parts += [f'<p class="flag">{html.escape(f)}</p>' for f in v.finding.flags]
    for b in v.blocks:
        parts.append(f"<h3>{html.escape(b.title)}</h3>")
        if b.table is not None:
            parts.append(_table(b.table))
        if b.picture is not None:
            parts.append(_figure(b.picture))
    return parts + [f'<p class="note">{html.escape(n)}</p>' for n in v.notes]


def to_html(report: Report) -> str:
    """The findings and a headline figure first (the first screen), the hardware, one section per
    study, and the result folders last (and those left out)."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>stbench report</title><style>{STYLE}</style></head><body>",
        "<h1>stbench report</h1>",
        f'<p class="lede">{html.escape(hardware_line(report))} Each finding links to the '
        "tables and figures behind it.</p>",
        f'<div class="top">{_headline(report)}{_findings(report)}</div>',
        '<h2 id="hardware">Hardware</h2>',
        _table(report.machines),
    ]
    for v in report.views:
        parts += _section(v)
    parts += ['<h2 id="folders">Result folders</h2>', _table(report.folders, wrap=True)]
    if report.skipped:
        parts += [
            f'<p class="note">{LEFT_OUT}</p>',
            "<ul>" + "".join(f"<li>{html.escape(s.reason)}</li>" for s in report.skipped) + "</ul>",
        ]
    return "\n".join([*parts, "</body></html>"]) + "\n"


def report_markdown(report: Report) -> str:
    parts = [
        "# stbench report",
        hardware_line(report),
        "## Findings",
    ]
    if report.tunes:
        parts.append(
            "Tunes (the CPU's best configuration):\n\n"
            + "\n".join(
                f"- **{name}** (`{command}`): {said.splitlines()[0]}"
                for name, command, said in report.tunes
            )
        )
    parts.append(
        "\n".join(
            f"- [{v.study.name}](#{v.anchor}): {v.finding.text}"
            + "".join(f"\n  - ! {f}" for f in v.finding.flags)
            for v in report.views
        )
    )
    if report.headline:
        v, pic = report.headline
        parts.append(
            f"![{pic.title}]({pic.name}.png)\n\n*{pic.title}, from [{v.study.name}](#{v.anchor}).*"
        )
    parts += ["## Hardware", markdown(report.machines)]
    for v in report.views:
        parts += [
            f'<a id="{v.anchor}"></a>\n\n## {v.study.name}',
            f"`{v.study.question}`",
            f"**Finding:** {v.finding.text}" + "".join(f"\n\n> {f}" for f in v.finding.flags),
        ]
        for b in v.blocks:
            parts.append(f"### {b.title}")
            if b.table is not None:
                parts.append(markdown(b.table))
            if b.picture is not None:
                pic = b.picture
                parts.append(f"![{pic.title}]({pic.name}.png)\n\n*{pic.title}.* {pic.caption}")
        parts += [f"_{n}_" for n in v.notes]
    parts += ["## Result folders", markdown(report.folders)]
    if report.skipped:
        parts += [LEFT_OUT, "\n".join(f"- {s.reason}" for s in report.skipped)]
    return "\n\n".join(parts) + "\n"


def write_report(report: Report, out: Path) -> Path:
    """report.html, report.md and one PNG per figure into `out`; returns report.html's path."""
    out.mkdir(parents=True, exist_ok=True)
    for v in report.views:
        for b in v.blocks:
            if b.picture is not None:
                (out / f"{b.picture.name}.png").write_bytes(b.picture.png)
    (out / "report.md").write_text(report_markdown(report))
    path = out / "report.html"
    path.write_text(to_html(report))
    return path

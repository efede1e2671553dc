"""`stbench report` on the committed results, opened in a real headless browser; plots whose
lines are single cells; tables that fit a narrow terminal without cutting a value."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from stbench.report.model import columns, keys_of
from stbench.report.plotting import panels
from stbench.report.profile import memory_summary
from stbench.report.tables import markdown
from stbench.report.text import fit_table, to_markdown, views_of
from stbench.report.view import Options
from tests.helpers import ROOT, committed_folders, committed_studies, stbench

# The committed result folders only, never a run a user made beside them (tests.helpers); the
# commands get the `committed_results` copy of them.
COMMITTED = committed_folders()
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
# Appended to a copy of report.html: after the page has loaded, what the browser made of it.
PROBE = """<script>window.addEventListener("load", () => {
  const images = [...document.images];
  const width = document.documentElement.clientWidth;
  const out = {images: images.length,
               loaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
               external: images.filter(i => !i.src.startsWith("data:image/png;base64,"))
                 .length,
               tables: document.querySelectorAll("table").length,
               sections: [...document.querySelectorAll("h2[id]")].map(h => h.id),
               // a table is cut off when its box reaches past the page (inside a scrolling
               // box it is not)
               cut: [...document.querySelectorAll("table")].filter(t => {
                 const box = t.closest(".scroll") || t;
                 return box.getBoundingClientRect().right > width + 1; }).length,
               page_overflow: document.documentElement.scrollWidth > width + 1};
  const pre = document.createElement("pre");
  pre.id = "stbench-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});</script>"""


@pytest.fixture(scope="module")
def committed_report(tmp_path_factory, committed_results):
    out = tmp_path_factory.mktemp("report")
    proc = stbench("report", committed_results, "--out", out, check=True)
    (out / "progress.txt").write_text(proc.stderr)  # what it printed while it built
    return out


def test_report_files_are_self_contained(committed_report):
    page = (committed_report / "report.html").read_text()
    md = (committed_report / "report.md").read_text()
    pngs = sorted(p.name for p in committed_report.glob("*.png"))
    assert (
        re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
        and sorted(set(re.findall(r"!\[[^]]*\]\(([^)]+)\)", md))) == pngs
    )
    body = re.sub(
        r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page.split("<body>")[1]
    )  # base64 may spell "http"
    # every figure embedded, the headline's twice (at the top and in its study)
    assert page.count('src="data:image/png;base64,') == len(pngs) + 1 and "http" not in body
    for name in (
        "cnn-strain-time-vs-epochs.png",
        "cnn-strain-scaling.png",
        "lstm-era5-time-to-quality.png",
        "stnn-phases.png",
        "dcrnn-pems-system-1.png",
    ):  # each named by its study: study-N-<name>
        assert any(re.fullmatch(rf"study-\d+-{name}", p) for p in pngs), name
    assert "| EPYC (2 cores)" in md and "400000.0" not in md
    # one section per study, headed by its folder and command
    for workload in (
        "cnn-strain",
        "stnn",
    ):  # every committed reference folder is a study of its own
        folders = [
            f
            for f in COMMITTED
            if json.loads((f / "manifest.json").read_text())["workload"] == workload
        ]
        headed = re.findall(rf"\n## (ref-[^\n]+)\n\n`stbench [\w-]+ {workload} ", md)
        assert sorted(headed) == sorted(f.name for f in folders) and len(folders) > 4


def test_report_opens_with_findings_the_hardware_and_a_figure(committed_report):
    """The first screen answers: every study's finding (one line, linking to its section), the
    hardware, a headline figure; captions name only what varies; no path of the machine that ran
    it."""
    md = (committed_report / "report.md").read_text()
    head = md.split("\n## Hardware")[0]
    assert re.match(
        r"# stbench report\n\n\d+ studies, "
        r"measured on EPYC \(2 cores\) \(AMD EPYC, torch ",
        head,
    )
    listed = re.findall(r"^- \[(ref-[^]]+)\]\(#study-\d+\): \S", head, flags=re.M)
    assert sorted(listed) == sorted(p.name for p in COMMITTED)
    # the headline: the question stbench answers first, where a study asked it
    assert re.search(r"!\[[^]]*advantage by size\]\(study-\d+-[\w-]+-gpu-vs-cpu\.png\)", head)
    assert "all cells:" not in md and "on a logarithmic axis" in md
    page = re.sub(
        r"data:image/png;base64,[A-Za-z0-9+/=]+", "", (committed_report / "report.html").read_text()
    )
    assert not re.search(r"/(tmp|work|home)/|\.venv|--out", md + page)
    progress = (committed_report / "progress.txt").read_text().splitlines()
    # the many studies' figures are drawn by worker processes, said, then each study in order
    assert progress[0].startswith("reading ")
    assert re.fullmatch(r"drawing \d+ studies' figures in \d+ processes", progress[1])
    assert re.fullmatch(r"\[1/\d+\] ref-\S+", progress[2])
    assert progress[-1].startswith("writing ")


def test_a_tune_is_its_answer_in_the_report_and_its_steps_come_with_full(tmp_path, monkeypatch):
    """A tune's step studies are most of a results/ folder's drawing and repeat its answer: the
    report lists the tune's answer and draws its steps only with --full (or a tune given
    alone)."""
    from stbench.cli import main
    from stbench.report import html

    results = tmp_path / "results"
    for name in ("ref-cpu2-cnn-strain-epochs", "ref-cpu2-dcrnn-pems-tune-300s"):
        shutil.copytree(ROOT / "results" / "reference" / name, results / name)
    tune = results / "ref-cpu2-dcrnn-pems-tune-300s"
    steps = sorted(f"{tune.name}/{p.parent.name}" for p in tune.glob("*/runs.csv"))
    stbench("report", results, "--out", tmp_path / "report", check=True)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "- **ref-cpu2-dcrnn-pems-tune-300s** (`stbench tune dcrnn-pems`): dcrnn-pems" in md
    assert re.findall(r"\n## (\S+)\n\n`stbench", md) == ["ref-cpu2-cnn-strain-epochs"]

    # what --full draws, without drawing it (the studies' figures are the tests' above)
    class Drawn(Exception):
        pass

    def build(folders, *args, **kwargs):
        raise Drawn(sorted(f"{f.path.parent.name}/{f.path.name}" for f in folders))

    monkeypatch.setattr(html, "build", build)
    for paths, want in (
        ([results, "--full"], ["results/ref-cpu2-cnn-strain-epochs", *steps]),
        ([tune], steps),
    ):
        with pytest.raises(Drawn) as drawn:
            main(["report", *map(str, paths), "--out", str(tmp_path / "full")])
        assert drawn.value.args[0] == sorted(want) and steps


def test_a_parameter_added_after_a_study_shows_its_value_in_every_row():
    """bucket_cap_mb and checkpoint came after the first studies; those were migrated with the
    defaults they ran at written out (25.0, none), so one cell is never split into a '-' row and
    a valued row."""
    from stbench.report.read import read_folder

    folder = next(f for f in COMMITTED if f.name == "ref-cpu2-cnn-strain-ddp")
    runs = read_folder(folder).runs
    assert {r.params["bucket_cap_mb"] for r in runs} == {25.0}
    assert {r.params["checkpoint"] for r in runs} == {"none"}


def browser_check(page: Path, tmp_path: Path, width: int = 1280) -> dict:
    probe = tmp_path / f"probe{width}.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [
            CHROMIUM,
            *BROWSER_FLAGS,
            f"--user-data-dir={tmp_path / f'profile{width}'}",
            f"--window-size={width},2000",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout
    found = re.search(r'<pre id="stbench-probe">([^<]*)</pre>', dom)
    assert found, f"the page did not finish loading in the browser: {dom[:500]}"
    return json.loads(found.group(1))


@pytest.mark.skipif(
    not CHROMIUM and not os.environ.get("CI"), reason="no chromium here (apt install chromium)"
)
def test_report_opens_in_a_headless_browser(committed_report, tmp_path):
    assert CHROMIUM, "CI must have chromium: .ci/run installs it"
    md = (committed_report / "report.md").read_text()
    studies = len(COMMITTED)  # each committed folder is a study of its own
    for width in (1280, 390):  # a laptop's browser window and a phone
        seen = browser_check(committed_report / "report.html", tmp_path, width)
        assert (
            seen["images"] == len(list(committed_report.glob("*.png"))) + 1 > 1
        )  # the headline twice
        assert seen["loaded"] == seen["images"] and seen["external"] == 0
        assert seen["sections"] == [
            "findings",
            "hardware",
            *(f"study-{i}" for i in range(1, studies + 1)),
            "folders",
        ]
        assert (
            seen["tables"] == md.count("\n|:") and seen["cut"] == 0 and not seen["page_overflow"]
        ), seen
        shot = tmp_path / f"report{width}.png"
        subprocess.run(
            [
                CHROMIUM,
                *BROWSER_FLAGS,
                f"--user-data-dir={tmp_path / f'shot{width}'}",
                f"--window-size={width},2000",
                f"--screenshot={shot}",
                (committed_report / "report.html").as_uri(),
            ],
            capture_output=True,
            timeout=180,
        )
        assert shot.stat().st_size > 10_000  # a rendered page, not a blank one


def test_every_plot_line_is_one_cell():
    """compare --plot once drew one line per device: the median over every cell at an epoch
    count (stnn's dense, offload and sparse at four grid sizes in one point)."""
    for study in committed_studies():
        w = study.runs
        for x in ("epochs", "world_size", None):
            for panel in panels(w, x):
                for line in panel.lines:
                    keys = [k for k in columns(keys_of(w)) if k != x]
                    assert len(line.rows.groupby(keys, dropna=False)) == 1, (study.name, line.name)
                assert len({ln.name for ln in panel.lines}) == len(panel.lines)


def test_compare_plot_writes_each_studys_figures_apart(tmp_path):
    """compare --plot draws each study's figures of time and memory, one line per cell; two
    studies of one workload are never drawn into one figure (their files carry the study's
    number, as the report's do)."""
    names = (
        "ref-cpu2-cnn-strain-ddp",
        "ref-cpu2-cnn-strain-epochs",
        "ref-cpu2-cnn-strain-strategies",
    )
    folders = [f for f in COMMITTED if f.name in names]
    stbench("compare", *folders, "--out", tmp_path, "--plot", check=True)
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "study-1-cnn-strain-phases.png",
        "study-1-cnn-strain-time-vs-epochs.png",
        "study-2-cnn-strain-phases.png",
        "study-2-cnn-strain-scaling.png",
        "study-3-cnn-strain-memory.png",
        "study-3-cnn-strain-phases.png",
    ]


def values(text: str) -> set[str]:
    """The cells of a Markdown text's table bodies (header lines left out)."""
    lines = text.splitlines()
    body = [
        line
        for line, after in zip(lines, lines[1:] + [""])
        if line.startswith("| ") and not after.startswith("|:")
    ]
    return {c.strip() for line in body for c in line.strip("|").split("|")}


@pytest.mark.parametrize(
    "width",
    [pytest.param(60, marks=pytest.mark.slow), 80, pytest.param(100, marks=pytest.mark.slow)],
)
def test_narrow_tables_keep_every_value_whole(width):
    views = views_of(committed_studies(), Options(every=True))
    full, narrow = to_markdown(views), to_markdown(views, width=width)
    # a key moved into a heading is there as key=value, a value every line shares once after
    # the tables ("Same on every line: column value")
    moved = values(full) - values(narrow)
    said = " ".join(
        p.replace("\n", " ") for p in narrow.split("\n\n") if p.startswith("Same on every line:")
    )
    assert all(f"={v}" in narrow or f" {v}" in said for v in moved), sorted(moved)[:5]
    assert "…" not in narrow
    tables = [line for line in narrow.splitlines() if line.startswith("|")]
    assert max(map(len, tables)) <= width


def test_fit_table_splits_only_what_does_not_fit():
    table = pd.DataFrame(
        {
            "grid": ["30x84", "60x168"],
            "epochs": [1, 2],
            "a": ["1.00 ± 0.5", "1.50 ± 0.5"],
            "b": ["2.00", "3.00"],
            "target": ["0.1"] * 2,
        }
    )
    table.attrs["keys"] = ["grid", "epochs"]
    assert fit_table(table, 200, markdown) == [("", table)]
    *pieces, shared = fit_table(table, 30, markdown)
    assert all(max(map(len, markdown(t).splitlines())) <= 30 for _, t in pieces)
    # nothing lost: values in the tables, what every line shares once, after them
    assert sorted(v for _, t in pieces for c in ("a", "b") if c in t for v in t[c]) == [
        "1.00 ± 0.5",
        "1.50 ± 0.5",
        "2.00",
        "3.00",
    ]
    assert all("target" not in t and "target" not in heading for heading, t in pieces)
    assert shared == ("Same on every line: target 0.1", None)


def test_profile_memory_is_summarised_not_listed():
    from stbench.store.rows import StepMemory

    rows = [StepMemory(i, True, float(i % 17), 1000.0) for i in range(1, 201)]
    text = memory_summary(rows)
    assert len(text.splitlines()) < 20
    assert "| alloc_peak_above_start_mb | 0     | 8        | 16    | 200     |" in text
    largest = [
        line.split("|")[1].strip() for line in text.split("Largest steps")[1].splitlines()[4:]
    ]
    assert largest == ["16", "33", "50", "67", "84"]


def test_studies_drawn_in_worker_processes_are_the_ones_drawn_here():
    """The report's worker processes start fresh (spawned): what they draw must not depend on
    anything only the parent set up. Four small committed studies, drawn both ways: the same
    findings and the same PNG bytes, in the same order."""
    from stbench.report import html
    from stbench.report.model import studies
    from stbench.report.read import SERIES, read

    names = ("grid1089", "default-10epochs", "bay-memory", "pacific")
    folders, _ = read([f for f in COMMITTED if f.name.endswith(names)], SERIES)
    found = studies(folders)
    assert len(found) == html.POOLED_FROM == 4
    heard: list[str] = []
    pooled = list(html._views(found, heard.append, workers=2))
    assert heard[0] == "drawing 4 studies' figures in 2 processes"
    here = [html.view(s, html.REPORT, i) for i, s in enumerate(found, 1)]

    def drawn(views):
        return [
            (
                v.study.name,
                v.finding.text,
                [(b.picture.name, b.picture.png) for b in v.blocks if b.picture],
            )
            for v in views
        ]

    assert drawn(pooled) == drawn(here)
    assert sum(len(d[2]) for d in drawn(here)) >= 4  # figures were drawn, not only words

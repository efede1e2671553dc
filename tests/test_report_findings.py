"""The report on hand-made rows: findings first with a link to each section, a headline figure,
progress while it builds, captions that name only what varies, time to quality on a log axis."""

import json
from pathlib import Path

import pandas as pd

from stbench.report import html
from stbench.report.plotting import differ
from stbench.report.quality import y_scale
from stbench.report.read import Folder
from stbench.store.rows import run_of
from tests.helpers import frame


def row(batch, epochs, repeat, wall):
    return {
        "schema": "1",
        "run_id": f"{batch}-{epochs}-{repeat}",
        "workload": "w",
        "device": "cpu",
        "strategy": "single",
        "world_size": 1,
        "batch_size": batch,
        "epochs": epochs,
        "repeat": repeat,
        "params": json.dumps({"lr": 0.1}),
        "status": "ok",
        "host": "a",
        "cpu_model": "AMD EPYC",
        "cores": 2,
        "torch": "2.13.0+cpu",
        "wall_s": wall,
        "samples_per_s": 100.0 * batch / (batch + 32) + repeat,
        "data_s": 1.0,
        "h2d_s": 0.0,
        "compute_s": 3.0,
        "sync_s": 0.0,
        "eval_s": 0.5,
        "train_s": 4.0,
        "peak_rss_mb": 400.0,
        "study": "/somewhere/on/disk/sweep",
        "study_key": "k",
        "question": "stbench run w --batch-size 32 64 --epochs 1 2 --rounds 2",
    }


RUNS = [row(b, e, r, 2.0 * e + 0.1 * r) for b in (32, 64) for e in (1, 2) for r in range(2)]


def build(rows: list[dict], progress=None) -> html.Report:
    """The report of one result folder holding these rows."""
    runs = tuple(run_of(r, r["study"]) for r in rows)
    folder = Folder(Path(rows[0]["study"]), "k", rows[0]["question"], runs)
    return html.build([folder], [], progress)


def test_a_report_opens_with_its_findings_and_a_headline_figure():
    heard = []
    report = build(RUNS, heard.append)
    assert heard == ["[1/1] sweep"]
    (section,) = report.views
    assert section.study.name == "sweep" and section.finding.kind == "batch"
    assert section.blocks[0].title.startswith(
        "samples/s per batch size"
    )  # the table behind the finding first
    assert report.headline == (section, section.blocks[1].picture)  # a batch study's first figure
    md = html.report_markdown(report)
    assert md.startswith(
        "# stbench report\n\n1 study, measured on EPYC (2 cores) (AMD EPYC, "
        "torch 2.13.0+cpu).\n\n## Findings\n\n- [sweep](#study-1): Samples/s goes from "
    )
    assert md.index("![Time vs epochs](study-1-w-time-vs-epochs.png)") < md.index("## Hardware")
    assert '<a id="study-1"></a>\n\n## sweep\n\n`stbench run w --batch-size 32 64' in md
    page = html.to_html(report)
    assert (
        page.index('<h2 id="findings">')
        < page.index('<h2 id="hardware">')
        < page.index('id="study-1"')
    )
    assert (
        '<li><a href="#study-1">sweep</a>: Samples/s goes from' in page and "/somewhere" not in page
    )


def test_captions_name_only_what_varies():
    df = frame(RUNS)
    assert (
        differ(df) == "cells differ in batch_size, epochs"
        and differ(df, "epochs") == "cells differ in batch_size"
    )
    (section,) = build(RUNS).views
    for block in section.blocks:
        if block.picture is not None:
            assert (
                "lr=" not in block.picture.caption and "strategy=" not in block.picture.caption
            ), block.title


def test_time_to_quality_is_drawn_on_a_log_axis_where_it_can_be():
    assert y_scale(pd.Series([0.08, 1e-3, 2e-4])) == "log"
    assert y_scale(pd.Series([0.5, 0.0, -0.1])) == "linear"  # a metric that can reach zero or below

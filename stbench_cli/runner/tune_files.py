"""What a tune writes beside its step folders: each step as a record in tune.json,
and tune.csv, one line per value tried. Pure: records in, records and text out."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..comparison import Verdict
from ..store.rows import Run

CSV_COLUMNS = (
    "step",
    "lever",
    "value",
    "reference",
    "kept",
    "measure",
    "ratio",
    "low",
    "high",
    "rounds",
    "median",
    "samples_per_s",
    "val_value",
    "note",
)


def step_record(
    base: dict,
    folder: Path,
    values: tuple,
    measure: str,
    verdicts: list[Verdict],
    kept: object,
    rows: list[Run],
) -> dict:
    """One judged step: its values, each verdict, the value kept, the load while it ran."""
    try:
        load = json.loads((folder / "load.json").read_text())
    except (OSError, ValueError):
        load = {}  # a step run by an older tune, or copied without it
    contended = sum(bool(r.contended) for r in rows)
    return {
        **base,
        "folder": folder.name,
        "values": list(values),
        "measure": measure,
        "verdicts": [verdict_record(v) for v in verdicts],
        "kept": kept,
        **load,
        "contended": contended,  # cells that ran contended, of `cells`
        "cells": len(rows),
        "note": next((v.note for v in verdicts if v.note), ""),
    }


def verdict_record(v: Verdict) -> dict:
    """A value's verdict as tune.json keeps it (the keys every tune has written)."""
    return {
        "value": v.subject,
        "ratio": v.ratio,
        "low": v.low,
        "high": v.high,
        "rounds": v.rounds,
        "median": v.new,
        "samples_per_s": v.samples_per_s,
        "quality": v.quality,
        "note": v.note,
        "needs": v.needs,  # where not concluded: the rounds that could tell the two apart
        "to_equal": v.to_equal,  # and those at which they would look equal (within MARGIN)
    }


def result_csv(steps: list[dict]) -> str:
    """tune.csv: one line per value tried (a step not run: one line with its note)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for s in steps:
        common = {
            "step": s["index"],
            "lever": s["lever"],
            "reference": s["reference"],
            "kept": s.get("kept", s["reference"]),
            "measure": s.get("measure", ""),
        }
        if not s.get("verdicts"):
            writer.writerow({**common, "note": s.get("note") or "; ".join(s.get("missing", []))})
            continue
        for v in s["verdicts"]:
            writer.writerow(
                {
                    **common,
                    "value": v["value"],
                    "ratio": v["ratio"],
                    "low": v["low"],
                    "high": v["high"],
                    "rounds": v["rounds"],
                    "median": v["median"],
                    "samples_per_s": v["samples_per_s"],
                    "val_value": v["quality"],
                    "note": v["note"],
                }
            )
    return buf.getvalue()

"""A finding per study: from what a study varies, what it asks, and its answer in one or two
sentences with its uncertainty, above the one table that supports it (pure: rows in, words
and a table out; no torch).

What a study asks, first match wins:

| varies | kind | the answer |
|---|---|---|
| hardware (device) | `device` | samples/s, time to target and energy, each against the first (a CPU) |
| a time budget or a stop at the target | `target` | MLPerf score; which cell reached the target first |
| world size or nodes (a distributed strategy) | `scaling` | speedup, efficiency, sync share; where efficiency < 50% |
| precision or compile | `precision` | speedup over fp32 eager; compile seconds and steps to pay back |
| a problem-size parameter (grid, size) | `size` | fitted exponents of memory and step time; against predicted |
| batch size | `batch` | samples/s from the smallest to the largest; the knee (a doubling gains < 10%) |
| epochs | `epochs` | fixed and per-epoch cost (a line fitted to wall time) |
| anything else (strategy, checkpointing, a setting) | `tradeoff` | memory per rank against samples/s |
| nothing | `cell` | samples/s, wall time, memory |

Two cells whose 95% intervals overlap have "no significant difference", never a winner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from ..ttt import asked
from . import cost, speed, target, views
from .cells import axes

Flagger = Callable[[pd.DataFrame], Sequence[str]]  # a study's rows -> warnings (e.g. noisy repeats)


@dataclass(frozen=True)
class Finding:
    """A study's answer and the table that supports it."""

    kind: str  # what the study asks (the table above)
    text: str  # one or two sentences, with the uncertainty
    title: str = ""  # the supporting table's title
    table: pd.DataFrame | None = None
    flags: tuple[str, ...] = ()  # reasons not to trust the numbers at a glance (report.noise, when wired in)


KINDS: dict[str, tuple[Callable, Callable]] = {
    "device": (speed.device, views.device), "target": (target.target, views.target),
    "scaling": (speed.scaling, views.scaling), "precision": (speed.precision, views.precision),
    "size": (cost.size, views.size), "batch": (speed.batch, views.batch), "epochs": (cost.epochs, views.epochs),
    "tradeoff": (cost.tradeoff, views.tradeoff), "cell": (cost.single, views.single),
}


def kind_of(s: pd.DataFrame) -> str:
    """What a study asks, from what it varies (first match in the module's table)."""
    varied = set(axes(s))
    if "label" in varied:
        return "device"
    if asked(s):
        return "target"
    if varied & {"world_size", "nodes"} and (s["strategy"] != "single").any():
        return "scaling"
    if varied & {"p.precision", "p.compile"}:
        return "precision"
    if cost.size_axis(s):
        return "size"
    for key, kind in (("batch_size", "batch"), ("epochs", "epochs")):
        if key in varied:
            return kind
    return "tradeoff" if varied else "cell"


def finding_of(s: pd.DataFrame, flagger: Flagger | None = None) -> Finding:
    """One study's finding (its rows: a report frame, one workload); `flagger` adds its warnings."""
    kind = kind_of(s)
    words, view = KINDS[kind]
    workload = str(s["workload"].iloc[0])
    shown = view(s, workload)
    title, table = shown if shown else ("", None)
    return Finding(kind, words(s), title, table, tuple(flagger(s)) if flagger else ())

"""A study's view (pure): what the study asks and its answer (its finding, with the table behind
it), the tables and figures after it, and the flags on its numbers. `compare` prints views
(report.text), `report` writes them (report.html), `run` and `profile` end with one.

What a study asks follows from what it varies, the first kind in KINDS that fits:

    kind       it varies                     its answer
    device     the hardware                  against the tuned CPU and the one at its defaults
    target     under a budget or a target    MLPerf score; which cell reached the target first
    scaling    world size or nodes           speedup, efficiency, sync share; efficiency < 50%
    precision  precision or compile          speedup over fp32 eager; compile s and payback
    size       a problem-size parameter      fitted exponents of memory and step time
    batch      batch size                    samples/s smallest to largest; the knee
    epochs     epochs                        fixed and per-epoch cost (a fitted line)
    tradeoff   anything else                 memory per rank against samples/s
    cell       nothing                       samples/s, wall time, memory

A study that cannot conclude (runs contended, a per-epoch cost that cannot be, two repeats wider
than their mean) says why and what to do instead (`declined`); the table stays.

Two cells whose 95% intervals overlap have "no significant difference", never a winner. A new
kind is a `Kind` line in KINDS (where it asks first) and two functions of a study's frame: its
sentences, and its table as (title, table) or None. A kind reads the study's table, joined with
its folders' question or prices where it needs them (`reads`: model.with_context), nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd

from ..stats import repeats_for_width
from . import cost, gpu_predictions, gpu_vs_cpu, gpu_vs_cpu_picture, scaling, speed, tables, ttt
from .cells import cells, interval
from .cost import epoch_fits
from .judge import device_flags, study_flags
from .labels import format_number
from .model import Study, axes, name_of, size_axis, with_context
from .tables import FIRST

if TYPE_CHECKING:  # the figures import matplotlib: only a view that draws them loads it
    from .plotting import Picture


def _plain_table(study: Study) -> pd.DataFrame:
    return study.runs


def _with_question(study: Study) -> pd.DataFrame:
    return with_context(study, question=True)


def _with_prices(study: Study) -> pd.DataFrame:
    return with_context(study, prices=True)


@dataclass(frozen=True)
class Kind:
    """A kind of study: when a study is one (the study and the names of what it varies), the
    table it reads, its answer in words, and the table that supports it."""

    name: str
    asks: Callable[[Study, set[str]], bool]
    words: Callable[[pd.DataFrame], str]
    table: Callable[[pd.DataFrame], tuple[str, pd.DataFrame] | None]
    flags: Callable[[pd.DataFrame], list[str]] = lambda s: []  # its own, after the study's
    # the table it reads: the study's, or joined with the question or the prices it needs
    reads: Callable[[Study], pd.DataFrame] = _plain_table


KINDS = (
    Kind(
        "gpu-vs-cpu",
        lambda st, v: st.sized,
        gpu_vs_cpu.words,
        gpu_vs_cpu.view,
        reads=_with_question,
    ),
    Kind(
        "device",
        lambda st, v: "device" in v,
        speed.device,
        speed.device_view,
        device_flags,
        reads=_with_prices,
    ),
    Kind(
        "target", lambda st, v: ttt.asks_quality(st.runs), ttt.finding, ttt.view, reads=_with_prices
    ),
    Kind(
        "scaling",
        lambda st, v: (
            bool(v & {"world_size", "nodes"}) and bool((st.runs["strategy"] != "single").any())
        ),
        scaling.finding,
        scaling.view,
    ),
    Kind(
        "precision",
        lambda st, v: bool(v & {"precision", "compile"}),
        speed.precision,
        speed.precision_view,
    ),
    Kind("size", lambda st, v: size_axis(st.runs) is not None, scaling.size, scaling.size_view),
    Kind("batch", lambda st, v: "batch_size" in v, cost.batch, cost.batch_view),
    Kind("epochs", lambda st, v: "epochs" in v, cost.epoch_cost, cost.epochs_view),
    Kind("tradeoff", lambda st, v: bool(v), cost.tradeoff, cost.tradeoff_view),
    Kind("cell", lambda st, v: True, cost.single_cell, cost.single_view),
)


@dataclass(frozen=True)
class Finding:
    """A study's answer and the table that supports it."""

    kind: str  # what the study asks (KINDS)
    text: str  # one or two sentences, with the uncertainty
    title: str = ""  # the supporting table's title
    table: pd.DataFrame | None = None
    flags: tuple[str, ...] = ()  # reasons not to trust the numbers at a glance (report.judge)


def kind_of(study: Study) -> Kind:
    """What a study asks, from what it varies (the first kind that it is)."""
    varied = {k.name for k in axes(study.runs)}
    return next(k for k in KINDS if k.asks(study, varied))


def finding_of(study: Study, flags: bool = True) -> Finding:
    """One study's finding (one workload), and its flags; where the study cannot conclude, why
    and what to do in place of its answer (the table stays: what was measured)."""
    kind = kind_of(study)
    s = kind.reads(study)
    title, table = kind.table(s) or ("", None)
    text = declined(s, kind.name) or kind.words(s)
    found = (*study_flags(s, study.windows), *kind.flags(s)) if flags else ()
    return Finding(kind.name, text, title, table, tuple(found))


def declined(s: pd.DataFrame, kind: str = "") -> str | None:
    """Why a study cannot conclude and what to do, or None: runs that ran contended;
    a per-epoch cost fitted negative or with an interval spanning zero; a cell of two repeats
    whose 95% interval is wider than its mean."""
    ok, keys, why, todo = s[s["status"] == "ok"], axes(s), [], []
    hit = ok[ok["contended"] == 1]
    # a gpu-vs-cpu answer of many rounds stands a contended run or two (its flags name them)
    if kind == "gpu-vs-cpu" and len(hit) * 3 <= len(ok):
        hit = hit.iloc[:0]
    if len(hit):
        where = name_of(keys, [hit.iloc[0][k.column] for k in keys]) or "the cell"
        why.append(
            f"{len(hit)} of {len(ok)} runs ran contended ({where}: "
            f"{hit.iloc[0]['contention'] or 'contended'})"
        )
        todo.append("run it alone on the machine")
        if (hit["threads"].fillna(1) > 1).any():  # never advise what the cell already did
            todo.append("or with fewer threads (--set threads=1)")
    fits = epoch_fits(s) if "epochs" in {k.name for k in keys} else []
    bad = [(n, f) for n, f in fits if f.slope < 0 or f.slope_ci[0] <= 0 <= f.slope_ci[1]]
    if bad:
        name, fit = bad[0]
        said = "negative" if fit.slope < 0 else "with an interval spanning zero"
        ci, where = interval(*fit.slope_ci), name or "the study"
        why.append(
            f"{len(bad)} per-epoch cost{'s' * (len(bad) > 1)} fitted {said} ({where}: "
            f"{format_number(fit.slope)} s per epoch{f', {ci}' if ci else ''})"
        )
        todo += ["run it alone on the machine", "more rounds (--rounds N)"]
    figure = {"epochs": "wall_s", "target": "time_to_target_s"}.get(kind, "samples_per_s")
    found = cells(s, figure, keys)  # the figure the kind answers with; of two values, median = mean
    # (gpu-vs-cpu states each ratio with its paired interval, and says where one is too wide)
    wide = [c for c in found if len(c.values) == 2 and 2 * c.half > abs(c.median)]
    wide = [] if kind == "gpu-vs-cpu" else wide
    if wide:
        n = max(repeats_for_width(list(c.values), abs(c.median)) for c in wide)
        why.append(
            f"{len(wide)} cell{'s' * (len(wide) > 1)} of two repeats with a 95% interval wider "
            f"than the mean ({wide[0].name or 'the cell'}: {wide[0].amount()})"
        )
        todo.append(f"more rounds (--rounds {n})")
    if not why:
        return None
    return f"Cannot conclude: {'; '.join(why)}. To conclude: {'; '.join(dict.fromkeys(todo))}."


@dataclass(frozen=True)
class Options:
    """What a view holds: the table of a metric (compare's --metric, --rows, --cols,
    --baseline), every table or the one that answers, and figures or none."""

    metric: str = "wall_s"
    rows: str = "epochs"
    cols: str = "device"
    baseline: str | None = None  # "key=value": the column the others are held against
    every: bool = False  # every table, not only the one that answers (--full, compare.md)
    figures: tuple[str, ...] = ()  # the kinds of block whose figures are drawn (FIGURES)
    against_first: bool = False  # with no baseline, hold every column against the first

    @property
    def asked(self) -> bool:
        """Whether a table was asked for by name (it then leads in place of the finding's)."""
        asked = (self.metric, self.rows, self.cols, self.baseline)
        return asked != ("wall_s", "epochs", "device", None)


FIGURES = ("finding", "metric", "target", "phases", "scaling", "memory", "system")  # report's
PLOTS = ("metric", "phases", "scaling", "memory")  # compare --plot's: time and memory
REPORT = Options(every=True, figures=FIGURES, against_first=True)


@dataclass(frozen=True)
class Block:
    """A table and the figure that illustrates it (either may be missing); a lead block is
    shown without --full."""

    title: str
    table: pd.DataFrame | None = None
    picture: Picture | None = None
    lead: bool = False
    kind: str = ""  # finding, metric, target, phases, scaling, memory, system: what figure it has


@dataclass(frozen=True)
class View:
    """A study as every command shows it."""

    study: Study
    number: int  # its place among the studies shown: its figures and its anchor are named by it
    finding: Finding
    blocks: tuple[Block, ...]
    notes: tuple[str, ...] = ()  # what could not be drawn, and why

    @property
    def anchor(self) -> str:
        return f"study-{self.number}"


DETAILS = (
    ("where the time went: median share of train + eval time", tables.phase_shares, "phases"),
    ("data-parallel scaling against the smallest world", scaling.table, "scaling"),
    ("where the memory went: MiB per rank, median", tables.memory_table, "memory"),
)


def view(study: Study, options: Options = Options(), number: int = 1) -> View:
    """The study's finding and its blocks: the finding's table first (said once), the metric's
    table, time to target, where the time and memory went and scaling; with figures, each
    table's figure and the system timelines, named by the study's number."""
    o = options
    finding = finding_of(study)
    if study.incomplete:  # said first: its answer is of the cells that ran, not of the study
        pooled = " (its folders pooled, finished or not)" if "+" in study.name else ""
        head = "; ".join(study.incomplete)
        finding = replace(finding, text=f"Incomplete{pooled}: {head}. {finding.text}")
    if study.unread:  # a predicted.csv it could not read: flagged, the measured answer stands
        finding = replace(finding, flags=(*finding.flags, *study.unread))
    blocks = (
        []
        if o.asked or finding.table is None
        else [Block(finding.title, finding.table, lead=True, kind="finding")]
    )
    guessed = (
        gpu_predictions.predicted_table(study.predicted, _with_question(study))
        if study.sized
        else None
    )
    predicted = []
    if guessed is not None:  # never pooled with the rows: a block and a file of its own
        levers = gpu_predictions.predicted_levers(study.predicted)
        title = f"{gpu_predictions.PREDICTED_TITLE}; {levers}"
        predicted.append(Block(title, guessed, lead=True, kind="predicted"))
    tables = _tables(study, o) if o.every or o.asked else []
    # a table asked for by name comes first: it is what the command was asked for
    blocks += [*tables, *predicted] if o.asked else [*predicted, *tables]
    notes: list[str] = []
    if o.figures:
        blocks, notes = _with_figures(study, blocks, o.figures)
    lead = {b.title for b in blocks if b.kind == "finding"}  # the finding's table, said once
    said = [
        replace(b, table=None) if b.title in lead and b.kind != "finding" else b for b in blocks
    ]
    kept = tuple(b for b in said if b.table is not None or b.picture is not None)
    return _named(View(study, number, finding, kept, tuple(notes)))


def _tables(study: Study, o: Options) -> list[Block]:
    """The metric's table (under a time budget it leads only where asked for another metric:
    the wall time is the budget; a cost at the prices given is a metric too), time to target,
    and with `every` the details."""
    s = _with_prices(study) if study.priced else study.runs
    ttt_table, answered = ttt.table(s), ttt.asks_quality(s) or ttt.reached_any(s)
    baseline = o.baseline or (FIRST if o.against_first else None)
    lead = o.asked and (o.metric != "wall_s" or ttt_table is None or not ttt.budgeted(s))
    out = []
    # a study of windows (the questions' engine) says nothing by their wall time, which is the
    # window's floor: its samples/s are the finding's table; a metric asked by name still shows
    if o.asked or not study.windows:
        table = tables.pivot(s, o.metric, o.rows, o.cols, baseline, missing_ok=True)
        held = any(" vs " in str(c) for c in table.columns)  # one column: nothing held against it
        title = tables.pivot_title(o.metric, baseline if held else None)
        out.append(Block(title, table, lead=lead, kind="metric"))
    if ttt_table is not None and (o.every or answered):
        out.append(Block(ttt.TITLE, ttt_table, lead=o.asked and answered, kind="target"))
    for title, build, kind in DETAILS if o.every else ():
        table = build(s)
        if table is not None:
            out.append(Block(title, table, kind=kind))
    return out


def _with_figures(
    study: Study, blocks: list[Block], kinds: tuple[str, ...]
) -> tuple[list[Block], list[str]]:
    """Each block of these kinds with its figure, a time-to-quality block right after the
    metric's where that figure has no table, the system timelines last, and a note on each
    figure that could not be drawn."""
    from . import figures, quality

    s, name = study.runs, study.workload
    drawn = {
        "finding": lambda s, name: (
            gpu_vs_cpu_picture.figure(_with_question(study), name, study.predicted)
            if study.sized
            else None
        ),
        "metric": figures.time_vs_epochs,
        "phases": figures.phase_bars,
        "scaling": figures.scaling,
        "memory": figures.memory,
    }
    ttq = quality.time_to_quality(s, study.epochs, name) if "target" in kinds else None
    out = [
        replace(b, picture=drawn[b.kind](s, name))
        if b.kind in drawn and b.kind in kinds
        else replace(b, picture=ttq)
        if b.kind == "target"
        else b
        for b in blocks
    ]
    notes = [
        "no cell ran at two or more epoch counts: no time-vs-epochs plot"
        for b in out
        if b.kind == "metric" and b.picture is None and "metric" in kinds
    ]
    if ttq is None and "target" in kinds and not study.sized:
        # a question's windows train and never evaluate: nothing to say of a plot it never had
        notes.append("no cell evaluated twice or more (epochs.csv): no time-to-quality plot")
    elif ttq is not None and not any(b.kind == "target" for b in out):
        at = next((i + 1 for i, b in enumerate(out) if b.kind == "metric"), len(out))
        out.insert(at, Block("time to quality", picture=ttq, kind="target"))
    if "system" in kinds:
        out += [
            Block(p.title, picture=p, kind="system")
            for p in quality.system_timelines(s, study.system, name)
        ]
    return out, notes


def _named(v: View) -> View:
    """Figures named by the study's number, so two studies of a workload never overwrite
    each other's PNGs."""
    blocks = tuple(
        replace(b, picture=replace(b.picture, name=f"{v.anchor}-{b.picture.name}"))
        if b.picture is not None
        else b
        for b in v.blocks
    )
    return replace(v, blocks=blocks)

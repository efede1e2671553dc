"""`compare`'s text (pure): each study's view as Markdown, headed by its folder and command and
opened by its finding, with the one table that answers it (every table with --full), fitted to
a terminal's width; and compare.md, compare.csv and the figures written into a folder.

A table too wide for the terminal loses whole columns, never characters: a key, or a value,
that has one value in every row moves into a heading, then the key with the fewest values
splits the table into sections under headings (`grid=30x84`), and last the value columns are
spread over several tables that each repeat the keys. A number is always printed whole.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..comparison import Verdict
from .cells import cells
from .labels import format_number
from .model import HARDWARE, Key, Study, keys_of, with_params
from .tables import check_baseline, markdown
from .view import PLOTS, Options, View, view

Render = Callable[[pd.DataFrame], str]
STUDY_LINES = 25  # a study's share of a terminal in `compare` (all of it with --full)
HINT = (
    "Each study: its finding, then the table behind it. --full adds every other table (wall "
    "time, where the time and memory went, scaling); --rows/--cols/--metric pick the table."
)


def text_width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit_table(
    table: pd.DataFrame, width: int, render: Render, heading: str = "", whole: bool = True
) -> list[tuple[str, pd.DataFrame | None]]:
    """(heading, table) pieces, each rendering within `width` where any layout can; a last
    piece without a table says what every line shares.

    `table.attrs["keys"]` names the key columns (the rest are values); the last key, the
    table's row axis, always stays a column. In order: keys with one value become the heading
    (values with one value the last piece); then value columns spread over tables that repeat
    the keys, or the key with the fewest values splitting the rows into sections, whichever
    reads shorter (sections only, if the keys and the widest value do not fit)."""
    keys = [k for k in table.attrs.get("keys", []) if k in table.columns]
    if text_width(render(table)) <= width or len(table) == 0:
        return [(heading, table)]
    constant = [k for k in keys[:-1] if table[k].nunique(dropna=False) == 1]
    if constant:
        return _split_rows(table, constant[0], keys, width, render, heading)
    # a value every line of the whole table shares (a target, "3/3") is said once, after the
    # tables (a table cut to a screen's lines keeps its rows first), not one a section's few
    # lines happen to share: that would scatter the sections
    same = [
        c
        for c in table.columns
        if c not in keys and whole and len(table) > 1 and table[c].nunique(dropna=False) == 1
    ]
    if same:
        said = "; ".join(f"{c} {table[c].iloc[0]}" for c in same)
        rest = table.drop(columns=same)
        rest.attrs["keys"] = keys
        return [
            *fit_table(rest, width, render, heading, whole=False),
            (f"Same on every line: {said}", None),
        ]
    values = [c for c in table.columns if c not in keys]
    by_rows = None
    if len(keys) > 1:
        fewest = min(keys[:-1], key=lambda k: table[k].nunique(dropna=False))
        by_rows = _split_rows(table, fewest, keys, width, render, heading)
    if values and max(text_width(render(table[keys + [v]])) for v in values) <= width:
        by_columns = _split_columns(table, keys, width, render, heading)
        # both fit: the shorter to read (sections drop a key column, so may hold more values)
        shorter = by_rows is None or _lines(by_columns, render) <= _lines(by_rows, render)
        return by_columns if shorter else by_rows
    return by_rows if by_rows is not None else _split_columns(table, keys, width, render, heading)


def _lines(pieces: list[tuple[str, pd.DataFrame]], render: Render) -> int:
    return sum(
        len(render(t).splitlines()) + (heading.count("\n") + 2 if heading else 0)
        for heading, t in pieces
    )


def _split_rows(table, key, keys, width, render, heading) -> list[tuple[str, pd.DataFrame]]:
    pieces = []
    for value, part in table.groupby(key, sort=False, dropna=False):
        sub = part.drop(columns=[key]).reset_index(drop=True)
        sub.attrs["keys"] = [k for k in keys if k != key]
        title = f"{heading}, {key}={value}" if heading else f"{key}={value}"
        pieces += fit_table(sub, width, render, title, whole=False)
    return pieces


def _split_columns(table, keys, width, render, heading) -> list[tuple[str, pd.DataFrame]]:
    """Value columns spread over tables that repeat the keys; one value column per table at
    the least (a table of keys and one value is as narrow as this layout gets)."""
    values = [c for c in table.columns if c not in keys]
    pieces, current = [], []
    for col in values:
        trial = table[keys + current + [col]]
        if current and text_width(render(trial)) > width:
            pieces.append(current)
            current = []
        current.append(col)
    pieces.append(current)
    return [(heading, table[keys + cols]) for cols in pieces if cols]


def fit_columns(
    widths: dict[str, int], width: int, drop_order: list[str], overhead: Callable[[int], int]
) -> list[str]:
    """The columns (in their order) kept so that their widths plus the table's `overhead`
    for n columns fit `width`: columns leave in `drop_order`, whole, until the rest fit."""
    kept = list(widths)
    for name in drop_order:
        if sum(widths[c] for c in kept) + overhead(len(kept)) <= width:
            break
        if name in kept:
            kept.remove(name)
    return kept


def fold_pairs(heading: str, width: int) -> str:
    """A heading of key=value pairs folded between pairs to fit width, never inside a value
    (a value may hold spaces: "EPYC (2 cores)")."""
    lines: list[str] = []
    for pair in heading.split(", "):
        if lines and len(lines[-1]) + 2 + len(pair) < width:  # < : room for a line's comma
            lines[-1] += f", {pair}"
        else:
            lines.append(pair)
    return ",\n".join(lines)


def section(title: str, table: pd.DataFrame, width: int | None = None) -> str:
    """A titled Markdown table; with a width, split (never cut) to fit it."""
    if width is None:
        return f"{title}\n\n{markdown(table)}"
    parts = [textwrap.fill(title, width, break_on_hyphens=False)]  # a long title wraps too
    for heading, piece in fit_table(table, width, markdown):
        if piece is None:  # what every line shares, said once
            parts.append(fold_pairs(heading, width))
            continue
        parts.append((f"{fold_pairs(heading, width)}\n\n" if heading else "") + markdown(piece))
    return "\n\n".join(parts)


def fold_words(text: str, width: int | None, indent: str = "") -> str:
    """`text` folded to `width` between words, its later lines indented (as it is where no
    width is given)."""
    if not width:
        return text
    return textwrap.fill(text, width, subsequent_indent=indent, break_on_hyphens=False)


def finding_text(v: View, width: int | None = None) -> str:
    """A view's finding and its flags, as every command ends with them."""
    return "\n\n".join(
        [
            fold_words(f"Finding: {v.finding.text}", width),
            *(fold_words(f"! {flag}", width, "  ") for flag in v.finding.flags),
        ]
    )


def to_markdown(
    views: list[View], width: int | None = None, full: bool = True, limit: int | None = None
) -> str:
    """The views as Markdown, each headed by its folder and command and opened by its finding;
    `width` fits a terminal; without `full` the lead blocks only, each study within `limit`
    lines where one is given, and the hint to --full first."""
    text = [] if full else [fold_words(HINT, width)]
    for v in views:
        command = f"\n{fold_words(v.study.question, width, '    ')}" if v.study.question else ""
        study = [fold_words(f"## {v.study.name}", width, "   ") + command, finding_text(v, width)]
        study += [
            section(f"### {b.title}", b.table, width)
            for b in v.blocks
            if b.table is not None and (full or b.lead)
        ]
        whole = "\n\n".join(study)
        text.append(capped(whole, limit) if limit and width and not full else whole)
    return "\n\n".join(text) + "\n"


def capped(text: str, limit: int = STUDY_LINES) -> str:
    """A study's text within `limit` lines: its first lines, up to the last blank line (or
    table row) that fits, and one line saying how much more --full shows."""
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    keep = limit - 1
    blank = max((i for i in range(keep) if not lines[i].strip()), default=0)
    if blank >= keep * 2 // 3:  # end at a whole paragraph or table where one ends late enough
        keep = blank
    rest = len(lines) - keep
    return "\n".join([*lines[:keep], f"(... {rest} more lines with --full)"])


def views_of(found: list[Study], options: Options) -> list[View]:
    """Each study's view (a --baseline must name a column of some study)."""
    if options.baseline:
        check_baseline([s.runs for s in found], options.cols, options.baseline)
    return [view(s, options, i) for i, s in enumerate(found, 1)]


def compare(
    found: list[Study],
    options: Options = Options(),
    width: int | None = None,
    full: bool = False,
    out: Path | None = None,
    plot: bool = False,
    limit: int | None = STUDY_LINES,
) -> str:
    """The text compare prints; with `out`, compare.md (every table, whole) and compare.csv
    (each cell's figures) written there, and with `plot` the studies' figures of time and
    memory (into `out`, or the current folder); each study within `limit` lines (None: all
    of its lead blocks, as a command's own answer prints them)."""
    every = full or out is not None or plot
    views = views_of(found, replace(options, every=every, figures=PLOTS if plot else ()))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(to_markdown(views))
        compare_table(found, options.metric).to_csv(out / "compare.csv", index=False)
    if plot:
        write_figures(views, out or Path("."))
    # a table asked for by name is shown whole, however long the study's answer before it
    return to_markdown(views, width, full, None if options.asked else limit)


def compare_table(found: list[Study], metric: str) -> pd.DataFrame:
    """One line per cell of each study: its keys (each parameter that differs between any of
    the studies' runs) and `metric` over its repeats (the median, its 95% interval, how many
    ended ok); never pooled across studies."""
    runs = pd.concat([s.runs for s in found], ignore_index=True)
    every = with_params(runs)
    keys = [Key("workload", "workload"), *keys_of(every)]
    lines = []
    for s in found:
        rows = every[runs["study"].isin(set(s.runs["study"])).to_numpy()]
        for c in cells(rows, metric, keys, every=True):
            lo, hi = c.interval
            named = {("device" if k == HARDWARE else k.column): v for k, v in zip(keys, c.key)}
            lines.append(
                {
                    **named,
                    "n": len(c.values),
                    "n_all": len(c.statuses),
                    "median": c.median,
                    "lo": lo,
                    "hi": hi,
                    "status": c.status,
                    "study": s.question,
                }
            )
    return pd.DataFrame(lines)


def write_figures(views: list[View], folder: Path) -> list[Path]:
    """Every figure of the views as a PNG, named by its study's number where there are several
    studies (by the workload alone for one); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for v in views:
        for b in v.blocks:
            if b.picture is not None:
                name = b.picture.name if len(views) > 1 else b.picture.name.split("-", 2)[2]
                paths.append(folder / f"{name}.png")
                paths[-1].write_bytes(b.picture.png)
    return paths


ORDER = {"regression": 0, "inconclusive": 1, "no value": 2, "ok": 3, "unchanged": 4}


def line(v: Verdict, margin: float) -> str:
    """One verdict as pyperf words it: the values, the change, and what it means."""
    kind = v.kind.upper() if v.kind in ("regression", "inconclusive") else v.kind
    head = f"{kind:<12} {v.subject}"
    values = f"{head}: {v.measure} {format_number(v.base)} -> {format_number(v.new)}"
    if v.note:
        return f"{values}: {v.note}"
    if v.kind == "unchanged":
        return values
    change = f"{values}, {100 * abs(v.change):.1f}% {'worse' if v.change > 0 else 'better'}"
    if v.kind == "inconclusive":
        b, n = v.repeats
        ran = f"{b} repeat{'s' * (b != 1)}" if b == n else f"{b} vs {n} repeats"
        return f"{change} with {ran}: inconclusive (needs ≥ {v.needs} repeats)"
    within = f", within the {100 * margin:.0f}% margin" if v.change > 0 and v.kind == "ok" else ""
    return f"{change} ({'significant' if v.significant else 'not significant'}{within})"


def lines(verdicts: list[Verdict], margin: float) -> list[str]:
    """One line per verdict, regressions first, then the inconclusive, then the rest."""
    ordered = sorted(verdicts, key=lambda v: (ORDER[v.kind], str(v.subject), v.measure))
    out = [line(v, margin) for v in ordered]
    count = {kind: sum(v.kind == kind for v in verdicts) for kind in ORDER}
    out.append(
        f"{count['regression']} regression(s), {count['inconclusive']} inconclusive in "
        f"{len(verdicts)} comparison(s) (margin {100 * margin:.0f}%, 95% intervals and "
        "Welch's t-test)"
    )
    return out

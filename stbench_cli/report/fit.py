"""Tables that fit a terminal's width without cutting a value (pure).

A table too wide for the terminal loses whole columns, never characters: a key, or a value,
that has one value in every row moves into a heading, then the key with the fewest values
splits the table into sections under headings (`grid=30x84`), and last the value columns are
spread over several tables that each repeat the keys. A number is always printed whole.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

Render = Callable[[pd.DataFrame], str]


def text_width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit_table(table: pd.DataFrame, width: int, render: Render, heading: str = "",
              whole: bool = True) -> list[tuple[str, pd.DataFrame]]:
    """(heading, table) pieces, each rendering within `width` where any layout can.

    `table.attrs["keys"]` names the key columns (the rest are values); the last key, the
    table's row axis, always stays a column. In order: keys (and values) with one value become
    the heading; then value columns spread over tables that repeat the keys, or the key with
    the fewest values splitting the rows into sections, whichever reads shorter (sections only,
    if the keys and the widest value do not fit)."""
    keys = [k for k in table.attrs.get("keys", []) if k in table.columns]
    if text_width(render(table)) <= width or len(table) == 0:
        return [(heading, table)]
    constant = [k for k in keys[:-1] if table[k].nunique(dropna=False) == 1]
    if constant:
        return _split_rows(table, constant[0], keys, width, render, heading)
    # a value every line of the whole table shares (a target, "3/3") is said once, in the heading
    # (not one a section's few lines happen to share: that would scatter the sections)
    same = [c for c in table.columns if c not in keys and whole and len(table) > 1 and table[c].nunique(dropna=False) == 1]
    if same:
        said = ", ".join(f"{c}={table[c].iloc[0]}" for c in same)
        rest = table.drop(columns=same)
        rest.attrs["keys"] = keys
        return fit_table(rest, width, render, f"{heading}, {said}" if heading else said, whole=False)
    values = [c for c in table.columns if c not in keys]
    by_rows = None
    if len(keys) > 1:
        fewest = min(keys[:-1], key=lambda k: table[k].nunique(dropna=False))
        by_rows = _split_rows(table, fewest, keys, width, render, heading)
    if values and max(text_width(render(table[keys + [v]])) for v in values) <= width:
        by_columns = _split_columns(table, keys, width, render, heading)
        # both fit: the shorter to read (sections drop a key column, so may hold more values)
        return by_columns if by_rows is None or _lines(by_columns, render) <= _lines(by_rows, render) else by_rows
    return by_rows if by_rows is not None else _split_columns(table, keys, width, render, heading)


def _lines(pieces: list[tuple[str, pd.DataFrame]], render: Render) -> int:
    return sum(len(render(t).splitlines()) + (heading.count("\n") + 2 if heading else 0) for heading, t in pieces)


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


def fit_columns(widths: dict[str, int], width: int, drop_order: list[str], overhead: Callable[[int], int]) -> list[str]:
    """The columns (in their order) kept so that their widths plus the table's `overhead`
    for n columns fit `width`: columns leave in `drop_order`, whole, until the rest fit."""
    kept = list(widths)
    for name in drop_order:
        if sum(widths[c] for c in kept) + overhead(len(kept)) <= width:
            break
        if name in kept:
            kept.remove(name)
    return kept

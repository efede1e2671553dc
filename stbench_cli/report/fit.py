"""Tables that fit a terminal's width without cutting a value (pure).

A table too wide for the terminal loses whole columns, never characters: a key that has one
value in every row moves into a heading, then the key with the fewest values splits the table
into sections under headings (`grid=30x84`), and last the value columns are spread over
several tables that each repeat the keys. A number is always printed whole.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

Render = Callable[[pd.DataFrame], str]


def text_width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit_table(table: pd.DataFrame, width: int, render: Render, heading: str = "") -> list[tuple[str, pd.DataFrame]]:
    """(heading, table) pieces, each rendering within `width` where any layout can.

    `table.attrs["keys"]` names the key columns (the rest are values); the last key, the
    table's row axis, always stays a column. In order: keys with one value become the
    heading; value columns are spread over tables that repeat the keys, if the keys and the
    widest value fit; otherwise the key with the fewest values splits the rows into sections."""
    keys = [k for k in table.attrs.get("keys", []) if k in table.columns]
    if text_width(render(table)) <= width or len(table) == 0:
        return [(heading, table)]
    constant = [k for k in keys[:-1] if table[k].nunique(dropna=False) == 1]
    if constant:
        return _split_rows(table, constant[0], keys, width, render, heading)
    values = [c for c in table.columns if c not in keys]
    if values and max(text_width(render(table[keys + [v]])) for v in values) <= width:
        return _split_columns(table, keys, width, render, heading)
    if len(keys) > 1:
        fewest = min(keys[:-1], key=lambda k: table[k].nunique(dropna=False))
        return _split_rows(table, fewest, keys, width, render, heading)
    return _split_columns(table, keys, width, render, heading)


def _split_rows(table, key, keys, width, render, heading) -> list[tuple[str, pd.DataFrame]]:
    pieces = []
    for value, part in table.groupby(key, sort=False, dropna=False):
        sub = part.drop(columns=[key]).reset_index(drop=True)
        sub.attrs["keys"] = [k for k in keys if k != key]
        title = f"{heading}, {key}={value}" if heading else f"{key}={value}"
        pieces += fit_table(sub, width, render, title)
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

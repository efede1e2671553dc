"""Findings of the studies that ask how fast: hardware against hardware (is the GPU worth it),
precision and compilation (pure: a study's rows in, one or two sentences and the table behind
them out; data-parallel scaling is scaling.py's, the batch size cost.py's).

A device study answers with two ratios: each GPU's fastest cell against the CPU's
fastest configuration (the tuned CPU) and against the CPU at its defaults. A GPU held against
whatever CPU happened to run looks better than it is: "Debunking the 100X GPU vs. CPU myth"
(ISCA 2010) found 2.5x where 10-1000x had been reported, once both sides were tuned. A
hardware's configurations are its cells over every key but the problem's (model.PROBLEM: the
epochs, the world, a size); cells are compared only where the problem is the same. With time to
target, energy and money (ttt.costs), the size from which the GPU wins
(cost.crossover_sentence), and flags where the comparison may flatter the GPU (judge.device_flags).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .cells import Cell, cells, contrast, differs, ratio, rows_of
from .cost import crossover_sentence
from .labels import format_number, hardware_order
from .model import HARDWARE, PROBLEM, Key, at_defaults, axes, first_axes, name_of
from .tables import SPREAD, cells_table
from .ttt import ENERGY, MONEY, costs, reached_rows, runs

SPS = "samples/s"
FIGURE = [("samples_per_s", SPS)]


@dataclass(frozen=True)
class Match:
    """One hardware (a GPU) against the first (the CPU), where both ran the same problem."""

    label: str
    base: str
    keys: tuple[Key, ...]  # the problem's keys, then the configuration's
    problem: int  # how many of `keys` are the problem's
    gpu: Cell  # its fastest cell
    tuned: Cell  # the base's fastest cell of that problem
    default: Cell | None  # the base's cell at its defaults there (None: it ran none)
    configs: int  # the base's configurations (its cells over the configuration's keys)
    pairs: tuple[tuple[Cell, Cell], ...]  # (base's fastest, this one's fastest) per problem

    def settings(self, cell: Cell) -> str:
        """What sets a cell's configuration apart: 'threads=1, precision=bf16'."""
        return name_of(self.keys[self.problem :], cell.key[self.problem :])

    def rows(self, s: pd.DataFrame, cell: Cell, base: bool = True) -> pd.DataFrame:
        """The ok rows of one of its cells, the base's or (base=False) this hardware's."""
        label = self.base if base else self.label
        return rows_of(s[(s["label"] == label) & (s["status"] == "ok")], self.keys, cell)


def matches(s: pd.DataFrame) -> tuple[list[str], list[Match]]:
    """The hardware that finished a run (CPUs first), and each other one against the first."""
    order = hardware_order(s)
    found = sorted(dict.fromkeys(s[s["status"] == "ok"]["label"]), key=order.get)
    if len(found) < 2:
        return found, []
    others = [k for k in axes(s) if k != HARDWARE]
    problem = [k for k in others if k.column in PROBLEM]
    keys = (*problem, *(k for k in others if k not in problem))
    base = s[s["label"] == found[0]]
    mine = cells(base, "samples_per_s", keys)
    plain = base[base["params"].map(at_defaults).astype(bool)]
    at = {c.shown for c in cells(plain, "samples_per_s", keys)}
    out = [_match(s, found[0], label, keys, len(problem), mine, at) for label in found[1:]]
    return found, [m for m in out if m is not None]


def _fastest(found: list[Cell]) -> Cell:
    return max(found, key=lambda c: c.median)


def _match(s, base, label, keys, n, mine, plain_keys) -> Match | None:
    theirs = cells(s[s["label"] == label], "samples_per_s", keys)
    ran = {c.shown[:n] for c in theirs}
    common = [p for p in dict.fromkeys(c.shown[:n] for c in mine) if p in ran]
    if not common:
        return None
    pairs = tuple(
        tuple(_fastest([c for c in side if c.shown[:n] == p]) for side in (mine, theirs))
        for p in common
    )
    gpu = _fastest([b for _, b in pairs])
    here = [c for c in mine if c.shown[:n] == gpu.shown[:n]]
    plain = [c for c in here if c.shown in plain_keys]

    def alike(c: Cell) -> int:  # the batch, a workload's parameter: the GPU's where it ran
        return sum(a == b for a, b in zip(c.shown[n:], gpu.shown[n:]))

    default = max(plain, key=alike) if plain else None
    configs = len({c.shown[n:] for c in mine})
    return Match(label, base, tuple(keys), n, gpu, _fastest(here), default, configs, pairs)


def device(s: pd.DataFrame) -> str:
    """Each other hardware against the first (CPUs first): samples/s against the tuned CPU and
    the CPU at its defaults, time to target, energy and money, and where a size varies, the
    size from which the GPU wins."""
    found, compared = matches(s)
    if len(found) < 2:
        only = found[0] if found else "no hardware"
        return f"Only {only} finished a run: nothing to compare."
    if not compared:
        return f"No cell ran on both {found[0]} and another machine."
    text = " ".join(_sentence(s, m) for m in compared)
    if max(m.configs for m in compared) == 1 and who(s, found[0]) == "CPU":  # tune is the CPU's
        text += (
            f" The {who(s, found[0])} was not tuned (one configuration ran): `stbench tune "
            f"{s['workload'].iloc[0]}` finds its best configuration to run the study with."
        )
    return text + "".join(crossover_sentence(s, m.base, m.label, m.keys) for m in compared)


def who(s: pd.DataFrame, label: str) -> str:
    """'CPU' where the hardware is one (a device study's first, as a rule), else its label."""
    kinds = s.loc[s["label"] == label, "device"].astype(str).str.split(":").str[0]
    return "CPU" if set(kinds) == {"cpu"} else label


def _versus(base: Cell, other: Cell, what: str, unit: str = SPS, **how) -> str:
    """contrast() naming what `other` is held against: '7.90x faster than the tuned CPU (...)'."""
    text = contrast(base, other, unit=unit, **how)
    if not what:
        return text
    head, _, rest = text.partition(" (")
    link = "from" if head.startswith("no significant") else "than"
    return f"{head} {link} {what}" + (f" ({rest}" if rest else "")


def _sentence(s: pd.DataFrame, m: Match) -> str:
    head = f"{m.label} against {m.base}: "
    if len(m.pairs) > 1:
        rs = [ratio(a, b) for a, b in m.pairs]
        lo, hi = f"{min(rs):.2f}x", f"{max(rs):.2f}x"
        head += (
            f"{lo if lo == hi else f'from {lo} to {hi}'} the samples/s over {len(m.pairs)} cells "
            f"(significant in {sum(differs(a, b) for a, b in m.pairs)} of {len(m.pairs)})"
        )
        if m.configs == 1:
            return head + "."
        head += f"; at its fastest ({name_of(m.keys[: m.problem], m.gpu.key[: m.problem])}): "
    said = costs(m.rows(s, m.gpu, base=False), m.rows(s, m.tuned), who(s, m.base))
    return head + _ratios(s, m) + said + "."


def held(s: pd.DataFrame, m: Match) -> list[tuple[Cell, str]]:
    """The CPU cells a GPU is held against, each with how a sentence names it ('' where the
    CPU ran one configuration: it is the CPU)."""
    cpu = who(s, m.base)
    if m.configs == 1:
        return [(m.tuned, "")]
    tuned = f"the tuned {cpu} ({m.settings(m.tuned)})"
    if m.default is None:
        return [(m.tuned, tuned)]
    if m.default.shown == m.tuned.shown:
        defaults = f"the {cpu} at its defaults ({m.settings(m.tuned)}), its fastest configuration"
        return [(m.tuned, defaults)]
    return [(m.tuned, tuned), (m.default, f"the {cpu} at its defaults")]


def _ratios(s: pd.DataFrame, m: Match) -> str:
    """Samples/s against each CPU cell held, then the time to target where both reached it."""
    against = held(s, m)
    text = " and ".join(_versus(cpu, m.gpu, what) for cpu, what in against)
    if m.configs > 1 and m.default is None:
        text += f"; no {who(s, m.base)} cell ran at its defaults"
    r = runs(s)
    hit = {c.shown: c for c in cells(r[reached_rows(r)], "time_to_target_s", [HARDWARE, *m.keys])}
    gpu = hit.get((m.label, *m.gpu.shown))
    said = [
        _versus(hit[key], gpu, what, "s", higher_is_better=False, words=("sooner", "later"))
        for cpu, what in against
        if gpu is not None and (key := (m.base, *cpu.shown)) in hit
    ]
    return text + (f"; reached the target {' and '.join(said)}" if said else "")


def device_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """One line per cell: samples/s, time to target, energy and money where measured, and
    which cells the finding holds against which."""
    compared = matches(s)[1]
    keys = [HARDWARE, *(compared[0].keys if compared else (k for k in axes(s) if k != HARDWARE))]
    framed = s.assign(energy_j=s[list(ENERGY)].sum(axis=1, min_count=1))
    figures = [("samples_per_s", SPS)]
    r = runs(s)
    if reached_rows(r).any():
        figures.append(("time_to_target_s", "time to target s"))
    if framed["energy_j"].notna().any():
        figures.append(("energy_j", "energy J"))
    priced = [(c, f"USD {words}") for c, words in MONEY if c in s and s[c].notna().any()]
    table = cells_table(framed, keys, figures + priced[:1])
    roles: dict[tuple, list[str]] = {}
    for m in compared:
        roles.setdefault((m.label, *m.gpu.shown), []).append(f"fastest {m.label}")
        for cell, what in held(s, m):
            said = what.split(" (")[0] if what else f"the {who(s, m.base)}"
            roles.setdefault((m.base, *cell.shown), []).append(f"{said} vs {m.label}")
    lines = table[table.attrs["keys"]].itertuples(index=False)
    table["compared as"] = ["; ".join(roles.get(tuple(x), [])) for x in lines]
    return f"samples/s, time to target, energy and money per cell ({SPREAD})", table


def is_eager_fp32(key: dict) -> bool:
    """fp32 math, eager: strict fp32, or torch's default (fp32 matmul; TF32 convolutions on CUDA:
    the precision every cell has unless one sets another)."""
    return str(key.get("precision", "fp32")) in ("fp32", "default", "-") and str(
        key.get("compile", "none")
    ) in ("none", "-")


def _eager(keys: list[Key], sweep: list[Cell]) -> Cell | None:
    """The fp32 eager cell of a sweep, the baseline of precision and compilation: strict fp32
    where the sweep has it, else torch's default."""
    found = [c for c in sweep if is_eager_fp32(dict(zip((k.name for k in keys), c.shown)))]
    strict = [c for c in found if "fp32" in c.shown]
    return (strict or found or [None])[0]


def precision(s: pd.DataFrame) -> str:
    """Each precision/compile cell against fp32 eager: samples/s, compile seconds and the steps
    it takes the faster step to pay the compilation back."""
    keys = [k for k in first_axes(s, "precision", "compile") if k != HARDWARE]
    sweep = cells(s, "samples_per_s", keys)
    base = _eager(keys, sweep)
    if base is None:
        return (
            "No fp32 eager cell finished: no baseline to compare precision and compilation against."
        )
    parts = [
        f"{c.name}: {contrast(base, c, amounts=False)}{_payback(s, keys, base, c)}"
        for c in sweep
        if c is not base
    ]
    return f"Against {_baseline(base)} ({base.amount(SPS)}): " + "; ".join(parts) + "."


def _baseline(base: Cell) -> str:
    return "fp32 eager" if "fp32" in base.shown else "torch's default precision, eager"


def _payback(s: pd.DataFrame, keys: list[Key], base: Cell, cell: Cell) -> str:
    """', compile 12.3 s, pays back after 4,500 steps' for a compiled cell ('' for an eager one)."""
    compiled = {c.key: c for c in cells(s, "compile_s", keys)}.get(cell.key)
    if compiled is None or not any(v > 0 for v in compiled.values):
        return ""
    step = s.assign(step_s=s["global_batch_size"] / s["samples_per_s"])
    per_step = {c.key: c.median for c in cells(step, "step_s", keys)}
    saved, seconds = per_step[base.key] - per_step[cell.key], format_number(compiled.median)
    if not saved > 0:
        return f", compile {seconds} s, never pays back (no faster per step)"
    return f", compile {seconds} s, pays back after {math.ceil(compiled.median / saved):,} steps"


def precision_view(s: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    keys = first_axes(s, "precision", "compile")
    table = cells_table(s, keys, FIGURE)
    sweep = cells(s, "samples_per_s", keys)
    base = _eager(keys, sweep)
    said = {c.shown: "baseline" if c is base else _against(base, c) for c in sweep} if base else {}
    compiled = {c.shown: format_number(c.median) for c in cells(s, "compile_s", keys)}
    rows = [tuple(r) for r in table[table.attrs["keys"]].itertuples(index=False)]
    named = _baseline(base) if base else "fp32 eager"
    table[f"vs {named}"] = [said.get(r, "-") for r in rows]
    heading = f"samples/s ({SPREAD}) against {named}"
    if not compiled:  # nothing compiled: a column of dashes, and words about it, say nothing
        return heading, table
    table["compile s"] = [compiled.get(r, "-") for r in rows]
    return f"{heading}, and the median seconds spent compiling", table


def _against(base: Cell, c: Cell) -> str:
    """pyperf's table wording: the ratio, or "not significant" (how it was judged is the
    finding's to say)."""
    text = contrast(base, c, amounts=False, note=False).partition(" (")[0]
    return "not significant" if text.startswith("no significant") else text

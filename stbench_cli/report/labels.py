"""How values read (pure): numbers, ratios and table keys as text, labels in the order a
reader expects, and the hardware's labels.

Labels sort with the numbers inside them compared as numbers, so that grid=30x84 comes before
180x360 and size=2k7 before 11k. A hardware label names one piece of hardware on one machine: a
cuda row its GPU (`H100 80GB HBM3`, `T4`), a cpu row its CPU and cores (`EPYC (2 cores)`), as
the studies stbench reproduces head their columns. The host is added only where two machines
share a label (`T4@node1`, `T4@node2`), and a short fingerprint where they share the host too,
so grouping by a label never pools rows of two machines.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from ..device import is_cuda

_PIECES = re.compile(r"(\d+(?:\.\d+)?)")
# Words that name the vendor, the brand tier or the marketing of a part rather than the part.
_CPU_NOISE = re.compile(
    r"\((R|TM|tm|r)\)|\b(Intel|AMD|CPU|Processor|Platinum|Gold|Silver|Bronze|Core\(TM\)|"
    r"\d+-Core|\d+(st|nd|rd|th) Gen)\b|@\s*[\d.]+\s*GHz|\s(w/|with) Radeon.*$",
)
_GPU_NOISE = re.compile(r"\b(NVIDIA|Tesla|GeForce|Quadro|AMD|Radeon)\b")


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def short_cpu(model: str) -> str:
    """'Intel(R) Xeon(R) Platinum 8480+' -> 'Xeon 8480+'; 'AMD EPYC 7763 64-Core Processor' ->
    'EPYC 7763'. A model with nothing left after the noise words keeps its full name."""
    short = " ".join(_CPU_NOISE.sub(" ", model).split())
    return short.removeprefix("Core ").strip() or model.strip()


def short_gpu(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3'; 'Tesla T4' -> 'T4'."""
    return " ".join(_GPU_NOISE.sub(" ", name).split()) or name.strip()


def hardware(row) -> str:
    """The label of the hardware a row ran on, before any host is added."""
    device = _text(row.get("device")) or "cpu"
    if is_cuda(device):
        name = _text(row.get("device_name"))
        if not name or name == "cpu":  # a skipped cuda row never opened the device:
            # the inventory's first GPU
            name = re.sub(r"^\d+x ", "", _text(row.get("gpu_names")).split("; ")[0])
        return short_gpu(name) if name else device
    model = _text(row.get("cpu_model"))
    if not model:
        return device
    cores = _text(row.get("cores"))
    return f"{short_cpu(model)} ({int(float(cores))} cores)" if cores else short_cpu(model)


def labels(df: pd.DataFrame) -> list[str]:
    """One label per row, unique per (machine, hardware): a host is added only where two
    machines share a hardware label, and a short fingerprint where they share the host too."""
    base = [hardware(row) for _, row in df.iterrows()]
    mids = [_text(m) for m in df["machine_id"]]  # report.read fills it in where a row lacks it
    hosts = [_text(h) for h in df.get("host", pd.Series([""] * len(df), index=df.index))]
    machines: dict[str, dict[str, str]] = {}  # base label -> machine id -> host
    for b, m, h in zip(base, mids, hosts):
        machines.setdefault(b, {})[m] = h
    out = []
    for b, m, h in zip(base, mids, hosts):
        same = machines[b]
        if len(same) == 1:
            out.append(b)
        elif list(same.values()).count(h) == 1:
            out.append(f"{b}@{h}")
        else:
            out.append(f"{b}@{h}#{m[:4]}")
    return out


def hardware_order(df: pd.DataFrame) -> dict[str, tuple]:
    """Column order of the hardware: CPUs first (the usual baseline), then GPUs, by name."""
    return {label: (is_cuda(str(dev)), label) for label, dev in zip(df["label"], df["device"])}


def machine_table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per labelled hardware: where it is and what it ran with (for reports)."""
    cols = ["label", "host", "cpu_model", "cores", "gpu_names", "torch", "machine_id"]
    table = df[cols].drop_duplicates(subset=["label"]).sort_values("label")
    for c in ("cores",):
        if c in table.columns:
            table[c] = [
                str(int(v)) if isinstance(v, float) and not math.isnan(v) else _text(v)
                for v in table[c]
            ]
    table = table.fillna("").astype(str).rename(columns={"label": "hardware"})
    # a column no machine has a value in (gpu_names on a CPU) says nothing: left out
    return table[[c for c in table.columns if (table[c] != "").any()]]


def format_number(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def format_ratio(r: float, better: str = "faster", worse: str = "slower") -> str:
    """pyperf's wording: how many times better or worse than the baseline."""
    if not math.isfinite(r) or r <= 0:
        return "-"
    if r == 1.0:
        return "same"
    return f"{r:.2f}x {better}" if r > 1 else f"{1 / r:.2f}x {worse}"


def show(value) -> str:
    """A table key as text: '-' where a row has no value, '""' for an empty text."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return str(value) if value != "" else '""'


def natural(value) -> tuple:
    """A sort key: each run of digits a number, the text between it text ('-' and missing
    values last)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ((2, ""),)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ((0, float(value)),)
    text = str(value)
    if text == "-":
        return ((2, ""),)
    pieces = enumerate(_PIECES.split(text))
    return tuple((0, float(p)) if i % 2 else (1, p) for i, p in pieces if p != "")


def sort_natural(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The table's rows ordered by its key columns, each in natural order; its attrs kept."""
    keys = [k for k in keys if k in table.columns]
    if not keys or table.empty:
        return table
    order = sorted(range(len(table)), key=lambda i: tuple(natural(table[k].iloc[i]) for k in keys))
    out = table.iloc[order].reset_index(drop=True)
    out.attrs = dict(table.attrs)
    return out


def size_number(label) -> float:
    """A problem-size label as a number: 30x84 -> 2520 (the product), 2k7 -> 2700, 11k ->
    11000, 1.5M -> 1.5e6, 400000 -> 400000; NaN where it is not a size."""
    text = str(label).strip().lower()
    if "x" in text:
        parts = [size_number(p) for p in text.split("x")]
        return math.prod(parts) if parts and all(math.isfinite(p) for p in parts) else math.nan
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([km])?(\d*)", text)
    if not found:
        return math.nan
    whole, unit, frac = found.groups()
    scale = {"k": 1e3, "m": 1e6, None: 1.0}[unit]
    return float(f"{whole}.{frac}" if frac and "." not in whole else whole) * scale

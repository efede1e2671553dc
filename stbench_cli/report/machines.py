"""Hardware labels for table columns and plot legends (pure).

A column is one piece of hardware on one machine: a cuda row is labelled with its GPU's name
(`H100 80GB HBM3`, `T4`), a cpu row with its CPU and core count (`EPYC (2 cores)`), which is
what the studies stbench reproduces put in their tables. The host is added only when two
machines share a label (`T4@node1`, `T4@node2`); the label is unique per machine fingerprint
and hardware, so grouping by it never pools rows of two machines.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from ..device import is_cuda
from ..store.machine import fingerprint

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
        if not name or name == "cpu":  # a skipped cuda row never opened the device: the inventory's first GPU
            name = re.sub(r"^\d+x ", "", _text(row.get("gpu_names")).split("; ")[0])
        return short_gpu(name) if name else device
    model = _text(row.get("cpu_model"))
    if not model:
        return device
    cores = _text(row.get("cores"))
    return f"{short_cpu(model)} ({int(float(cores))} cores)" if cores else short_cpu(model)


def machine_ids(df: pd.DataFrame) -> list[str]:
    """Each row's machine fingerprint: its stored one, or one computed from what it has."""
    stored = df["machine_id"] if "machine_id" in df.columns else pd.Series([None] * len(df), index=df.index)
    out = []
    for (_, row), mid in zip(df.iterrows(), stored):
        out.append(_text(mid) or fingerprint(*(row.get(k) for k in ("host", "cpu_model", "cores", "gpu_names",
                                                                    "gpu_count", "torch"))))
    return out


def labels(df: pd.DataFrame) -> list[str]:
    """One label per row, unique per (machine, hardware): a host is added only where two
    machines share a hardware label, and a short fingerprint where they share the host too."""
    base = [hardware(row) for _, row in df.iterrows()]
    mids = machine_ids(df)
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


def machine_table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per labelled hardware: where it is and what it ran with (for reports)."""
    cols = [c for c in ("label", "host", "cpu_model", "cores", "gpu_names", "torch", "machine_id") if c in df.columns]
    table = df[cols].drop_duplicates(subset=["label"]).sort_values("label")
    for c in ("cores",):
        if c in table.columns:
            table[c] = [str(int(v)) if isinstance(v, float) and not math.isnan(v) else _text(v) for v in table[c]]
    return table.fillna("").astype(str).rename(columns={"label": "hardware"})

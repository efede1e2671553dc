"""Prices per device-hour that the user gives, and what a row's figures cost at them.
Pure, torch-free: `--price cpu=0.68 --price cuda=2.99` or `--price FILE` become a study's
`prices` in its manifest; a report turns a row and those prices into money.

A price is per device-hour, of the devices a cell held: each GPU of its world (`gpus_used`, or
its world size where its ranks did not report GPUs), and each node of a CPU cell (a CPU cell
holds the whole machine, whatever its threads). A device's price is looked up by its exact
name (`cuda:1`), then by its kind (`cuda`), so `cuda=2.99` prices every GPU.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path

from ..comparison import number
from ..device import is_cuda

FORMATS = ("toml", "json", "csv")
CSV_HEADER = ("device", "usd_per_hour")


def parse_price(text: str) -> dict[str, float]:
    """`DEVICE=USD_PER_HOUR`, or several comma-separated; ValueError naming what is wrong."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        device, sep, value = part.partition("=")
        if not sep or not device.strip() or not value.strip():
            raise ValueError(
                f"--price {text!r} is malformed; expected DEVICE=USD_PER_HOUR, e.g. "
                "cpu=0.68 or cpu=0.68,cuda=2.99"
            )
        out[device.strip()] = _usd(device.strip(), value.strip())
    return out


def _usd(device: str, value) -> float:
    try:
        price = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"price of {device} {value!r} is not a number (USD per hour)") from None
    if not math.isfinite(price) or price < 0:
        raise ValueError(
            f"price of {device} {value!r} must be a non-negative number (USD per hour)"
        )
    return price


def read_prices(path: Path) -> dict[str, float]:
    """A prices file: TOML or JSON (a table or object device = USD per hour, at the top or under
    `prices`) or CSV (columns device,usd_per_hour); ValueError naming what is wrong."""
    kind = path.suffix.lower().lstrip(".")
    if kind not in FORMATS:
        raise ValueError(f"--price {path}: use a .toml, .json or .csv file")
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"--price {path}: {exc.strerror or exc}") from None
    try:
        table = (
            _toml(text) if kind == "toml" else json.loads(text) if kind == "json" else _csv(text)
        )
    except (ValueError, csv.Error) as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"--price {path} is not valid {kind.upper()}: {exc}") from None
    if isinstance(table, dict) and isinstance(table.get("prices"), dict):
        table = table["prices"]
    if not isinstance(table, dict) or not table:
        raise ValueError(f"--price {path} holds no prices; expected DEVICE = USD_PER_HOUR pairs")
    return {str(device): _usd(str(device), value) for device, value in table.items()}


def _toml(text: str) -> dict:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:
        raise ValueError("TOML needs Python 3.11 or newer (tomllib); give a .json or .csv file")
    return tomllib.loads(text)


def _csv(text: str) -> dict:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(c.strip() for c in rows[0]) != CSV_HEADER:
        raise csv.Error(f"the header must be {','.join(CSV_HEADER)}")
    if any(len(r) != 2 for r in rows[1:] if r):
        raise csv.Error("every line needs two fields: device,usd_per_hour")
    return {r[0].strip(): r[1].strip() for r in rows[1:] if r}


def price_of(device: str, prices: Mapping[str, float]) -> float | None:
    """USD per hour of one device: by its exact name, then by its kind (before any ':')."""
    if device in prices:
        return prices[device]
    return prices.get(str(device).split(":", 1)[0])


def devices_held(row: Mapping) -> int:
    """How many priced devices a row's cell held: its GPUs, or its CPU nodes."""
    if is_cuda(str(row.get("device", ""))):
        return int(number(row.get("gpus_used")) or number(row.get("world_size")) or 1)
    return int(number(row.get("nodes")) or 1)


def usd_per_second(row: Mapping, prices: Mapping[str, float]) -> float | None:
    price = price_of(str(row.get("device", "")), prices)
    return None if price is None else price * devices_held(row) / 3600.0


def cost_per_million_samples(row: Mapping, prices: Mapping[str, float]) -> float | None:
    """USD to train on a million samples at the row's steady throughput (None: no price, or no
    throughput)."""
    rate, sps = usd_per_second(row, prices), number(row.get("samples_per_s"))
    return rate * 1e6 / sps if rate is not None and sps else None


def cost_to_target(row: Mapping, prices: Mapping[str, float]) -> float | None:
    """USD to reach the row's target, on MLPerf's clock (`time_to_target_s`); None where the
    row did not reach it or its device has no price."""
    rate, seconds = usd_per_second(row, prices), number(row.get("time_to_target_s"))
    return rate * seconds if rate is not None and seconds is not None else None

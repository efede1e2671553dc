"""Energy counters read at a cell's start and end, each device's with the method named (issue
32): NVML's energy counter for GPUs, RAPL's package counters for CPUs, or "none: <why>".

RAPL is read through the powercap sysfs tree (`ROOT/intel-rapl:N/energy_uj`; AMD's packages
appear there too): one zone per CPU package, its sub-zones (cores, uncore, DRAM) and a `psys`
platform zone left out so nothing is counted twice. Each package counter wraps at its own
`max_energy_range_uj`, so a delta is taken package by package. A package counter is the whole
socket's: every process on it counts, not the cell's alone. Since Linux 5.10 `energy_uj` is
readable by root only (CVE-2020-8694); a VM usually exposes no powercap tree at all.

A window too short for a meter to see is flagged: NVML's counter moves every 20-100 ms, RAPL's
about every millisecond, and MLPerf's power rules ask for at least 60 samples at 1 Hz or more,
so a window under MIN_WINDOW_S is `energy_short`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = "/sys/class/powercap"
MIN_WINDOW_S = 60.0  # MLPerf's power rules: at least 60 samples at 1 Hz or more
NVML = "nvml counter"


@dataclass(frozen=True)
class RaplReading:
    """Each package zone's counter and wrap range, in µJ."""

    counters: tuple[tuple[str, float, float], ...]  # (zone, energy_uj, max_energy_range_uj)

    @property
    def method(self) -> str:
        n = len(self.counters)
        return f"rapl ({n} package{'s' if n > 1 else ''})"


def package_zones(root: str = ROOT) -> list[Path]:
    """The CPU package zones under a powercap root (sub-zones and psys left out)."""
    zones = []
    for z in sorted(Path(root).glob("intel-rapl:*")):
        if z.name.count(":") != 1:
            continue  # intel-rapl:0:0 is a sub-zone of package 0 (cores, uncore, dram)
        try:
            name = (z / "name").read_text().strip()
        except OSError:
            name = "package"  # a tree without names: take the zone as a package
        if name.startswith("package"):
            zones.append(z)
    return zones


def read_rapl(root: str = ROOT) -> RaplReading | str:
    """The package counters now, or why they cannot be read ("none: ...")."""
    if not Path(root).is_dir():
        return f"none: no {root} (no RAPL powercap exposed here; a VM usually has none)"
    zones = package_zones(root)
    if not zones:
        return f"none: no RAPL package zone under {root}"
    counters = []
    for z in zones:
        try:
            counters.append(
                (
                    z.name,
                    float((z / "energy_uj").read_text()),
                    float((z / "max_energy_range_uj").read_text()),
                )
            )
        except PermissionError:
            return (
                f"none: permission denied reading {z / 'energy_uj'} (root only since Linux "
                "5.10; run as root or make it readable)"
            )
        except (OSError, ValueError) as exc:
            return f"none: {z / 'energy_uj'} unreadable ({type(exc).__name__})"
    return RaplReading(tuple(counters))


def rapl_joules(start: RaplReading, end: RaplReading) -> float | None:
    """Joules between two readings, package by package, each counter's wrap undone (one wrap
    at most: a counter of 2^32 µJ or more wraps after minutes at a socket's power)."""
    before = {z: (e, span) for z, e, span in start.counters}
    total = 0.0
    for zone, e, span in end.counters:
        if zone not in before:
            return None
        delta = e - before[zone][0]
        total += delta if delta >= 0 else delta + span
    return total / 1e6


def cpu_energy(start: RaplReading | str, end: RaplReading | str) -> tuple[float | None, str]:
    """(joules, method) of the CPU packages over a window."""
    if isinstance(start, str):
        return None, start
    if isinstance(end, str):
        return None, end
    joules = rapl_joules(start, end)
    return joules, start.method if joules is not None else "none: the RAPL zones changed"


def gpu_method(gpu_cell: bool, have_handles: bool, joules: float | None) -> str:
    """How a cell's GPU energy was measured, or why not."""
    if joules is not None:
        return NVML
    if not gpu_cell:
        return "none: the cell used no GPU"
    if not have_handles:
        return "none: NVML cannot see the cell's GPUs (no driver or nvidia-ml-py)"
    return "none: NVML's energy counter is not readable (before Volta, MIG mode or a container)"


def energy_columns(
    gpu_j: float | None, gpu_how: str, cpu_j: float | None, cpu_how: str, window_s: float
) -> dict:
    """The row's energy columns (store.rows.Derived)."""
    measured = gpu_j is not None or cpu_j is not None
    return {
        "gpu_energy_j": gpu_j,
        "cpu_energy_j": cpu_j,
        "gpu_energy_method": gpu_how,
        "cpu_energy_method": cpu_how,
        "energy_window_s": window_s if measured else None,
        "energy_short": window_s < MIN_WINDOW_S if measured else None,
    }

"""A background sampler of the cell's process tree (psutil) and its GPUs (NVML), plus
energy counters read at the cell's start and end (NVML for GPUs, RAPL for CPUs)."""

from __future__ import annotations

import glob
import threading
import time

import psutil

from . import nvml

_RAPL = "/sys/class/powercap/intel-rapl:[0-9]*"


def _rapl_uj() -> tuple[float, float] | None:
    """(energy, wrap range) summed over CPU packages in µJ, or None where unreadable."""
    total = span = 0.0
    zones = [z for z in glob.glob(_RAPL) if z.count(":") == 1]
    try:
        for z in zones:
            total += float(open(f"{z}/energy_uj").read())
            span += float(open(f"{z}/max_energy_range_uj").read())
    except OSError:
        return None
    return (total, span) if zones else None


class SystemSampler:
    """Samples every `interval` s in a daemon thread until `stop()`; rows are plain dicts."""

    def __init__(self, pids: int | list[int], gpu_indices: list[int], interval: float = 1.0):
        # several roots: the torchrun agents of a multi-node cell run on this machine side by side
        self.pids = [pids] if isinstance(pids, int) else list(pids)
        self.gpus, self.interval = [g for g in gpu_indices if nvml.available()], interval
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = time.monotonic()
        self._procs: dict[int, psutil.Process] = {}
        self._gpu_e0 = [nvml.energy_mj(g) for g in self.gpus]
        self._cpu_e0 = _rapl_uj()

    def start(self) -> "SystemSampler":
        psutil.cpu_percent(None)  # prime the system-wide counter
        self._thread.start()
        return self

    def _tree(self) -> list[psutil.Process]:
        # Keep Process objects between samples: cpu_percent() measures since the last call.
        for pid in self.pids:
            try:
                root = psutil.Process(pid)
                for p in [root, *root.children(recursive=True)]:
                    self._procs.setdefault(p.pid, p)
            except psutil.Error:
                pass
        return list(self._procs.values())

    def sample(self) -> dict:
        cpu = rss = 0.0
        for p in self._tree():
            try:
                cpu += p.cpu_percent(None)
                rss += p.memory_info().rss / 2**20
            except psutil.Error:
                self._procs.pop(p.pid, None)
        row = {"t_s": time.monotonic() - self._t0, "proc_cpu_pct": cpu, "proc_rss_mb": rss,
               "sys_cpu_pct": psutil.cpu_percent(None), "sys_mem_pct": psutil.virtual_memory().percent}
        if self.gpus:
            per = [nvml.sample(g) for g in self.gpus]
            row.update(gpu_util_pct=sum(s["gpu_util_pct"] for s in per) / len(per),
                       gpu_mem_mb=sum(s["gpu_mem_mb"] for s in per), gpu_power_w=sum(s["gpu_power_w"] for s in per))
        return row

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.rows.append(self.sample())

    def stop(self) -> dict:
        """Stop sampling; returns energy used since start (None where no counter is readable)."""
        self._stop.set()
        self._thread.join(timeout=5)
        gpu_j = None
        ends = [nvml.energy_mj(g) for g in self.gpus]
        if self.gpus and None not in ends and None not in self._gpu_e0:
            gpu_j = sum(e - s for s, e in zip(self._gpu_e0, ends)) / 1000.0
        cpu_j, end = None, _rapl_uj()
        if self._cpu_e0 and end:
            delta = end[0] - self._cpu_e0[0]
            cpu_j = (delta if delta >= 0 else delta + end[1]) / 1e6  # the counter wraps
        return {"gpu_energy_j": gpu_j, "cpu_energy_j": cpu_j}

"""A background sampler of the cell's process tree (psutil) and its GPUs (NVML), plus
energy counters read at the cell's start and end (NVML for GPUs, RAPL for CPUs).

The sampling thread never dies of a failed read: a GPU field that cannot be read is empty
(see nvml.GpuReader), a process that ended is dropped, and any other error of one sample is
counted in `errors` while the next sample goes on."""

from __future__ import annotations

import threading
import time

import psutil

from . import energy
from .nvml import GpuReader

FIRST_S = 0.25  # seconds to the first sample


class SystemSampler:
    """Samples every `interval` s in a daemon thread until `stop()`; rows are plain dicts."""

    def __init__(
        self,
        pids: int | list[int],
        gpus: GpuReader | None = None,
        interval: float = 1.0,
        gpu_cell: bool = False,
        rapl_root: str = energy.ROOT,
    ):
        # several roots: the torchrun agents of a multi-node cell run on this machine side by side
        self.pids = [pids] if isinstance(pids, int) else list(pids)
        self.gpus, self.interval = gpus if gpus and gpus.handles else None, interval
        self.rows: list[dict] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._t0 = time.monotonic()
        self._procs: dict[int, psutil.Process] = {}
        # each device's energy with its method; gpu_cell: the cell meant to use GPUs
        self.gpu_cell, self.rapl_root = gpu_cell or bool(self.gpus), rapl_root
        self._gpu_e0 = self.gpus.energy_mj() if self.gpus else None
        self._cpu_e0 = energy.read_rapl(rapl_root)

    def start(self) -> SystemSampler:
        psutil.cpu_percent(None)  # prime the system-wide counters
        psutil.cpu_times_percent(None)
        for p in self._tree():  # and the cell's own: its first sample then measures since now
            try:
                p.cpu_percent(None)
            except psutil.Error:
                pass
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
        row = {
            "t_s": time.monotonic() - self._t0,
            "proc_cpu_pct": cpu,
            "proc_rss_mb": rss,
            "sys_cpu_pct": psutil.cpu_percent(None),
            "sys_mem_pct": psutil.virtual_memory().percent,
            "load_1m": psutil.getloadavg()[0],
            # steal: a hypervisor running other guests on this VM's cores (Linux reports it)
            "cpu_steal_pct": getattr(psutil.cpu_times_percent(None), "steal", None),
        }
        if self.gpus:
            row.update(self.gpus.sample())
        return row

    def _loop(self) -> None:
        # the first sample early: a warm cell may end within its first second (runner/warm.py)
        wait = min(self.interval, FIRST_S)
        while not self._stop.wait(wait):
            wait = self.interval
            try:
                self.rows.append(self.sample())
            except Exception as exc:  # one bad sample must not end the sampling of the cell
                self.errors.append(f"{type(exc).__name__}: {exc}")

    @property
    def unavailable(self) -> set[str]:
        """GPU fields that could not be read at least once."""
        return set(self.gpus.unavailable) if self.gpus else set()

    def stop(self) -> dict:
        """Stop sampling; returns the energy used since start with each device's method
        (runner/energy.py), None where no counter is readable."""
        self._stop.set()
        self._thread.join(timeout=5)
        gpu_j = None
        end = self.gpus.energy_mj() if self.gpus else None
        if end is not None and self._gpu_e0 is not None:
            gpu_j = (end - self._gpu_e0) / 1000.0
        cpu_j, cpu_how = energy.cpu_energy(self._cpu_e0, energy.read_rapl(self.rapl_root))
        gpu_how = energy.gpu_method(self.gpu_cell, bool(self.gpus), gpu_j)
        return energy.energy_columns(gpu_j, gpu_how, cpu_j, cpu_how, time.monotonic() - self._t0)

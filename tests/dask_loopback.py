"""A Dask cluster on loopback for the tests: a real `dask scheduler` and real `dask worker`
processes (each with its nanny, Dask's default), started by the test and stopped by PID."""

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil


class LoopbackCluster:
    """`dask scheduler --scheduler-file FILE` and `workers` x `dask worker` on 127.0.0.1."""

    def __init__(self, folder: Path, workers: int = 2):
        self.folder, self.file = folder, folder / "scheduler.json"
        folder.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self._start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"], "scheduler"
        )
        deadline = time.monotonic() + 60
        while not self.file.exists():
            assert time.monotonic() < deadline, (folder / "scheduler.log").read_text()[-2000:]
            time.sleep(0.1)
        for _ in range(workers):
            self.add_worker()
        self.wait_for(workers)

    def _start(self, args: list[str], name: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "w")
        exe = str(Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "dask")
        exe = exe if os.path.exists(exe) else "dask"
        proc = subprocess.Popen(
            [exe, *args, "--scheduler-file", str(self.file)],
            # the ranks' environment is their worker's: the cluster's own data cache
            env=dict(os.environ, STBENCH_CACHE=str(self.folder / "cache")),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stopped by PID, never by the terminal's signals
        )
        self.procs.append(proc)
        return proc

    def add_worker(self) -> subprocess.Popen:
        name = f"worker{len(self.workers)}"
        args = ["worker", "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard"]
        proc = self._start([*args, "--name", name], name)
        self.workers.append(proc)
        return proc

    @property
    def address(self) -> str:
        import json

        return json.loads(self.file.read_text())["address"]

    def addresses(self) -> list[str]:
        from distributed import Client

        with Client(scheduler_file=str(self.file), timeout=30) as client:
            return sorted(client.scheduler_info(n_workers=-1)["workers"])

    def wait_for(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.addresses()) < n:
            assert time.monotonic() < deadline, f"fewer than {n} workers after {timeout} s"
            time.sleep(0.5)

    def stop(self) -> None:
        """Every process this cluster started, by PID: SIGTERM (a nanny closes its worker),
        then SIGKILL to whatever of their trees is left."""
        tree = []
        for proc in self.procs:
            try:
                tree += [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(True)]
            except psutil.Error:
                pass
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        # a nanny's graceful close waits ~10 s on its worker: nothing reads the cluster after
        # this, so a few seconds' grace, then SIGKILL
        _, alive = psutil.wait_procs(tree, timeout=3)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        for proc in self.procs:
            proc.wait(timeout=15)

"""The Dask cluster of a `--launcher dask` study: found, or started through Dask's own classes.

Where the cluster is, in the order `distributed.Client` itself looks (`--dask`, launch_config):

    scheduler=ADDRESS       a running scheduler (`dask scheduler` on a node, a cluster manager)
    scheduler_file=PATH     the file `dask scheduler --scheduler-file` writes (a shared FS)
    (neither)               Dask's configuration: `scheduler-address`, which is what
                            DASK_SCHEDULER_ADDRESS sets, as `distributed.Client()` reads it
    cluster=local           a `distributed.LocalCluster` of the study's largest world, started
                            for the study and closed after it: this machine, asked for by name
    cluster=slurm|pbs|lsf|sge|htcondor
                            dask-jobqueue's cluster class, its options from --dask (cores=,
                            memory=, queue=, account=, walltime=, job_extra_directives=...),
                            one worker per job, scaled to the largest world, closed after it

stbench never starts a LocalCluster unasked: with no address and no Dask configuration a study
stops with one line naming these. A LocalCluster started silently would put a study that asked
for "the cluster" on this machine, with rows that say dask; asked for by name, its manifest
says so. Nor does stbench start a scheduler of its own making: every scheduler here is Dask's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import StbenchError
from ...plan.launcher_config import CLUSTERS, Launch

CONNECT_S = 20.0  # how long to wait for a scheduler to answer
WORKERS_S = 300.0  # how long a started cluster may take to have its workers (a queue)
_CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "lsf": "LSFCluster",
    "sge": "SGECluster",
    "htcondor": "HTCondorCluster",
}
assert set(_CLASSES) | {"local"} == set(CLUSTERS)


@dataclass
class Cluster:
    """A study's connection to its cluster (live objects: not a record)."""

    client: object  # distributed.Client
    where: str  # how it was found, for messages: "the scheduler at tcp://..."
    owned: object | None = None  # the cluster stbench started, closed with the study

    @property
    def address(self) -> str:
        return self.client.scheduler.address

    def workers(self) -> list[str]:
        """The cluster's workers now, sorted by address: rank i runs on the i-th (the order
        dask-pytorch-ddp uses; dcrnn-pems' dask-index places its parts by the same rule)."""
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def close(self) -> None:
        self.client.close()
        if self.owned is not None:
            self.owned.close()


def configured_address() -> str | None:
    """The scheduler Dask's configuration names (DASK_SCHEDULER_ADDRESS sets it), or None."""
    import dask

    return dask.config.get("scheduler-address", None)


def where(launch: Launch) -> str:
    """How the study finds its cluster, in words (no connection made)."""
    o = launch.dask_options
    if "cluster" in o:
        return f"a {o['cluster']} cluster stbench starts ({_class_name(o['cluster'])})"
    if "scheduler_file" in o:
        return f"the scheduler of {o['scheduler_file']}"
    address = o.get("scheduler") or configured_address()
    if address:
        return f"the scheduler at {address}"
    raise StbenchError(
        "--launcher dask needs a cluster: --dask scheduler=ADDRESS, --dask scheduler_file=PATH, "
        "DASK_SCHEDULER_ADDRESS (Dask's configuration), or one stbench starts: --dask "
        f"cluster={'|'.join(CLUSTERS)} (local: a LocalCluster on this machine)"
    )


def _class_name(name: str) -> str:
    return "distributed.LocalCluster" if name == "local" else f"dask_jobqueue.{_CLASSES[name]}"


def start_cluster(options: dict, workers: int, logs: Path | None = None):
    """Dask's own cluster class for `cluster=`, with --dask's other options, `workers` workers
    asked for (one per job for dask-jobqueue: a rank's worker is a node's share of its own).
    `logs`: where dask-jobqueue's jobs write their output (else the batch system's default,
    the folder stbench was started in)."""
    kwargs = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}
    name = kwargs.pop("cluster")
    if logs is not None and name != "local":
        kwargs.setdefault("log_directory", str(logs))
    try:
        if name == "local":
            from distributed import LocalCluster

            kwargs.setdefault("threads_per_worker", 1)
            kwargs.setdefault("dashboard_address", None)
            return LocalCluster(n_workers=workers, processes=True, **kwargs)
        import dask_jobqueue

        # its dashboard on a free port: 8787 may be another study's, or another user's
        kwargs.setdefault("scheduler_options", {"dashboard_address": ":0"})
        cluster = getattr(dask_jobqueue, _CLASSES[name])(processes=1, **kwargs)
    except (TypeError, ValueError) as exc:  # the class's own word on a missing or bad option
        raise StbenchError(f"--dask cluster={name}: {' '.join(str(exc).split())}") from None
    cluster.scale(n=workers)
    return cluster


def job_script(launch: Launch) -> str:
    """The job script dask-jobqueue would submit for each worker (--dry-run): its class is made,
    which starts its scheduler in this process, and closed again; nothing is submitted."""
    cluster = start_cluster(dict(launch.dask_options), 0)
    try:
        return cluster.job_script()
    finally:
        cluster.close()


def connect(launch: Launch, workers: int, folder: Path) -> Cluster:
    """The study's cluster with at least `workers` workers (its largest world), or one line
    saying what is missing. `folder`: the study's (a started cluster's job logs go there)."""
    from distributed import Client

    o, said = launch.dask_options, where(launch)
    owned = start_cluster(dict(o), workers, folder / "dask-jobqueue") if "cluster" in o else None
    try:
        if owned is not None:
            client = Client(owned)
        elif "scheduler_file" in o:
            client = Client(scheduler_file=str(o["scheduler_file"]), timeout=CONNECT_S)
        else:
            client = Client(o.get("scheduler") or configured_address(), timeout=CONNECT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        if owned is not None:
            owned.close()
        raise StbenchError(f"--launcher dask: cannot reach {said}: {exc}") from None
    cluster = Cluster(client, said, owned)
    try:
        wait_for(cluster, workers, WORKERS_S if owned is not None else CONNECT_S)
    except StbenchError:
        cluster.close()
        raise
    return cluster


def wait_for(
    cluster: Cluster, workers: int, wait_s: float, world: str = "the study's largest world"
) -> None:
    """Until the cluster has `workers` workers (`world` needs them); else one line."""
    deadline = time.monotonic() + wait_s
    while len(cluster.workers()) < workers:
        if time.monotonic() > deadline:
            have = len(cluster.workers())
            raise StbenchError(
                f"--launcher dask: {cluster.where} has {have} worker(s) after {wait_s:g} s; "
                f"{world} needs {workers} (one rank per worker)"
            )
        time.sleep(0.5)

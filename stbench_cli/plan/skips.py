"""Why a cell cannot run here: the machine first (devices, strategy, distributed backend), then
the workload's own judgement (a parameter combination that does not exist, memory it predicts
will not fit). Decided once per cell, when the study is planned. Pure: no torch."""

from __future__ import annotations

from ..contract import Workload
from ..device import is_cuda, parse
from ..store.machine import EnvInfo
from .launcher_config import ELSEWHERE
from .spec import RunSpec


def skip_reason(
    run: RunSpec,
    gpu_count: int,
    strategies: tuple[str, ...],
    backends: tuple[str, ...] = (),
    launcher: str = "local",
) -> str | None:
    """Why this cell cannot run on this machine, or None if it can. `backends`: the
    torch.distributed backends of this torch build (empty: unknown, not checked)."""
    if run.strategy not in strategies:
        return (
            f"strategy {run.strategy} is not supported by {run.workload} "
            f"(supported: {', '.join(strategies)})"
        )
    if run.distributed:
        reason = _backend_reason(run, backends, launcher)
        if reason:
            return reason
    # A Slurm job's or Dask worker's GPUs are those of its node, not of the machine that
    # submits it.
    if is_cuda(run.device) and launcher not in ELSEWHERE:
        return _cuda_reason(run, gpu_count, launcher)
    return None


MPI4PY = "with --launcher mpirun, backend=mpi4py all-reduces DDP's gradients through MPI"


def _backend_reason(run: RunSpec, backends: tuple[str, ...], launcher: str) -> str | None:
    backend = run.backend
    if backend == "mpi4py":
        return _mpi4py_reason(run, launcher)
    if backends and backend not in backends:
        hint = f"; {MPI4PY}" if backend == "mpi" else ""
        return (
            f"backend {backend} is not available in this torch build "
            f"(torch.distributed.is_{backend}_available() is False; "
            f"available: {', '.join(backends)}{hint})"
        )
    if backend == "nccl" and not is_cuda(run.device):
        return "backend nccl needs CUDA devices; on cpu use backend gloo (or auto)"
    return None


def _mpi4py_reason(run: RunSpec, launcher: str) -> str | None:
    """backend=mpi4py is a DDP comm hook over MPI_COMM_WORLD on host buffers (child/ddp.py):
    a ddp cell, on cpu, in a world mpirun started (MPI's ranks are then torch's)."""
    if launcher != "mpirun":
        return "backend mpi4py needs the world started by mpirun (--launcher mpirun)"
    if run.strategy != "ddp":
        return (
            f"backend mpi4py is DDP's gradient all-reduce (a comm hook); {run.strategy}'s "
            "collectives would all run on gloo"
        )
    if is_cuda(run.device):
        return (
            "backend mpi4py reduces host buffers (MPI on host memory, not CUDA-aware MPI); "
            "run it on cpu"
        )
    return None


NCCL_ONE_EACH = "(NCCL wants a GPU per rank; gloo ranks may share one: --set backend=gloo)"


def _cuda_reason(run: RunSpec, gpu_count: int, launcher: str) -> str | None:
    if gpu_count == 0:
        return f"{run.device} requested, but no GPU is visible (torch.cuda.is_available() is False)"
    index = parse(run.device).index
    if index is not None:
        if run.distributed:
            return (
                f"{run.strategy} on cuda puts one rank on each GPU: "
                "use --device cuda, not a numbered device"
            )
        if index >= gpu_count:
            return (
                f"{run.device} requested, but only {gpu_count} GPU(s) are visible "
                f"(cuda:0..cuda:{gpu_count - 1})"
            )
    # NCCL wants a GPU of its own per rank; gloo ranks may share one (rank i on GPU i mod count).
    if run.distributed and run.backend == "nccl":
        if launcher == "srun":  # every node of the allocation is taken to have this node's GPUs
            if run.nproc_per_node > gpu_count:
                return (
                    f"{run.strategy} with nproc={run.nproc_per_node} per node on cuda needs "
                    f"{run.nproc_per_node} GPUs per node, {gpu_count} visible {NCCL_ONE_EACH}"
                )
        elif run.world_size > gpu_count:
            who = (
                f"nproc={run.world_size}"
                if run.nodes == 1
                else f"{run.nodes} nodes x nproc={run.nproc_per_node}"
            )
            return (
                f"{run.strategy} with {who} on cuda needs {run.world_size} GPUs, "
                f"{gpu_count} visible {NCCL_ONE_EACH}"
            )
    return None


def cell_skip(
    spec: RunSpec, env: EnvInfo, workload: Workload, launcher: str = "local"
) -> str | None:
    reason = skip_reason(spec, env.gpu_count, workload.strategies, env.dist_backends, launcher)
    if reason or workload.skip is None:
        return reason
    memory = {"host_bytes": env.ram_gb * 2**30, "device_bytes": env.gpu_memory_bytes(spec.device)}
    try:
        return workload.skip(spec.param_dict, spec.batch_size, spec.device, memory)
    except ValueError:  # unusable data: the up-front data check reports it in one line
        return None

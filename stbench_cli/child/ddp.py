"""DDP set-up and the measurement of exposed gradient-sync time.

Method: DDP all-reduces gradients bucket by bucket while backward is still running, so
most communication can hide behind compute. What the step actually *waits* for is the
communication still in flight when backward compute ends: backward returns only when every
bucket's all-reduce has finished. We register a comm hook that wraps PyTorch's default
all-reduce hook; when DDP hands it the last bucket of the step, it queues an autograd-engine
callback, which runs once the whole backward graph has been computed (just before DDP's own
finalize, which waits for the all-reduces) and takes a clock mark there (a perf_counter on
CPU, a CUDA event on GPU). sync_s is the time from that mark to the end of backward: exposed
communication, the interval DDP's own logger calls communication minus its overlap with
backward compute (`logged_comm` reads that figure for every DDP row, as a cross-check). With
one bucket (a small model) all communication is exposed, as it really is.

DDP's logger is left at its own sampling (its first 10 iterations, then every 100th): on CUDA
a sampled iteration waits on the previous one's events in forward, a host-device sync that a
sample rate of 1 would add to every step and so shift speedup and efficiency. Its figure is
an average over the sampled iterations, times the steps. `stbench doctor`'s ddp-sync check,
which holds sync_s against it step for step, samples every step (`ddp_log_every=1`). Those
first 10 sampled iterations (and the reducer's bucket rebuild after the first) stay out of
steady-state throughput: a DDP model's warm-up is at least 10 steps (`warmup_steps`).

zero1's optimizer broadcasts the updated parameter shards after its local step: that broadcast
is communication too. A post-step hook on the rank's own optimizer marks where the local step
ends, and the time from there to the end of `step()` counts as sync, not compute.
"""

# No `from __future__ import annotations` here: DDP checks the comm hook's annotations
# against the real `dist.GradBucket` and `Future` types.

import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.autograd.variable import Variable
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from ..device import Accelerator, Clock


class SyncProbe:
    """Comm-hook state: the clock and the mark of the last bucket of the current step."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.last_bucket_mark = None
        self.broadcast_mark = None  # zero1: the local optimizer step ended here
        self.count = 0  # steps whose gradients were synchronised

    def take(self):
        mark, self.last_bucket_mark = self.last_bucket_mark, None
        self.count += mark is not None
        return mark

    def take_broadcast(self):
        mark, self.broadcast_mark = self.broadcast_mark, None
        return mark

    def compute_end(self) -> None:
        self.last_bucket_mark = self.clock.mark()

    def local_step_end(self, *_) -> None:
        """An optimizer post-step hook (zero1's own shard's optimizer)."""
        self.broadcast_mark = self.clock.mark()


def _timed_allreduce(
    probe: SyncProbe, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    if bucket.is_last():
        # Queued before DDP's finalize callback, so it runs when backward compute has ended
        # and before the wait for the all-reduces.
        Variable._execution_engine.queue_callback(probe.compute_end)
    return allreduce_hook(None, bucket)


class MpiAllreduce:
    """backend=mpi4py: DDP's gradient all-reduce through MPI (mpi4py's Allreduce on the
    bucket's host buffer, in place), the world's other collectives on gloo.

    What this measures is MPI on host memory, as Open MPI moves it between processes (shared
    memory on one machine, its TCP or fabric transport between machines): not CUDA-aware MPI,
    whose device buffers never reach this code (the planner keeps backend=mpi4py on cpu). One
    thread of its own makes every MPI call, bucket after bucket in DDP's order (the same on
    every rank, as MPI's collectives require); each bucket's future completes when its
    Allreduce has, so DDP overlaps it with backward exactly as it does gloo's, and sync_s is
    measured by the same probe."""

    def __init__(self, probe: SyncProbe):
        from mpi4py import MPI

        self.mpi, self.comm, self.probe = MPI, MPI.COMM_WORLD, probe
        if (self.comm.size, self.comm.rank) != (dist.get_world_size(), dist.get_rank()):
            raise RuntimeError(
                f"backend mpi4py: MPI's world (rank {self.comm.rank} of {self.comm.size}) is not "
                f"torch's (rank {dist.get_rank()} of {dist.get_world_size()}): start the cell "
                "with mpirun (--launcher mpirun)"
            )
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="mpi4py-allreduce")

    def allreduce(self, tensor: torch.Tensor, future: torch.futures.Future) -> None:
        try:
            self.comm.Allreduce(self.mpi.IN_PLACE, tensor.numpy(), op=self.mpi.SUM)
            future.set_result(tensor.div_(self.comm.size))
        except Exception as exc:  # the rank's training fails with MPI's own message
            future.set_exception(exc)


def _mpi_allreduce(
    state: MpiAllreduce, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    if bucket.is_last():  # the same mark as gloo's hook: sync_s means the same for both
        Variable._execution_engine.queue_callback(state.probe.compute_end)
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    state.thread.submit(state.allreduce, bucket.buffer(), future)
    return future


def finalize_mpi() -> None:
    """MPI_Finalize where this rank initialised MPI (backend=mpi4py): Open MPI's mpirun fails a
    job one of whose processes ends without it, exit code 0 or not."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()


def world_from_env() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) as torchrun set them; a lone process is (0, 0, 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 0, 1
    return int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), world


def join(
    accel: Accelerator, backend: str | None, world: int, timeout_s: float | None = None
) -> None:
    """Join the torchrun world (the device already selected). backend: the cell's
    torch.distributed backend (None: nccl on CUDA, gloo on CPU). timeout_s: how long a
    collective may block before it fails with a message (store/progress.py), gloo's and NCCL's
    alike; NCCL's asynchronous error handling tears a rank down when one of its collectives
    times out or fails, rather than leaving it blocked on the device."""
    if world > 1:
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        timeout = timedelta(seconds=timeout_s) if timeout_s else None
        backend = backend or accel.device.backend
        # mpi4py: gloo holds the world; only DDP's gradient all-reduce goes through MPI (wrap)
        backend = "gloo" if backend == "mpi4py" else backend
        dist.init_process_group(backend=backend, timeout=timeout)


def node_hosts() -> str:
    """The host of each node (torchrun agent) in node-rank order, comma-separated."""
    # Slurm's node name where there is one (on a cluster, the host name; distinct for emulated
    # nodes)
    mine = (
        int(os.environ.get("GROUP_RANK", "0")),
        os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
    )
    if not dist.is_initialized():
        return mine[1]
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    return ",".join(host for _, host in sorted(dict(everyone).items()))


def wrap(
    model: torch.nn.Module,
    accel: Accelerator,
    probe: SyncProbe,
    bucket_cap_mb: float = 25.0,
    log_every: int = 100,
    backend: str = "auto",
) -> torch.nn.Module:
    """DDP with the sync probe's comm hook: the process group's all-reduce, or MPI's where the
    cell's backend is mpi4py."""
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=accel.ddp_device_ids(), bucket_cap_mb=bucket_cap_mb
    )
    if backend == "mpi4py":
        ddp.register_comm_hook(MpiAllreduce(probe), _mpi_allreduce)
    else:
        ddp.register_comm_hook(probe, _timed_allreduce)
    if log_every != 100:  # torch's own default otherwise (see the module's docstring)
        ddp._set_ddp_runtime_logging_sample_rate(log_every)
    return ddp


SAMPLED_ITERATIONS = (
    10  # DDP's logger samples its first 10 iterations, each with a host sync on CUDA
)


def wraps(model: torch.nn.Module) -> bool:
    """Whether DDP's reducer runs this (maybe compiled) model's backward."""
    return isinstance(getattr(model, "_orig_mod", model), torch.nn.parallel.DistributedDataParallel)


def warmup_steps(asked: int, total: int | None, under_ddp: bool) -> int:
    """The steps left out of steady-state throughput: those asked for, at least DDP's sampled
    iterations under DDP, and (when the run's steps are known) never all of them."""
    warm = max(asked, SAMPLED_ITERATIONS) if under_ddp else asked
    return min(warm, total - 1) if total else warm


def logged_comm(model: torch.nn.Module, steps: int) -> tuple[float | None, float | None]:
    """(communication, exposed communication) seconds over `steps` steps, as DDP's logger saw
    them: its averages per iteration (ns) times the steps. Exposed = communication minus the
    part that overlapped backward compute = from the end of backward compute to the end of the
    last all-reduce: the interval sync_s measures on stbench's own clock."""
    if not wraps(model):
        return None, None
    model = getattr(model, "_orig_mod", model)  # a compiled DDP model
    data = model._get_ddp_logging_data()
    comm, overlap = (
        data.get("avg_backward_comm_time"),
        data.get("avg_backward_compute_comm_overlap_time"),
    )
    if not comm:
        return None, None
    return comm * steps / 1e9, max(comm - (overlap or 0), 0) * steps / 1e9


def reduce(values: list[float], device: torch.device, op: str = "max") -> list[float]:
    """Element-wise max or sum over ranks (times take the max: the world moves at its slowest
    rank's pace)."""
    if not dist.is_initialized():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op={"max": dist.ReduceOp.MAX, "sum": dist.ReduceOp.SUM}[op])
    return t.tolist()

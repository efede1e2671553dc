"""The torch side of the device layer: one `Accelerator` per process, made for the device that
process really uses (`cuda` resolved to `cuda:N`): selecting, synchronising, events, side
streams, memory statistics, pinned staging, the device's name and properties and the precision
fp32 math runs at; and the inventory of the GPUs and libraries this torch sees. torch is
imported inside each call, so that importing the layer costs a torch-free reader nothing.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .names import Device, parse, resolve_device


@dataclass(frozen=True)
class PeakSizes:
    """How large a device's peak measurements are (child/peaks.py): large enough to keep the
    device busy, small enough that the best of five takes seconds."""

    matmul: int  # n of the fp32 n x n product
    bf16_matmul: int  # n of the bf16 product (a CPU without bf16 units is slow at it)
    copy_words: int  # float32 words copied


GPU_PEAKS = PeakSizes(8192, 8192, 256 * 2**20)  # a 1 GiB copy
CPU_PEAKS = PeakSizes(2048, 1024, 32 * 2**20)  # a 128 MiB copy


@dataclass(frozen=True)
class MathRan:
    """What a cell's fp32 math ran at, per library (fp32, tf32 or bf16): the row's
    `matmul_math` (cuBLAS's products, and a CPU's) and `conv_math` (cuDNN's convolutions and
    RNNs), and `text`, the row's `precision` in words for a person."""

    matmul: str
    conv: str
    text: str


class Accelerator:
    """The torch side of one process's device (see the module's docstring)."""

    def __init__(self, device: Device | str):
        import torch

        self.device = parse(device) if isinstance(device, str) else device
        if self.device.is_cuda and self.device.index is None:
            self.device = Device("cuda", 0)  # the index it will really use, never the bare kind
        self.torch = torch.device(str(self.device))
        self.is_cuda = self.device.is_cuda

    @classmethod
    def for_rank(cls, device: str, local_rank: int) -> Accelerator:
        """The device a rank of a world uses: `cuda` is GPU local_rank modulo the GPUs this node
        shows (names.resolve_device)."""
        count = device_count() if parse(device).is_cuda else 1
        return cls(resolve_device(device, local_rank, count))

    def __repr__(self) -> str:
        return f"Accelerator({self.device})"

    # -- selection and synchronisation -------------------------------------------------------
    def select(self) -> None:
        """Make this the process's current device and start its peak-memory count at zero."""
        if not self.is_cuda:
            return
        import torch

        torch.cuda.init()  # a build without CUDA stops here with its own message
        torch.accelerator.set_device_index(self.device.index)
        self.reset_peak()

    def synchronize(self) -> None:
        """Wait until the device has finished all work queued so far (a host-device sync)."""
        if self.is_cuda:
            import torch

            torch.accelerator.synchronize(self.device.index)

    # -- events and streams ------------------------------------------------------------------
    def profiler_activities(self) -> list:
        """What torch.profiler records here: the host's operators, and the GPU's kernels."""
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.is_cuda else [])

    def event(self):
        """A timing event on this device (CUDA only: a CPU mark is a perf_counter)."""
        import torch

        return torch.Event(self.torch, enable_timing=True)

    @staticmethod
    def elapsed_s(start, end) -> float:
        """Seconds between two recorded events (both must have completed)."""
        return start.elapsed_time(end) / 1000.0

    def graph_replay_s(self, work, replays: int = 20) -> float | None:
        """Seconds one replay of `work` takes as a CUDA graph (captured once after a warm-up on
        a side stream, replayed `replays` times, timed by events): the device's own cost of the
        kernels it launches, without the host's. None on a device without graphs (the CPU)."""
        if not self.is_cuda:
            return None
        import torch

        side = torch.cuda.Stream(self.torch)
        side.wait_stream(torch.cuda.current_stream(self.torch))
        with torch.cuda.stream(side):
            work()  # the warm-up CUDA graphs require before a capture
        torch.cuda.current_stream(self.torch).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            work()
        graph.replay()
        self.synchronize()
        start, end = self.event(), self.event()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        self.synchronize()
        return self.elapsed_s(start, end) / replays

    def stream(self):
        """A new side stream on this device, for copies that overlap compute; None on CPU,
        where there is no copy to overlap (the host's memory is the device's)."""
        if not self.is_cuda:
            return None
        import torch

        return torch.Stream(self.torch)

    @contextlib.contextmanager
    def on_stream(self, stream):
        """Work queued inside the block goes to `stream`."""
        import torch

        previous = torch.accelerator.current_stream(self.device.index)
        torch.accelerator.set_stream(stream)
        try:
            yield stream
        finally:
            torch.accelerator.set_stream(previous)

    def wait_for(self, event, tensor=None) -> None:
        """The compute stream waits (on the device, not the host) for `event`; `tensor`, made
        on another stream, is marked as used here so its memory is not reused too early."""
        import torch

        current = torch.accelerator.current_stream(self.device.index)
        current.wait_event(event)
        if tensor is not None:
            tensor.record_stream(current)

    # -- memory ------------------------------------------------------------------------------
    def _memory(self, name: str):
        """torch.accelerator's memory statistic `name` (torch >= 2.9), else torch.cuda's."""
        import torch

        generic = getattr(torch.accelerator, name, None)
        if generic is not None:
            return lambda: generic(self.device.index)
        cuda = getattr(torch.cuda, name)
        return lambda: cuda(self.torch)

    def reset_peak(self) -> None:
        if self.is_cuda:
            self._memory("reset_peak_memory_stats")()

    def allocated_bytes(self) -> int | None:
        return self._memory("memory_allocated")() if self.is_cuda else None

    def peak_bytes(self) -> int | None:
        """The allocator's peak since the last `reset_peak` (None on CPU: no device allocator)."""
        return self._memory("max_memory_allocated")() if self.is_cuda else None

    def peak_during(self, step) -> int | None:
        """Bytes the allocator's peak rose above its start while `step()` ran; None, with `step`
        not run, where no device allocator counts a peak (CPU: the caller measures otherwise)."""
        if not self.is_cuda:
            return None
        self.synchronize()
        base = self.allocated_bytes()
        self.reset_peak()
        step()
        self.synchronize()
        return self.peak_bytes() - base

    def peak_of(self, device_bytes: int, host_bytes: int) -> int:
        """What of a memory prediction this device's measured peak holds: the device's bytes;
        on CPU, where the device is the host, the host's too."""
        return device_bytes + (0 if self.is_cuda else host_bytes)

    def release_cached(self) -> None:
        """Give the caching allocator's free blocks back to the device (after a configuration ran
        out of memory, so that the next one starts with the device's memory free)."""
        if self.is_cuda:
            import torch

            torch.cuda.empty_cache()

    @property
    def pins(self) -> bool:
        """Whether host staging memory should be page-locked (what lets a copy run async)."""
        return self.is_cuda

    def pin(self, tensor):
        return tensor.pin_memory() if self.is_cuda else tensor

    # -- data parallelism and peaks ---------------------------------------------------------
    def ddp_device_ids(self) -> list[int] | None:
        """DistributedDataParallel's `device_ids`: this GPU's index; None for a CPU module."""
        return [self.device.index] if self.is_cuda else None

    @property
    def peak_sizes(self) -> PeakSizes:
        return GPU_PEAKS if self.is_cuda else CPU_PEAKS

    # -- naming ------------------------------------------------------------------------------
    def name(self, cpu_name: str = "cpu") -> str:
        if not self.is_cuda:
            return cpu_name
        import torch

        return torch.cuda.get_device_name(self.torch)

    def uuid(self) -> str | None:
        """The GPU's UUID, what tells GPUs apart (None on CPU)."""
        return str(self._properties().uuid) if self.is_cuda else None

    def capability(self) -> tuple[int, int] | None:
        """The GPU's compute capability (major, minor); None on CPU."""
        return (self._properties().major, self._properties().minor) if self.is_cuda else None

    def _properties(self):
        import torch

        return torch.cuda.get_device_properties(self.torch)

    def matmul_precision(self) -> str:
        """The precision fp32 matrix products run at here: "tf32" where the GPU may use
        TensorFloat-32 for them (torch's switch), else "fp32"."""
        import torch

        return "tf32" if self.is_cuda and torch.backends.cuda.matmul.allow_tf32 else "fp32"

    @contextlib.contextmanager
    def tf32_matmul(self):
        """fp32 matrix products may run as TF32 inside the block (what cuDNN does by default);
        it yields whether they can (TF32 exists on NVIDIA GPUs only: on CPU, False)."""
        if not self.is_cuda:
            yield False
            return
        import torch

        allowed = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            yield True
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allowed

    def default_math(self) -> None:
        """torch's own switches for fp32 math, whatever ran before in this process: cuBLAS
        strict fp32, cuDNN TF32, matmul precision "highest". A window of a warm process starts
        here, so that no switch leaks from the configuration measured before it."""
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        torch.set_float32_matmul_precision("highest")

    def use_precision(self, mode: str) -> MathRan:
        """Set how fp32 math runs in this process (`default` leaves torch's own switches) and
        say what will run, for the row; `bf16` is autocast in `autocast()`, master weights fp32."""
        import torch

        if mode in ("fp32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        if mode == "bf16":
            return MathRan("bf16", "bf16", "bf16 autocast")
        if not self.is_cuda:
            return MathRan("fp32", "fp32", "fp32")  # TF32 exists on NVIDIA GPUs only
        matmul, conv = self.matmul_precision(), self.conv_precision()
        return MathRan(matmul, conv, f"matmul {matmul}, cudnn {conv}")

    def autocast(self, mode: str):
        """The context a forward pass runs in: bf16 autocast, or nothing."""
        import torch

        if mode == "bf16":
            return torch.autocast(self.device.kind, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def conv_precision(self) -> str:
        """The precision cuDNN runs fp32 convolutions and RNNs at (cuDNN allows TF32 by default)."""
        import torch

        return "tf32" if self.is_cuda and torch.backends.cudnn.allow_tf32 else "fp32"


# -- the inventory (the parent's, creating no CUDA context, and the devices child's) ---------
def device_count() -> int:
    """GPUs this process can use (respects CUDA_VISIBLE_DEVICES; creates no CUDA context)."""
    import torch

    return torch.cuda.device_count()


def cuda_initialized() -> bool:
    """Whether torch has initialised CUDA in this process (the warm server must not have: a
    process forked from it could not use CUDA)."""
    import torch

    return torch.cuda.is_initialized()


def nccl_version() -> str | None:
    import torch

    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # NCCL missing from this build
        return None


def cudnn_version() -> int | None:
    import torch

    return torch.backends.cudnn.version()


def cuda_devices() -> list[dict]:
    """Every GPU this process's CUDA shows (CUDA_VISIBLE_DEVICES and CUDA's order applied), with
    its UUID (what NVML's records are matched by). Creates a CUDA context: run in a child."""
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            {"index": i, "name": p.name, "uuid": str(p.uuid), "memory_mb": p.total_memory / 2**20}
        )
    return out

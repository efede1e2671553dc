"""The one device layer: what a device string means, and every device-specific call.

Two halves, one module:

- `Device` and `parse()` are pure (no torch): the planner, launchers, report and store ask
  `parse(text).is_cuda` instead of comparing strings; an unknown device is one clear error.
- `Accelerator` is the torch side, made once per process for the device that process really
  uses (`cuda` resolved to `cuda:N`): selecting, synchronising, events, side streams, memory
  statistics, pinned staging, the device's name and properties. Everything else calls it and
  never `torch.cuda`, so CPU and CUDA differ only here.

torch's device-generic API (`torch.accelerator`, `torch.Event`, `torch.Stream`) is used where it
covers the call; what stays CUDA-specific, and why, is in DESIGN.md ("The device layer").
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

KINDS = ("cpu", "cuda")
_FORM = re.compile(r"^(cpu|cuda)(?::(\d+))?$")
VALID = "cpu, cuda or cuda:N"


@dataclass(frozen=True)
class Device:
    """A parsed device: its kind and, where one was given or resolved, its index."""

    kind: str
    index: int | None = None

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"


def parse(text: str) -> Device:
    """`cpu`, `cuda` or `cuda:N`; anything else is a ValueError naming the valid forms."""
    m = _FORM.match(str(text).strip())
    if not m or (m.group(1) == "cpu" and m.group(2) is not None):
        raise ValueError(f"unknown device {text!r}: use {VALID}")
    return Device(m.group(1), int(m.group(2)) if m.group(2) is not None else None)


def is_cuda(text: str) -> bool:
    """Whether a device string (of a spec or a result row) names a CUDA device; False for text
    that is no device at all (an empty cell of an old row)."""
    try:
        return parse(text).is_cuda
    except ValueError:
        return False


def resolve(text: str, local_rank: int = 0, count: int = 1) -> Device:
    """The device a process will really use: `cuda` is GPU local_rank modulo the `count` GPUs
    this node shows (so that gloo ranks may share one); `cuda:N` is GPU N for every rank."""
    d = parse(text)
    if not d.is_cuda:
        return d
    return d if d.index is not None else Device("cuda", local_rank % max(count, 1))


def visible_devices(first: int, count: int, base: dict[str, str]) -> str:
    """CUDA_VISIBLE_DEVICES for a process that should see `count` GPUs starting at `first`, taken
    from the GPUs the user already restricted this machine to (if they did)."""
    given = [g.strip() for g in base.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    wanted = range(first, first + count)
    if "CUDA_VISIBLE_DEVICES" in base:
        if first + count > len(given):
            raise ValueError(
                f"GPUs {first}..{first + count - 1} asked for, but CUDA_VISIBLE_DEVICES="
                f"{base['CUDA_VISIBLE_DEVICES']!r} shows {len(given)}"
            )
        return ",".join(given[i] for i in wanted)
    return ",".join(str(i) for i in wanted)


class Accelerator:
    """The torch side of one process's device (see the module's docstring)."""

    def __init__(self, device: Device | str):
        import torch

        self.device = parse(device) if isinstance(device, str) else device
        if self.device.is_cuda and self.device.index is None:
            self.device = Device("cuda", 0)  # the index it will really use, never the bare kind
        self.torch = torch.device(str(self.device))
        self.is_cuda = self.device.is_cuda

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
    def event(self):
        """A timing event on this device (CUDA only: a CPU mark is a perf_counter)."""
        import torch

        return torch.Event(self.torch, enable_timing=True)

    @staticmethod
    def elapsed_s(start, end) -> float:
        """Seconds between two recorded events (both must have completed)."""
        return start.elapsed_time(end) / 1000.0

    def stream(self):
        """A new side stream on this device (for copies that overlap compute)."""
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

    @property
    def pins(self) -> bool:
        """Whether host staging memory should be page-locked (what lets a copy run async)."""
        return self.is_cuda

    def pin(self, tensor):
        return tensor.pin_memory() if self.is_cuda else tensor

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
        """fp32 matrix products may run as TF32 inside the block (what cuDNN does by default)."""
        import torch

        allowed = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allowed

    def use_precision(self, mode: str) -> str:
        """Set how fp32 math runs in this process (`default` leaves torch's own switches) and
        say what will run, for the row; `bf16` is autocast in `autocast()`, master weights fp32."""
        import torch

        if mode in ("fp32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        if mode == "bf16":
            return "bf16 autocast"
        if not self.is_cuda:
            return "fp32"  # TF32 exists on NVIDIA GPUs only
        return f"matmul {self.matmul_precision()}, cudnn {self.conv_precision()}"

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


def match_gpus(cuda: list[dict], nvml_devices: list[dict]) -> tuple[dict, ...]:
    """CUDA's devices (index = the N of `cuda:N`) with NVML's record of the same GPU, matched by
    UUID: NVML orders by PCI bus and ignores CUDA_VISIBLE_DEVICES. GPUs NVML sees but this
    torch cannot use are listed with index None."""
    by_uuid = {str(d.get("uuid") or "").lower().removeprefix("gpu-"): d for d in nvml_devices}
    out, used = [], set()
    for c in cuda:
        key = c["uuid"].lower().removeprefix("gpu-")
        n = by_uuid.get(key, {})
        used.add(key)
        out.append(
            {
                **n,
                "index": c["index"],
                "name": c["name"],
                "memory_mb": c["memory_mb"],
                "uuid": n.get("uuid") or f"GPU-{c['uuid']}",
            }
        )
    out += [{**d, "index": None} for k, d in by_uuid.items() if k not in used]
    return tuple(out)

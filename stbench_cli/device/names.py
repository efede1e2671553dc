"""What a device string means (pure, no torch): `cpu`, `cuda` or `cuda:N` parsed into a
`Device`, the GPU a rank really uses, a process's CUDA_VISIBLE_DEVICES, and CUDA's devices
matched to NVML's records. The planner, launchers, report and store ask these instead of
comparing strings; an unknown device is one clear error."""

from __future__ import annotations

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

    @property
    def backend(self) -> str:
        """The torch.distributed backend of a world on this device where none is chosen: NCCL
        between GPUs, gloo between CPUs (the one place this default is decided)."""
        return "nccl" if self.is_cuda else "gloo"

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


def resolve_device(text: str, local_rank: int = 0, count: int = 1) -> Device:
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

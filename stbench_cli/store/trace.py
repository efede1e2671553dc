"""Reading a torch.profiler Chrome trace: the windows of its profiled steps, and the
host-device synchronisations inside each.

`ProfilerStep#k` appears twice in a CUDA trace: the host's range (cat `user_annotation`) and
its copy on the GPU timeline (cat `gpu_user_annotation`, shifted by the launch queue). Steps
are the host's ranges only: a host-side call (a sync, an allocation) belongs to the step whose
host range holds it, and the GPU copies would otherwise replace those windows.

Host-device synchronisations per training step: a call that blocks the host until the device
catches up (`.item()`, `.cpu()`, an explicit synchronize) shows in the trace as a CUDA runtime
call (cat `cuda_runtime`) or, made by code that talks to the driver directly, a driver call (cat
`cuda_driver`); each one inside the host's `ProfilerStep#k` range is a sync in that step.
Counted:

- the synchronize calls of streams, events, the device or context (runtime and driver);
- synchronous copies (cudaMemcpy and its 2D/3D/symbol/peer forms, the driver's cuMemcpyDtoH...);
- freeing device or pinned memory (cudaFree, cudaFreeHost, cuMemFree...): it waits for the
  whole device;
- an asynchronous copy to or from pageable memory: the host waits for it (its GPU side is
  named "Memcpy DtoH (Device -> Pageable)" and carries the call's `correlation` id).

Names are taken without the driver's version and per-thread suffixes (cuMemcpyDtoH_v2,
cudaStreamSynchronize_ptsz). A driver call inside a counted runtime call on the same thread is
that call's own work, not a second sync.

The host's share of a step (`host_table`): its top-level operators on each host thread, the time
spent inside them and the time between them (on a GPU, the host path of each operator a
prediction charges: plan/predict.py).

The kernels a step launches (`kernel_table`): every event on the GPU's timeline that is a kernel,
a copy or a memset (cats `kernel`, `gpu_memcpy`, `gpu_memset`), by name, over the profiled steps:
what plan/predict.py's launch count (counted on a CPU, child/anatomy.py) is checked against on a
GPU. Pure JSON reading.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .rows import HostLine, KernelLine

STEP_PREFIX = "ProfilerStep#"
HOST_ANNOTATION = "user_annotation"


def step_windows(events: list[dict]) -> list[tuple[float, float, int]]:
    """(start µs, end µs, k) of every host `ProfilerStep#k` range, in time order."""
    return sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"][len(STEP_PREFIX) :]))
        for e in events
        if str(e.get("name", "")).startswith(STEP_PREFIX)
        and "dur" in e
        and e.get("cat") == HOST_ANNOTATION
    )


# what runs on the GPU's timeline, by the trace's category: each event one launch of it
GPU_WORK = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def kernel_table(events: list[dict]) -> list[KernelLine]:
    """Each kernel, copy and memset the trace's GPU timeline holds, by name: its kind, calls,
    calls a profiled step (over the host's `ProfilerStep` ranges) and device milliseconds,
    the most device time first; [] where the trace has none (a CPU run) or no step."""
    steps = len(step_windows(events))
    if not steps:
        return []
    found: dict[tuple[str, str], list[float]] = {}
    for e in events:
        kind = GPU_WORK.get(str(e.get("cat")))
        if kind is not None:
            seen = found.setdefault((kind, str(e.get("name", ""))), [0, 0.0])
            seen[0] += 1
            seen[1] += float(e.get("dur", 0.0))
    table = [
        KernelLine(kind, name, calls, calls / steps, us / 1e3)
        for (kind, name), (calls, us) in found.items()
    ]
    return sorted(table, key=lambda r: -r.device_ms)


def top_level(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (start, end) spans that no other span holds, in time order, two that overlap without
    nesting merged into one: a thread's outermost operators."""
    out: list[list[float]] = []
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        if out and start < out[-1][1]:  # inside the last one, or overlapping it
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def host_table(events: list[dict]) -> list[HostLine]:
    """Each profiled step as its host threads spent it: the top-level operators (cat `cpu_op`,
    none inside another on its thread) that began in the host's `ProfilerStep#k` range, their
    spans summed, and the range's time that no thread spent inside one; [] where the trace has
    no step."""
    ops: dict[object, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and "dur" in e:
            ops.setdefault(e.get("tid"), []).append((float(e["ts"]), float(e["ts"]) + e["dur"]))
    lines = []
    for start, end, number in step_windows(events):
        spans = {
            tid: top_level([s for s in found if start <= s[0] < end]) for tid, found in ops.items()
        }
        spans = {tid: found for tid, found in spans.items() if found}
        inside = sum(b - a for found in spans.values() for a, b in found)
        busy = sum(min(b, end) - a for a, b in top_level([s for f in spans.values() for s in f]))
        lines.append(
            HostLine(
                number,
                sum(len(found) for found in spans.values()),
                inside / 1e3,
                max(end - start - busy, 0.0) / 1e3,
                len(spans),
            )
        )
    return lines


API_CATEGORIES = ("cuda_runtime", "cuda_driver")
SYNC_CALLS = frozenset(
    {
        # runtime API
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyPeer",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaFree",
        "cudaFreeHost",
        "cudaFreeArray",
        # driver API
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpy",
        "cuMemcpyDtoH",
        "cuMemcpyHtoD",
        "cuMemcpy2D",
        "cuMemcpy2DUnaligned",
        "cuMemcpy3D",
        "cuMemcpyPeer",
        "cuMemcpyAtoH",
        "cuMemcpyHtoA",
        "cuMemFree",
        "cuMemFreeHost",
    }
)
_SUFFIX = re.compile(r"(_v\d+)?(_pt(ds|sz))?$")
PAGEABLE = "Pageable"


def base_name(name: str) -> str:
    """An API call's name without its version and per-thread-stream suffixes."""
    return _SUFFIX.sub("", name)


def _pageable_copies(events: list[dict]) -> set:
    """Correlation ids of copies whose host side is pageable memory."""
    return {
        e.get("args", {}).get("correlation")
        for e in events
        if e.get("cat") == "gpu_memcpy" and PAGEABLE in str(e.get("name", ""))
    } - {None}


def sync_calls(events: list[dict]) -> list[tuple[float, str]]:
    """(start µs, name) of every synchronising API call in a trace, in time order."""
    pageable = _pageable_copies(events)
    found = []
    for e in events:
        if e.get("cat") not in API_CATEGORIES or "ts" not in e:
            continue
        name = base_name(str(e.get("name", "")))
        if name in SYNC_CALLS:
            found.append((e, name))
        elif e.get("args", {}).get("correlation") in pageable:
            found.append((e, f"{name} (pageable)"))
    runtime = [e for e, _ in found if e["cat"] == "cuda_runtime"]

    def inside_runtime(e: dict) -> bool:
        return e["cat"] == "cuda_driver" and any(
            r.get("tid") == e.get("tid")
            and r.get("pid") == e.get("pid")
            and r["ts"] <= e["ts"] <= r["ts"] + r.get("dur", 0)
            for r in runtime
        )

    return sorted((e["ts"], name) for e, name in found if not inside_runtime(e))


def syncs_per_step(trace: Path) -> dict[int, list[str]]:
    """ProfilerStep number -> the synchronising calls inside it (empty list: none)."""
    events = json.loads(Path(trace).read_text())["traceEvents"]
    calls = sync_calls(events)
    return {
        number: [name for ts, name in calls if start <= ts <= end]
        for start, end, number in step_windows(events)
    }

"""Host-device synchronisations per training step, counted in a torch.profiler Chrome trace.

A CUDA runtime call that blocks the host until the device catches up (`.item()`, `.cpu()`, a
copy from pageable memory, an explicit synchronize) shows in the trace as one of these calls;
each one inside the host's `ProfilerStep#k` range is a sync in that step (store.trace). Pure JSON reading.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..store.trace import step_windows

SYNC_CALLS = frozenset({"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                        "cudaMemcpy2D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol"})


def syncs_per_step(trace: Path) -> dict[int, list[str]]:
    """ProfilerStep number -> the synchronising runtime calls inside it (empty list: none)."""
    events = json.loads(Path(trace).read_text())["traceEvents"]
    steps = step_windows(events)
    calls = sorted((e["ts"], e["name"]) for e in events
                   if e.get("cat") == "cuda_runtime" and e.get("name") in SYNC_CALLS)
    return {number: [name for ts, name in calls if start <= ts <= end] for start, end, number in steps}


def summary(trace: Path) -> str:
    """One line for the profile report."""
    per_step = syncs_per_step(trace)
    if not per_step:
        return "host-device synchronisations: no profiled step in the trace"
    counts = [len(v) for v in per_step.values()]
    names = sorted({n for v in per_step.values() for n in v})
    return (f"host-device synchronisations per profiled step: max {max(counts)}, total {sum(counts)} "
            f"over {len(counts)} steps" + (f" ({', '.join(names)})" if names else ""))

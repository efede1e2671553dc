"""Reading a torch.profiler Chrome trace: the windows of its profiled steps.

`ProfilerStep#k` appears twice in a CUDA trace: the host's range (cat `user_annotation`) and
its copy on the GPU timeline (cat `gpu_user_annotation`, shifted by the launch queue). Steps
are the host's ranges only: a host-side call (a sync, an allocation) belongs to the step whose
host range holds it, and the GPU copies would otherwise replace those windows.
"""

from __future__ import annotations

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

"""The CUDA devices as this process's CUDA sees them (CUDA_VISIBLE_DEVICES and CUDA's own
order applied), with their UUIDs: `python -m stbench.child.devices` prints JSON. Run in a child
so that the parent never creates a CUDA context."""

from __future__ import annotations

import json


def cuda_devices() -> list[dict]:
    import torch

    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append({"index": i, "name": p.name, "uuid": str(p.uuid), "memory_mb": p.total_memory / 2**20})
    return out


if __name__ == "__main__":
    print(json.dumps(cuda_devices()))

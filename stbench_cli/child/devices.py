"""The CUDA devices as this process's CUDA sees them (CUDA_VISIBLE_DEVICES and CUDA's own
order applied), with their UUIDs: `python -m stbench.child.devices` prints JSON. Run in a child
so that the parent never creates a CUDA context."""

from __future__ import annotations

import json

from ..device import cuda_devices

if __name__ == "__main__":
    print(json.dumps(cuda_devices()))

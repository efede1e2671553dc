"""Test-only: a CPU build of torch that claims one CUDA device, in every process started with
this folder on PYTHONPATH and STBENCH_FAKE_CUDA=1 (the parent, the peak and inventory
children, torchrun's agents and ranks). Only the two availability questions are answered
falsely; every CUDA operation still reaches the build's own "not compiled with CUDA" error,
which is what tests/test_cuda_paths.py asserts each entry point gets to and nothing before."""

import os

if os.environ.get("STBENCH_FAKE_CUDA") == "1":
    import torch

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1

"""Which measured peak a cell's peak_fraction divides by: the peak of the math its FLOPs ran at.

The device's peaks (child/peaks.py) are matrix products at strict fp32 (`matmul_gflops`, at
whatever fp32 precision torch's switches give in a fresh process: `matmul_precision`), at TF32
(`tf32_matmul_gflops`, CUDA only) and at bf16 (`bf16_matmul_gflops`, measured when a cell asks
for it). precision=default leaves torch's switches as they are, and on CUDA they differ by
library: cuDNN runs fp32 convolutions and RNNs at TF32 (`cudnn.allow_tf32` is True by default),
cuBLAS runs fp32 products strictly unless the matmul precision is 'high' or 'medium'. The cell
records what each ran at (the row's `matmul_math` and `conv_math`); the workload says which
library runs most of its FLOPs (`Workload.flops_in`). Pure.
"""

from __future__ import annotations

PEAK_AT = {"bf16": "bf16_matmul_gflops", "tf32": "tf32_matmul_gflops", "fp32": "matmul_gflops"}


def math_ran(precision: str, matmul: str | None, conv: str | None, flops_in: str = "matmul") -> str:
    """ "bf16", "tf32" or "fp32": what a cell's FLOPs ran at, from its `precision` parameter and
    the row's record of what each library ran at (`matmul_math`, `conv_math`), the library its
    workload's FLOPs run in chosen. Without a record, the parameter's own math."""
    if precision == "bf16" or matmul == "bf16":
        return "bf16"
    ran = conv if flops_in == "cudnn" else matmul
    return ran or matmul or (precision if precision in PEAK_AT else "fp32")


def peak_key(math: str, peak: dict) -> tuple[str, str]:
    """(the key of `peak` to divide by, the math that peak was measured at). A device without a
    TF32 figure (a CPU, a peak cached before it was measured) has its matmul peak, labelled with
    the precision it was measured at; a missing bf16 peak stays missing (no fraction)."""
    key = PEAK_AT.get(math, "matmul_gflops")
    if key == "tf32_matmul_gflops" and key not in peak:
        key = "matmul_gflops"
    return key, (peak.get("matmul_precision", "fp32") if key == "matmul_gflops" else math)

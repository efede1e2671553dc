"""peak_fraction divides by the peak of the math a cell's FLOPs ran at: on CUDA,
precision=default runs cuDNN's convolutions and RNNs at TF32 but cuBLAS's products at fp32."""

import pytest

from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from stbench.runner.peak_math import math_ran, peak_key
from stbench.runner.processes import Outcome
from stbench.runner.study import derived
from stbench.store.cell_result import CellResult, Figures

# (matmul_math, conv_math): what Accelerator.use_precision records under torch's defaults
CUDA_DEFAULT = ("fp32", "tf32")
H100 = {"matmul_gflops": 50_000.0, "tf32_matmul_gflops": 400_000.0, "matmul_precision": "fp32"}


@pytest.mark.parametrize(
    "precision, ran, flops_in, expected",
    [
        ("default", CUDA_DEFAULT, "cudnn", "tf32"),  # convolutions, RNNs: cuDNN allows TF32
        ("default", CUDA_DEFAULT, "matmul", "fp32"),  # cuBLAS does not
        ("default", ("tf32", "tf32"), "matmul", "tf32"),  # matmul precision 'high' or 'medium'
        ("default", ("fp32", "fp32"), "cudnn", "fp32"),  # cudnn.allow_tf32 switched off
        ("default", ("fp32", "fp32"), "cudnn", "fp32"),  # a CPU: no TF32
        ("tf32", ("tf32", "tf32"), "matmul", "tf32"),
        ("fp32", ("fp32", "fp32"), "cudnn", "fp32"),
        ("bf16", ("bf16", "bf16"), "cudnn", "bf16"),
        ("tf32", (None, None), "matmul", "tf32"),  # no record of what ran: the parameter's math
        ("default", (None, None), "cudnn", "fp32"),
    ],
)
def test_the_math_a_cell_ran_at(precision, ran, flops_in, expected):
    assert math_ran(precision, *ran, flops_in) == expected


def test_the_peak_of_that_math_and_its_label():
    assert peak_key("tf32", H100) == ("tf32_matmul_gflops", "tf32")
    assert peak_key("fp32", H100) == ("matmul_gflops", "fp32")
    assert peak_key("tf32", {"matmul_gflops": 90.0}) == ("matmul_gflops", "fp32")  # a CPU's peak
    assert peak_key("bf16", H100) == ("bf16_matmul_gflops", "bf16")  # not measured: no fraction
    # a peak measured with TF32 switched on for every product is labelled as what it measured
    assert peak_key("fp32", {**H100, "matmul_precision": "tf32"}) == ("matmul_gflops", "tf32")


def _fraction(workload: str, device: str, ran: tuple, peak: dict, precision: str = "default"):
    spec = RunSpec(workload, device, "single", 64, 1, params=(("precision", precision),))
    matmul, conv = ran
    figures = Figures(achieved_gflops=100_000.0, matmul_math=matmul, conv_math=conv)
    outcome = Outcome(CellResult("ok", figures=figures))
    d = derived(spec, outcome, {device: peak})
    return d.peak_fraction, d.peak_math


def test_conv_and_rnn_workloads_on_cuda_divide_by_the_tf32_peak_under_precision_default():
    """Before: every precision=default cell divided by the strict-fp32 peak, so cnn-strain and
    lstm-era5 read up to ~7x too high on an H100 (here 2.0, more than the device can do)."""
    assert get("cnn-strain").flops_in == get("lstm-era5").flops_in == "cudnn"
    assert get("stnn").flops_in == get("dcrnn-pems").flops_in == "matmul"
    assert _fraction("cnn-strain", "cuda", CUDA_DEFAULT, H100) == (pytest.approx(0.25), "tf32")
    assert _fraction("lstm-era5", "cuda", CUDA_DEFAULT, H100) == (pytest.approx(0.25), "tf32")
    assert _fraction("stnn", "cuda", CUDA_DEFAULT, H100) == (pytest.approx(2.0), "fp32")
    assert _fraction("cnn-strain", "cuda", ("fp32", "fp32"), H100, "fp32") == (
        pytest.approx(2.0),
        "fp32",
    )
    cpu = {"matmul_gflops": 200_000.0, "matmul_precision": "fp32"}
    assert _fraction("cnn-strain", "cpu", ("fp32", "fp32"), cpu) == (pytest.approx(0.5), "fp32")
    assert _fraction("cnn-strain", "cuda", ("bf16", "bf16"), H100, "bf16") == (
        None,
        None,
    )  # no bf16 peak measured


def test_the_bf16_peaks_product_shrinks_where_the_cpu_emulates_bf16():
    """A CPU without bf16 units ran the 256 product in 37 ms (0.9 GFLOP/s): its 1,024 product
    would take 2.4 s each of six times, its 512 0.30 s; the peak measures at 256. One 4x as
    fast stops at 512 (74 ms), a CPU with bf16 units keeps the device's size."""
    from stbench.child.peaks import BF16_PRODUCT_S, fitting_size

    assert BF16_PRODUCT_S == 0.25
    assert fitting_size(1024, 256, 0.037) == 256
    assert fitting_size(1024, 256, 0.037 / 4) == 512
    assert fitting_size(1024, 256, 0.0005) == 1024

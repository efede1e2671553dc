"""Speed levers as axes: the precision fp32 math runs at and torch.compile, measured honestly
(the row says what ran; compiling is compile_s, never in the steps or the throughput)."""

import pytest
import torch

from stbench.child.strategies import apply_compile
from stbench.device import Accelerator
from stbench.device.accelerator import MathRan
from stbench.store.files import read_runs
from stbench.store.manifest import read_manifest
from tests.helpers import one_study


def test_precision_modes_say_what_runs_and_bf16_autocasts():
    accel = Accelerator("cpu")
    allowed = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        fp32 = MathRan("fp32", "fp32", "fp32")
        assert accel.use_precision("default") == fp32 and accel.use_precision("fp32") == fp32
        assert not torch.backends.cudnn.allow_tf32  # strict fp32 switches cuDNN's TF32 off too
        assert accel.use_precision("tf32") == fp32  # TF32 is an NVIDIA GPU's; a CPU runs fp32
        assert accel.use_precision("bf16") == MathRan("bf16", "bf16", "bf16 autocast")
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = allowed
    layer = torch.nn.Linear(4, 2)
    with accel.autocast("bf16"):
        assert layer(torch.ones(1, 4)).dtype == torch.bfloat16
    with accel.autocast("fp32"):
        assert layer(torch.ones(1, 4)).dtype == torch.float32
    assert layer.weight.dtype == torch.float32  # master weights stay fp32


def test_a_model_that_cannot_compile_runs_eager_with_the_reason():
    model = torch.nn.Linear(4, 2)

    def broken(m):
        raise RuntimeError("no backend for this operator")

    trained, seconds, why = apply_compile(model, "default", broken, Accelerator("cpu"))
    assert trained is model and seconds is None
    assert (
        why == "torch.compile(mode=default) failed, the cell ran eager: "
        "RuntimeError: no backend for this operator"
    )
    assert apply_compile(model, "none", broken, Accelerator("cpu")) == (model, None, "")


@pytest.mark.slow
def test_bf16_and_compile_as_axes_give_ok_rows_with_compile_time_apart(tmp_path):
    folder = one_study(
        tmp_path / "out",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--set",
        "max_steps=4",
        "--set",
        "precision=bf16",
        "--set",
        "compile=none,default",
        timeout=600,
    )
    rows = {r.params["compile"]: r for r in read_runs(folder)}
    assert all(r["status"] == "ok" and r["precision"] == "bf16 autocast" for r in rows.values())
    assert rows["none"]["compile_s"] is None and rows["default"]["compile_s"] > 0
    assert all(r["samples_per_s"] > 0 for r in rows.values())
    peak = read_manifest(folder)["peaks"]["cpu"]
    assert (
        peak["bf16_matmul_gflops"] > 0
    )  # measured because a cell runs bf16: its peak_fraction divides by it
    fraction = rows["none"]["achieved_gflops"] / peak["bf16_matmul_gflops"]
    assert rows["none"]["peak_fraction"] == pytest.approx(fraction, rel=1e-6)


# compiling two custom-autograd workloads takes two minutes on 2 cores: STBENCH_SLOW=1 runs it
@pytest.mark.slow
@pytest.mark.parametrize(
    "workload, axes",
    [
        (
            "stnn",
            ["--set", "relations=offload,sparse", "--set", "mode=stnn-r"],
        ),  # custom autograd functions, sparse grads
        (
            "dcrnn-pems",
            ["--set", "model=tiny", "--set", "max_eval_batches=1"],
        ),  # CSR products with no bf16 kernel
    ],
)
def test_bf16_and_compile_run_through_the_custom_autograd_workloads(tmp_path, workload, axes):
    """bf16 autocast hands these workloads' own backward functions bf16 gradients and their
    sparse products bf16 inputs; compiling must not fail inside a timed step (stnn's decoder and
    dynamics passes are two graphs: both compile in the compile pass)."""
    folder = one_study(
        tmp_path / "out",
        workload,
        "--smoke",
        "--epochs",
        "1",
        "--set",
        "max_steps=4",
        "--set",
        "precision=fp32,bf16",
        "--set",
        "compile=default",
        *axes,
        timeout=900,
    )
    rows = read_runs(folder)
    assert len(rows) == (4 if workload == "stnn" else 2)
    assert all(r["status"] == "ok" and float(r["compile_s"]) > 0 for r in rows)
    assert "compile" not in read_manifest(folder).get(
        "unavailable", {}
    )  # compiled, not fallen back to eager


def test_stnn_names_a_batch_of_each_pass_for_the_compile_pass():
    from stbench.workloads.stnn.pairs import TwoPassSampler

    sampler = TwoPassSampler(n_dec=50, n_dyn=40, batch_size=8, seed=0)
    dec, dyn = sampler.first_of_each_pass()
    assert dec.tolist() == list(range(8)) and dyn.tolist() == list(range(50, 58))

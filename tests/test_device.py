"""The device layer (stbench.device): parsing, the index a process really uses, and every
device-specific call it makes, driven on this CPU build of torch as far as it goes."""

import ast
from pathlib import Path

import pytest
import torch

from stbench.device import Accelerator, Device, is_cuda, parse, resolve_device, visible_devices

ROOT = Path(__file__).parent.parent

# What a CPU build of torch says when an operation truly needs CUDA (the build's own words).
NOT_COMPILED = (
    "Torch not compiled with CUDA enabled",
    "not linked with support for cuda devices",
    "Cannot access accelerator device when none is available",
)


def test_parse_and_its_errors():
    assert (
        parse("cpu") == Device("cpu")
        and str(parse("cuda")) == "cuda"
        and parse("cuda:3") == Device("cuda", 3)
    )
    for bad in ("gpu", "cuda:", "cuda:x", "cpu:0", "CUDA", "cuda:-1", ""):
        with pytest.raises(ValueError, match="use cpu, cuda or cuda:N"):
            parse(bad)
    assert (
        is_cuda("cuda:1") and not is_cuda("cpu") and not is_cuda("")
    )  # an empty cell of an old row


def test_a_bare_cuda_resolves_to_the_index_the_process_uses():
    assert resolve_device("cuda", local_rank=3, count=2) == Device(
        "cuda", 1
    )  # gloo ranks share GPUs
    assert resolve_device("cuda:1", local_rank=0, count=4) == Device("cuda", 1)
    assert resolve_device("cpu", local_rank=5, count=0) == Device("cpu")
    assert Accelerator("cuda").device == Device(
        "cuda", 0
    )  # never the bare kind: set_device needs an index
    assert Accelerator("cuda").torch == torch.device("cuda", 0)


def test_visible_devices_respect_what_the_user_already_restricted():
    assert visible_devices(2, 2, {}) == "2,3"
    assert visible_devices(1, 2, {"CUDA_VISIBLE_DEVICES": "4,5,7"}) == "5,7"
    with pytest.raises(ValueError, match="shows 2"):
        visible_devices(1, 2, {"CUDA_VISIBLE_DEVICES": "4,5"})


def test_the_cpu_accelerator_is_a_no_op_where_cpu_has_nothing_to_do():
    accel = Accelerator("cpu")
    accel.select()
    accel.synchronize()
    accel.reset_peak()
    assert accel.peak_bytes() is None and accel.allocated_bytes() is None and not accel.pins
    t = torch.ones(3)
    assert (
        accel.pin(t) is t
        and accel.name("my cpu") == "my cpu"
        and accel.matmul_precision() == "fp32"
    )
    assert accel.stream() is None and accel.ddp_device_ids() is None
    assert accel.peak_during(lambda: 1 / 0) is None  # the step is not run: no allocator counts
    assert accel.peak_of(3, 4) == 7  # the device is the host: both count
    with accel.tf32_matmul() as tf32:
        assert tf32 is False and not torch.backends.cuda.matmul.allow_tf32


def test_what_sets_a_gpu_apart_is_answered_by_its_accelerator(monkeypatch):
    """What the torch side asks the device layer instead of branching on the kind itself."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert Accelerator.for_rank("cuda", 3).device == Device("cuda", 1)  # gloo ranks share GPUs
    assert Accelerator.for_rank("cpu", 3).device == Device("cpu")
    gpu = Accelerator("cuda:1")
    assert gpu.ddp_device_ids() == [1] and gpu.peak_of(3, 4) == 3
    assert gpu.peak_sizes.matmul > Accelerator("cpu").peak_sizes.matmul
    allowed = torch.backends.cuda.matmul.allow_tf32
    with gpu.tf32_matmul() as tf32:
        assert tf32 is True and torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == allowed


CUDA_CALLS = {
    "select": lambda a: a.select(),
    "synchronize": lambda a: a.synchronize(),
    "event": lambda a: a.event(),
    "stream": lambda a: a.stream(),
    "on_stream": lambda a: a.on_stream(None).__enter__(),
    "wait_for": lambda a: a.wait_for(None),
    "reset_peak": lambda a: a.reset_peak(),
    "peak_bytes": lambda a: a.peak_bytes(),
    "peak_during": lambda a: a.peak_during(lambda: None),
    "allocated_bytes": lambda a: a.allocated_bytes(),
    "pin": lambda a: a.pin(torch.ones(2)),
    "name": lambda a: a.name(),
    "uuid": lambda a: a.uuid(),
}


@pytest.mark.parametrize("call", CUDA_CALLS, ids=str)
def test_every_cuda_call_reaches_the_builds_own_error(call, monkeypatch):
    """With CUDA's availability faked, each call must fail only because this build has no CUDA:
    an argument torch rejects first (a device without an index, a wrong type) fails the test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BaseException) as info:
        CUDA_CALLS[call](Accelerator("cuda"))
    assert any(m in str(info.value) for m in NOT_COMPILED), (
        f"{call}: {type(info.value).__name__}: {info.value}"
    )


def _code_files():
    layer = ROOT / "stbench_cli" / "device"
    return [
        p
        for p in [*(ROOT / "stbench_cli").rglob("*.py"), *(ROOT / "workloads").rglob("*.py")]
        if not p.is_relative_to(layer)
    ]


def test_device_specific_calls_live_in_the_device_layer_only():
    """torch.cuda / torch.backends and device-string comparisons appear in stbench/device/
    alone (strings inside messages aside)."""
    for path in _code_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "torch"
            ):
                assert node.attr not in ("cuda", "backends", "accelerator"), (
                    f"{path.relative_to(ROOT)}:{node.lineno}"
                )
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "startswith"
                and node.args
            ):
                arg = node.args[0]
                assert not (isinstance(arg, ast.Constant) and arg.value == "cuda"), (
                    f"{path.relative_to(ROOT)}:{node.lineno}"
                )
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "cuda"
                for c in [node.left, *node.comparators]
            ):
                raise AssertionError(
                    f"device string compared at {path.relative_to(ROOT)}:{node.lineno}"
                )
            # what the profiler records and the backend a world defaults to are the device
            # layer's (Accelerator.profiler_activities, Device.backend), decided there once
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            assert not (isinstance(node, ast.Name) and node.id == "ProfilerActivity"), where
            assert not (isinstance(node, ast.alias) and node.name == "ProfilerActivity"), where
            if isinstance(node, ast.IfExp):
                chosen = [node.body, node.orelse]
                assert not any(isinstance(c, ast.Constant) and c.value == "nccl" for c in chosen), (
                    f"a backend chosen by device at {where}"
                )


def test_the_torch_side_never_asks_whether_its_device_is_cuda():
    """A module that imports torch (a cell's process) asks the Accelerator what to do, never
    `is_cuda` itself: on the torch side CPU and CUDA differ in the device layer only, so the
    code only a GPU runs stays there. Torch-free code (the planner, the launchers, the report,
    a workload's memory prediction) may ask what a device string names."""
    for path in _code_files():
        tree = ast.parse(path.read_text())
        uses_torch = any(
            isinstance(n, ast.Import)
            and any(a.name.split(".")[0] == "torch" for a in n.names)
            or isinstance(n, ast.ImportFrom)
            and (n.module or "").split(".")[0] == "torch"
            for n in ast.walk(tree)
        )
        if not uses_torch:
            continue
        for node in ast.walk(tree):
            name = getattr(node, "attr", None) or getattr(node, "id", None)
            if isinstance(node, ast.alias):
                name = node.name
            assert name != "is_cuda", f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def test_a_worlds_peak_counts_the_distinct_devices_it_runs_on():
    from stbench.plan.spec import RunSpec
    from stbench.runner.study import devices_used

    def world(device, nproc, nodes=1):
        return RunSpec("cnn-strain", device, "ddp", 64, 1, world_size=nproc * nodes, nodes=nodes)

    assert devices_used(world("cuda", 2), gpu_count=1) == 1  # two gloo ranks share the one GPU
    assert devices_used(world("cuda", 4), gpu_count=8) == 4  # a GPU per rank
    assert devices_used(world("cuda", 2, nodes=2), gpu_count=2) == 4
    assert devices_used(world("cpu", 4), gpu_count=0) == 1  # CPU ranks share one machine


def test_gpus_are_counted_by_the_uuids_the_ranks_report():
    from stbench.child.world import distinct_gpus

    one = "5b0b0e5c-1a2b-3c4d-5e6f-000000000001"
    assert distinct_gpus([one, one]) == 1  # two emulated nodes' gloo ranks on the one GPU
    assert distinct_gpus([one, f"GPU-{one.upper()}"]) == 1  # NVML's spelling of the same GPU
    assert distinct_gpus([one, one.replace("1", "2")]) == 2
    assert distinct_gpus([None, None]) is None  # CPU ranks report none


def test_a_world_on_one_gpu_has_one_gpus_peak():
    from stbench.plan.spec import RunSpec
    from stbench.runner.processes import Outcome
    from stbench.runner.study import derived
    from stbench.store.cell_result import CellResult, Figures

    spec = RunSpec(
        "cnn-strain",
        "cuda",
        "ddp",
        64,
        1,
        world_size=2,
        nodes=2,
        params=(("backend", "gloo"), ("precision", "default")),
    )
    peaks = {"cuda": {"matmul_gflops": 100.0}}

    def fraction(gpus_used):
        figures = Figures(wall_s=1.0, achieved_gflops=50.0, gpus_used=gpus_used)
        return derived(
            spec, Outcome(CellResult("ok", figures=figures), cell_s=2.0), peaks, gpu_count=1
        ).peak_fraction

    assert fraction(1) == 0.5  # two emulated nodes, one GPU by UUID: one GPU's peak
    assert fraction(2) == 0.25
    assert fraction(None) == 0.25  # a row from before the ranks reported UUIDs: the plan's count

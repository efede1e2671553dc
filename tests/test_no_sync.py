"""No training step makes the host wait for the device.

On a GPU, `.item()`, `.cpu()`, `.tolist()`, `.numpy()` and `as_tensor(..., device=cuda)` in a
step block the host until the device catches up, and the phase figures then charge that wait
to the wrong phase. This runs training steps of every workload and data mode on the CPU under a
function mode that records such calls made by stbench's own code (torch's internals, e.g.
Adam reading its CPU step counter, are not ours), plus a plain-text guard on the patterns a
review found.
"""

import inspect
import re
import sys
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

from stbench.child.trainer import LoopConfig, Trainer
from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from tests.helpers import preset_params

ROOT = Path(__file__).parent.parent
OURS = (str(ROOT / "stbench_cli"), str(ROOT / "workloads"))
BLOCKING = {"item", "cpu", "tolist", "numpy"}


class HostReads(TorchFunctionMode):
    """Records blocking reads that stbench's code (the immediate caller) makes."""

    def __init__(self, roots: tuple[str, ...] = OURS):
        super().__init__()
        self.roots, self.calls = roots, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        caller = sys._getframe(1)
        if caller.f_code.co_filename.startswith(self.roots) and (
            name in BLOCKING or (name in ("as_tensor", "tensor") and "device" in kwargs)
        ):
            self.calls.append(f"{name} at {Path(caller.f_code.co_filename).name}:{caller.f_lineno}")
        return func(*args, **kwargs)


CASES = {
    "cnn-strain": dict(n_samples=512),
    "lstm-era5": {},
    "lstm-era5 per-item": dict(loader="per-item"),
    "dcrnn index": dict(steps=1200, batching="index"),
    "dcrnn base": dict(steps=1200, batching="base"),
    "dcrnn gpu-index": dict(steps=1200, batching="gpu-index"),
    "dcrnn tiny": dict(steps=1200, model="tiny", clip=0.0),
    # max_steps cuts both of stnn's passes in proportion: decoder and dynamics batches both run
    "stnn dense": dict(relations="dense", max_steps=4),
    "stnn offload": dict(relations="offload", chunk=50, max_steps=4),
    "stnn sparse": dict(relations="sparse", max_steps=4),
    "stnn-r offload": dict(relations="offload", mode="stnn-r", chunk=50, max_steps=4),
    "stnn-r sparse": dict(relations="sparse", mode="stnn-r", max_steps=4),
}


@pytest.mark.parametrize("case", CASES)
def test_training_steps_make_no_blocking_host_read(case):
    name = {"dcrnn": "dcrnn-pems", "stnn-r": "stnn"}.get(case.split()[0], case.split()[0])
    params = preset_params(name, warmup_steps=0, **CASES[case])
    w = get(name)
    spec = RunSpec(
        name,
        "cpu",
        "single",
        w.presets["smoke"]["batch_size"],
        1,
        params=tuple(sorted(params.items())),
    )
    trainer = Trainer(
        w.build(params, BuildContext()), LoopConfig.from_spec(spec), torch.device("cpu")
    )
    trainer.sampler.set_epoch(0)
    it, loss_sum = iter(trainer.train_loader), torch.zeros(())
    steps = min(4, len(trainer.train_loader))
    with HostReads() as spy:
        start = trainer.clock.mark()
        for _ in range(steps):
            start = trainer._step(it, start, loss_sum).end
    assert spy.calls == []
    assert torch.isfinite(loss_sum)


def test_the_spy_sees_a_blocking_read_in_a_step():
    class Leaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.lin(x) * float(
                x.sum().item() > -1e9
            )  # a host read, as a careless model does

    with HostReads(roots=(__file__,)) as spy:
        Leaky()(torch.ones(2, 4))
    assert [c.split(" at ")[0] for c in spy.calls] == ["item"]


# The patterns the review found, by file: each was a blocking copy or read in every step.
KNOWN = {
    "workloads/stnn/relations.py": r"\bi\.cpu\(\)",
    "workloads/stnn/offload.py": r"\bi\.cpu\(\)",
    "workloads/stnn/optim.py": r"\.coalesce\(\)",
    "workloads/dcrnn_pems/windows.py": r"as_tensor\([^)]*device=",
}


@pytest.mark.parametrize("path,pattern", KNOWN.items())
def test_known_blocking_patterns_are_gone(path, pattern):
    text = (ROOT / path).read_text()
    assert not re.search(pattern, text), f"{path} has {pattern}"


def test_the_trainers_step_reads_nothing_back():
    from stbench.child import trainer

    source = inspect.getsource(trainer.Trainer._step)
    assert not re.search(r"\.(item|cpu|tolist|numpy)\(\)", source)


def test_synchronisations_are_counted_per_profiled_step(tmp_path):
    """A Chrome trace in torch.profiler's layout: steps as ProfilerStep#k ranges, CUDA runtime
    calls in category cuda_runtime (an .item() is a cudaMemcpyAsync then a
    cudaStreamSynchronize)."""
    import json

    from stbench.report.profile import trace_summary
    from stbench.store.trace import syncs_per_step

    events = [
        {"name": "ProfilerStep#3", "ph": "X", "ts": 0, "dur": 100, "cat": "user_annotation"},
        {"name": "ProfilerStep#4", "ph": "X", "ts": 100, "dur": 100, "cat": "user_annotation"},
        {"name": "cudaLaunchKernel", "ph": "X", "ts": 10, "dur": 1, "cat": "cuda_runtime"},
        {"name": "cudaMemcpyAsync", "ph": "X", "ts": 150, "dur": 1, "cat": "cuda_runtime"},
        {"name": "cudaStreamSynchronize", "ph": "X", "ts": 152, "dur": 5, "cat": "cuda_runtime"},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert syncs_per_step(path) == {3: [], 4: ["cudaStreamSynchronize"]}
    assert trace_summary(path).startswith(
        "host-device synchronisations per profiled step: max 1, total 1 over 2 steps"
    )


def test_steps_are_the_hosts_ranges_not_their_gpu_copies(tmp_path):
    """A CUDA trace repeats ProfilerStep#k on the GPU timeline (gpu_user_annotation), shifted
    by the launch queue; a sync call belongs to the step whose host range holds it."""
    import json

    from stbench.store.trace import syncs_per_step

    events = [
        {"name": "ProfilerStep#1", "ph": "X", "ts": 0, "dur": 100, "cat": "user_annotation"},
        {"name": "ProfilerStep#2", "ph": "X", "ts": 100, "dur": 100, "cat": "user_annotation"},
        {"name": "ProfilerStep#1", "ph": "X", "ts": 150, "dur": 100, "cat": "gpu_user_annotation"},
        {"name": "cudaStreamSynchronize", "ph": "X", "ts": 120, "dur": 5, "cat": "cuda_runtime"},
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert syncs_per_step(path) == {1: [], 2: ["cudaStreamSynchronize"]}


def _step_trace(tmp_path, *calls):
    """A trace of one profiled step (ProfilerStep#1, 0-1000 µs) holding `calls`."""
    import json

    events = [
        {
            "name": "ProfilerStep#1",
            "ph": "X",
            "ts": 0,
            "dur": 1000,
            "cat": "user_annotation",
            "pid": 1,
            "tid": 1,
        },
        *calls,
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _call(name, ts, cat="cuda_runtime", dur=5, correlation=None, tid=1):
    return {
        "name": name,
        "ph": "X",
        "ts": ts,
        "dur": dur,
        "cat": cat,
        "pid": 1,
        "tid": tid,
        "args": {} if correlation is None else {"correlation": correlation},
    }


def test_driver_calls_frees_and_sync_copies_are_syncs(tmp_path):
    """A fixed list of runtime calls missed the driver API (code that calls the driver
    directly), cudaFree/cudaFreeHost (they wait for the whole device) and suffixed names."""
    from stbench.store.trace import syncs_per_step

    path = _step_trace(
        tmp_path,
        _call("cuStreamSynchronize", 10, "cuda_driver"),
        _call("cuCtxSynchronize", 20, "cuda_driver"),
        _call("cuEventSynchronize", 30, "cuda_driver"),
        _call("cuMemcpyDtoH_v2", 40, "cuda_driver"),
        _call("cuMemFree_v2", 50, "cuda_driver"),
        _call("cudaFree", 60),
        _call("cudaFreeHost", 70),
        _call("cudaMemcpy", 80),
        _call("cudaStreamSynchronize_ptsz", 90),
        _call("cuLaunchKernel", 100, "cuda_driver"),
        _call("cudaMalloc", 110),
        _call("cudaStreamWaitEvent", 120),
        _call("cudaEventQuery", 130),
    )
    assert syncs_per_step(path) == {
        1: [
            "cuStreamSynchronize",
            "cuCtxSynchronize",
            "cuEventSynchronize",
            "cuMemcpyDtoH",
            "cuMemFree",
            "cudaFree",
            "cudaFreeHost",
            "cudaMemcpy",
            "cudaStreamSynchronize",
        ]
    }


def test_an_async_copy_of_pageable_memory_is_a_sync_and_of_pinned_memory_is_not(tmp_path):
    """The GPU side of a copy names its memory kinds and carries the call's correlation id."""
    from stbench.store.trace import syncs_per_step

    gpu = [
        {
            "name": f"Memcpy {kind}",
            "ph": "X",
            "ts": 500 + k,
            "dur": 3,
            "cat": "gpu_memcpy",
            "pid": 0,
            "tid": 7,
            "args": {"correlation": k},
        }
        for k, kind in enumerate(
            ["DtoH (Device -> Pageable)", "HtoD (Pinned -> Device)", "HtoD (Pageable -> Device)"]
        )
    ]
    path = _step_trace(
        tmp_path,
        *gpu,
        _call("cudaMemcpyAsync", 10, correlation=0),
        _call("cudaMemcpyAsync", 20, correlation=1),
        _call("cuMemcpyHtoDAsync_v2", 30, "cuda_driver", correlation=2),
    )
    assert syncs_per_step(path) == {
        1: ["cudaMemcpyAsync (pageable)", "cuMemcpyHtoDAsync (pageable)"]
    }


def test_a_driver_call_inside_a_runtime_sync_is_that_sync_not_a_second(tmp_path):
    from stbench.store.trace import syncs_per_step

    path = _step_trace(
        tmp_path,
        _call("cudaStreamSynchronize", 10, dur=50),
        _call("cuStreamSynchronize", 12, "cuda_driver"),
        _call("cuStreamSynchronize", 30, "cuda_driver", tid=2),
    )  # another thread's own call
    assert syncs_per_step(path) == {1: ["cudaStreamSynchronize", "cuStreamSynchronize"]}


def test_the_kernels_a_step_launches_are_tabled_by_name():
    """The GPU timeline's kernels, copies and memsets, by name, over the host's profiled steps
    (their GPU copies are not steps): the launches the predictions' CPU count is checked against."""
    from stbench.store.trace import kernel_table

    events = [
        {"name": "ProfilerStep#1", "ts": 0, "dur": 100, "cat": "user_annotation"},
        {"name": "ProfilerStep#2", "ts": 100, "dur": 100, "cat": "user_annotation"},
        {"name": "ProfilerStep#1", "ts": 150, "dur": 100, "cat": "gpu_user_annotation"},
        _call("cudaLaunchKernel", 10),
        *[_call("sgemm", 20 + 90 * i, cat="kernel", dur=30) for i in range(4)],
        *[_call("elementwise", 30 + 90 * i, cat="kernel", dur=2) for i in range(2)],
        _call("Memcpy HtoD (Pinned -> Device)", 40, cat="gpu_memcpy", dur=7),
        _call("Memset (Device)", 41, cat="gpu_memset", dur=1),
    ]
    table = kernel_table(events)
    assert [(r.kind, r.kernel, r.calls, r.per_step) for r in table] == [
        ("kernel", "sgemm", 4, 2.0),
        ("memcpy", "Memcpy HtoD (Pinned -> Device)", 1, 0.5),
        ("kernel", "elementwise", 2, 1.0),
        ("memset", "Memset (Device)", 1, 0.5),
    ]
    assert table[0].device_ms == 0.12
    assert sum(r.per_step for r in table) == 4.0  # launches a step
    assert kernel_table([e for e in events if e["cat"] == "cuda_runtime"]) == []  # a CPU trace


def test_the_hosts_share_of_a_step_is_its_top_level_operators_on_each_thread():
    """Per host step: the operators no other holds on their thread (a GPU's backward runs on
    autograd's own thread), their spans summed, and the step's time no thread spent in one."""
    from stbench.store.trace import host_table, top_level

    def op(ts, dur, tid=1):
        return {"name": "aten::op", "ts": ts, "dur": dur, "cat": "cpu_op", "tid": tid}

    events = [
        {"name": "ProfilerStep#3", "ts": 0, "dur": 100, "cat": "user_annotation", "tid": 1},
        {"name": "ProfilerStep#3", "ts": 40, "dur": 100, "cat": "gpu_user_annotation"},
        op(10, 20),  # 10-30
        op(12, 5),  # inside it: no operator of its own
        op(40, 10),  # 40-50
        op(45, 20, tid=2),  # 45-65 on the backward's thread: overlaps, counted once in time
        op(90, 20),  # begins in the step, ends after it: its span, clipped for the time
        op(150, 10),  # after the step: none of it
        {"name": "cudaLaunchKernel", "ts": 70, "dur": 5, "cat": "cuda_runtime", "tid": 1},
    ]
    (line,) = host_table(events)
    assert (line.step, line.operators, line.threads) == (3, 4, 2)
    assert line.in_operators_ms == pytest.approx((20 + 10 + 20 + 20) / 1e3)
    # busy 10-30, 40-65, 90-100: 55 of the step's 100 us
    assert line.between_ms == pytest.approx(45 / 1e3)
    assert host_table([op(0, 5)]) == []  # no step
    assert top_level([(0, 10), (5, 15), (2, 3), (20, 30)]) == [(0, 15), (20, 30)]


def test_a_gpu_profiles_finding_says_the_kernels_a_step_launches(tmp_path):
    from stbench.report.profile import finding
    from stbench.store.rows import run_of

    run = run_of({"run_id": "p", "status": "ok", "device": "cuda", "compute_s": 1.0, "data_s": 0.5})
    cell = tmp_path / "profile" / "p"
    cell.mkdir(parents=True)
    assert "kernels" not in finding(run, tmp_path)  # no kernels.csv: a CPU profile
    (cell / "kernels.csv").write_text(
        "kind,kernel,calls,per_step,device_ms\nkernel,sgemm,40,4.0,1.0\nmemset,m,20,2.0,0.1\n"
    )
    assert "6 kernels, copies and memsets a step (kernels.csv)" in finding(run, tmp_path)
    (cell / "host.csv").write_text(
        "step,operators,in_operators_ms,between_ms,threads\n2,60,0.6,0.2,2\n3,62,0.62,0.3,2\n"
        "4,61,0.61,0.25,2\n"
    )
    said = " ".join(finding(run, tmp_path).split())
    assert "the host, a step: 61 operators, 0.61 ms inside them (10.0 us each), 0.25 ms" in said

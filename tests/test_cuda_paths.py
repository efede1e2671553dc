"""CUDA code paths driven on this CPU build as far as they go.

Every entry point a user types with `--device cuda` runs for real, in its own processes, with
CUDA's availability faked (tests/fakecuda: `is_available()` True, one device). Each must reach
the first operation that truly needs CUDA, the build's own "Torch not compiled with CUDA
enabled", and fail in no other way first: an index missing from a device, a CUDA-only call
before the device is selected, a measurement that kills the study. (`torch.cuda.set_device(
torch.device("cuda"))` was such a defect: a ValueError before CUDA was ever touched.)
"""

import json
import os
import re
from pathlib import Path

import pytest

from stbench.plan.registry import all_workloads
from stbench.store.files import read_runs
from stbench.store.manifest import read_manifest
from tests.helpers import stbench

FAKE = str(Path(__file__).parent / "fakecuda")
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"
BUILT_IN = sorted(w.name for w in all_workloads() if w.name != "faulty")


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([FAKE, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("STBENCH_FAKE_CUDA", "1")


def _cuda_failures(log: Path) -> set[str]:
    """For every traceback in a cell's log that ends in the build's CUDA error (one per rank):
    its innermost frame in stbench's own code, as file:function."""
    out = set()
    for block in log.read_text().split("Traceback (most recent call last):")[1:]:
        lines = block.splitlines()
        end = next((i for i, ln in enumerate(lines) if ln and not ln.startswith(" ")), len(lines))
        if end == len(lines) or NOT_COMPILED not in lines[end]:
            continue
        frames = re.findall(r'File "([^"]+)", line \d+, in (\w+)', "\n".join(lines[:end]))
        own = [(Path(f).name, fn) for f, fn in frames if "/torch/" not in f]
        out.add(f"{own[-1][0]}:{own[-1][1]}")
    return out


def _assert_reached_cuda(folder: Path, cells: int) -> list[dict]:
    rows = read_runs(folder)
    assert len(rows) == cells
    for r in rows:
        # every rank fails alike; in a world of two, the row names the rank whose result was
        # on record first (rank 1's, when torchrun ended rank 0 before it wrote its own)
        who = r"(rank \d+ \(node \d+\): )?" if int(r["world_size"]) > 1 else ""
        assert r["status"] == "failed", (r["strategy"], r["world_size"], r["reason"])
        assert re.fullmatch(who + re.escape(NOT_COMPILED), r["reason"]), (
            r["strategy"],
            r["world_size"],
            r["reason"],
        )
        # the error came from selecting the device, the first thing a cell does with it
        assert _cuda_failures(folder / "logs" / f"{r['run_id']}.log") == {"accelerator.py:select"}
    return rows


def test_run_on_cuda_reaches_cuda_for_every_workload_and_exits_non_zero(fake_cuda, tmp_path):
    proc = stbench(
        "run", "--all", "--smoke", "--device", "cuda", "--epochs", "1", "--out", tmp_path / "out"
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    folders = sorted((tmp_path / "out").iterdir())
    workloads = {read_runs(f)[0]["workload"]: f for f in folders}
    assert set(BUILT_IN) <= set(workloads)  # (and the tests' own faulty workload)
    assert (
        f"{len(folders)} of {len(folders)} cells did not end ok ({len(folders)} failed)"
        in " ".join(proc.stderr.split())
    )
    for name in BUILT_IN:
        _assert_reached_cuda(workloads[name], 1)
        # the peak could not be measured: named in the manifest, and the study went on
        assert (
            "Torch not compiled with CUDA enabled"
            in read_manifest(workloads[name])["unavailable"]["peak cuda"]
        )


def test_worlds_of_one_and_two_gloo_ranks_reach_cuda(fake_cuda, tmp_path):
    proc = stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--device",
        "cuda",
        "--strategy",
        "ddp",
        "--nproc",
        "1",
        "2",
        "--set",
        "backend=gloo",
        "--out",
        tmp_path / "out",
        "--expect",
        "skipped",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = (tmp_path / "out").iterdir()
    rows = _assert_reached_cuda(folder, 2)
    assert sorted(int(r["world_size"]) for r in rows) == [1, 2]


def test_profile_on_cuda_reaches_cuda(fake_cuda, tmp_path):
    proc = stbench(
        "profile",
        "stnn",
        "--smoke",
        "--device",
        "cuda",
        "--set",
        "relations=offload",
        "--steps",
        "2",
        "--out",
        tmp_path / "out",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = (tmp_path / "out").iterdir()
    _assert_reached_cuda(folder, 1)


def test_doctor_cuda_checks_reach_cuda(fake_cuda, tmp_path):
    proc = stbench("doctor", "--device", "cuda", "--out", tmp_path / "doctor", timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    checks = {
        c["name"]: c
        for c in json.loads(next((tmp_path / "doctor").glob("*/doctor.json")).read_text())["checks"]
    }
    assert all(c["status"] == "FAIL" for c in checks.values())
    for name in (
        "phase-timing",
        "overhead",
        "peaks",
        "sampling",
        "launches",
    ):  # sampling: its GPU load's own error
        assert "Torch not compiled with CUDA enabled" in checks[name]["detail"], checks[name][
            "detail"
        ]
    assert (
        checks["ddp-sync"]["figures"].get("reason") == NOT_COMPILED
        or NOT_COMPILED in checks["ddp-sync"]["detail"]
    )


def test_gpu_vs_cpu_windows_on_cuda_reach_cuda_while_the_cpus_windows_go_on(fake_cuda, tmp_path):
    """The warm process's GPU windows reach the build's own CUDA error at the device's
    selection, a row each; the CPU's configurations in the same study are measured and
    answered. 15 s: with CUDA faked, a slow 2-vCPU VM spent 9.3 s before the first process
    (at --budget 10 its GPU windows were past the deadline now and then)."""
    proc = stbench(
        "gpu-vs-cpu", "cnn-strain", "--smoke", "--sizes", "64", "--rounds", "2", "--budget", 15,
        "--out", tmp_path / "o",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = (tmp_path / "o").iterdir()
    rows = read_runs(folder)
    gpu = [r for r in rows if r["device"] == "cuda"]
    cpu = [r for r in rows if r["device"] == "cpu"]
    assert gpu and all(r["status"] == "failed" for r in gpu)
    assert gpu[0]["reason"] == NOT_COMPILED
    assert all(r["reason"].startswith(NOT_COMPILED) for r in gpu)
    assert cpu and all(r["status"] == "ok" for r in cpu)
    logs = list((folder / "logs").glob("windows-*.log"))
    assert {f for log in logs for f in _cuda_failures(log)} == {"accelerator.py:select"}
    assert "best configuration besides its defaults" in " ".join(proc.stdout.split())
    # one size: no picture of the ratio against the size, and the command says why
    assert not (folder / "gpu-vs-cpu.png").exists()
    assert "no picture: it draws the ratio against the size" in " ".join(proc.stderr.split())


@pytest.mark.slow
def test_run_with_a_budget_as_windows_on_cuda_reaches_cuda_while_the_cpus_go_on(
    fake_cuda, tmp_path
):
    """`run --device cpu cuda --budget`: the cuda cell's windows reach the build's own CUDA
    error at the device's selection, a row each; the CPU's windows are measured; exit 1. Slow
    (13 s): the windows on cuda are the engine's and the warm process's that gpu-vs-cpu's test
    above drives in the default suite; `run`'s own planning of cpu and cuda is
    test_rounds.py's (the cuda cell skipped where no GPU is seen)."""
    proc = stbench(
        "run", "cnn-strain", "--smoke", "--device", "cpu", "cuda", "--budget", 10,
        "--out", tmp_path / "o",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    (folder,) = (tmp_path / "o").iterdir()
    assert read_manifest(folder)["question"]["kind"] == "run"
    rows = read_runs(folder)
    gpu = [r for r in rows if r["device"] == "cuda"]
    cpu = [r for r in rows if r["device"] == "cpu"]
    assert gpu and all(
        r["status"] == "failed" and r["reason"].startswith(NOT_COMPILED) for r in gpu
    )
    assert cpu and all(r["status"] == "ok" for r in cpu)
    logs = list((folder / "logs").glob("windows-*.log"))
    assert {f for log in logs for f in _cuda_failures(log)} == {"accelerator.py:select"}

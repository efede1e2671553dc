"""benchmarks/gpu_acceptance.sh on a machine without a GPU (what CI and this project's machines
are): it lists its parts, refuses each in one line, and its checks (gpu_checks.py) pass and fail
on small hand-made result folders. The script itself runs where a GPU is lent."""

import csv
import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import torch

from stbench.store.rows import RUN_COLUMNS, SCHEMA, SYSTEM_COLUMNS

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_acceptance.sh"
PARTS = ["doctor", "smoke", "stnn", "profile", "distributed", "checkpoint"]

spec = importlib.util.spec_from_file_location("gpu_checks", ROOT / "benchmarks" / "gpu_checks.py")
checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checks)


def script(*args):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def test_list_names_every_part_with_its_minutes_in_80_columns():
    proc = script("--list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == [*PARTS, "all"]
    assert all(ln.split()[2] == "min" and int(ln.split()[1]) <= 9 for ln in lines[:-1])
    assert int(lines[-1].split()[1]) <= 20 and max(map(len, lines)) <= 80


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the parts would run")
@pytest.mark.parametrize("part", PARTS)
def test_each_part_refuses_in_one_line_without_a_gpu(part, tmp_path):
    proc = script("--skip-install", "--out", tmp_path / "out", part)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == (f"gpu_acceptance: part '{part}' needs a CUDA GPU, and torch.cuda.is_available() "
                                   "is False here (or torch is missing)")
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_unknown_part_or_no_out_is_one_line():
    proc = script("--out", "x", "smoke", "turbo")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "gpu_acceptance: unknown part 'turbo'; valid: " + " ".join(PARTS))
    assert script("smoke").stderr.strip().startswith("gpu_acceptance: --out OUT is needed")


def write_runs(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUN_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({"schema": SCHEMA, "status": "ok", "strategy": "single", "batch_size": 64, "epochs": 1,
                     "params": "{}", "workload": "cnn-strain", **r} for r in rows)
    return folder


def test_cpu_gpu_agree_within_its_tolerance_and_not_beyond(tmp_path):
    base = {"final_train_loss": 0.100, "val_value": 0.050}
    ok = write_runs(tmp_path / "a", [{"run_id": "a", "device": "cpu", **base},
                                     {"run_id": "b", "device": "cuda", "final_train_loss": 0.103, "val_value": 0.051}])
    assert "1 cell(s): cpu and cuda agree" in checks.cpu_gpu_agree(ok)
    bad = write_runs(tmp_path / "b", [{"run_id": "a", "device": "cpu", **base},
                                      {"run_id": "b", "device": "cuda", "final_train_loss": 0.2, "val_value": 0.05}])
    with pytest.raises(SystemExit, match="final_train_loss: cpu 0.1 vs cuda 0.2"):
        checks.cpu_gpu_agree(bad)
    failed = write_runs(tmp_path / "c", [{"run_id": "a", "device": "cuda", "status": "failed", "reason": "boom"}])
    with pytest.raises(SystemExit, match="cells did not end ok"):  # never a false pass
        checks.cpu_gpu_agree(failed)


def _system(folder: Path, power: str) -> None:
    with open(folder / "system.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SYSTEM_COLUMNS)
        w.writeheader()
        w.writerow({"run_id": "g", "t_s": 1, "proc_cpu_pct": 90, "proc_rss_mb": 900, "sys_cpu_pct": 50,
                    "sys_mem_pct": 10, "gpu_util_pct": 97, "gpu_mem_mb": 2000, "gpu_power_w": power})


def test_nvml_fields_present_or_named(tmp_path):
    good = write_runs(tmp_path / "a", [{"run_id": "g", "device": "cuda", "gpu_energy_j": 950}])
    _system(good, "310")
    assert checks.nvml(good).startswith("1 samples with NVML utilisation, memory and power; energy 950 J")
    bad = write_runs(tmp_path / "b", [{"run_id": "g", "device": "cuda", "gpu_energy_j": 950}])
    _system(bad, "")
    with pytest.raises(SystemExit, match=r"empty fields \['gpu_power_w'\]"):
        checks.nvml(bad)


def _trace(folder: Path, run_id: str, events: list[dict]) -> None:
    (folder / "profile" / run_id).mkdir(parents=True)
    (folder / "profile" / run_id / "trace.json").write_text(json.dumps({"traceEvents": events}))


def test_offload_copy_hidden_is_the_overlap_with_kernels_on_another_stream(tmp_path):
    copy = {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 100, "dur": 100, "tid": 20}
    hidden = write_runs(tmp_path / "a", [{"run_id": "p", "device": "cuda", "workload": "stnn"}])
    _trace(hidden, "p", [copy, {"cat": "kernel", "name": "bmm", "ts": 90, "dur": 80, "tid": 7},
                         {"cat": "kernel", "name": "bmm", "ts": 120, "dur": 10, "tid": 7}])
    assert checks.offload_hidden(hidden).startswith("70% of 0.1 ms of host-to-device copies hidden")
    exposed = write_runs(tmp_path / "b", [{"run_id": "p", "device": "cuda", "workload": "stnn"}])
    _trace(exposed, "p", [copy, {"cat": "kernel", "name": "bmm", "ts": 100, "dur": 100, "tid": 20}])  # same stream
    with pytest.raises(SystemExit, match="only 0% of 0.1 ms of copies overlap compute"):
        checks.offload_hidden(exposed)


def test_syncs_per_step_are_counted_and_capped(tmp_path):
    folder = write_runs(tmp_path / "a", [{"run_id": "p", "device": "cuda", "workload": "stnn",
                                          "params": json.dumps({"relations": "offload"})}])
    _trace(folder, "p", [{"name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0, "dur": 100},
                         {"name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": 10, "dur": 1},
                         {"name": "cudaMemcpy", "cat": "cuda_runtime", "ts": 20, "dur": 1}])
    assert checks.syncs(folder) == "host-device syncs per profiled step: stnn offload 2 max/step"
    with pytest.raises(SystemExit, match="more than 1 host-device syncs"):
        checks.syncs(folder, 1)

"""The GPU acceptance's checks on small hand-made result folders (its readers, and the command
line's PASS/FAIL/UNTESTED), and the rehearsal's verdict on a step's output."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from stbench.store.rows import RUN_COLUMNS, SCHEMA

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import checks_rows  # noqa: E402
import checks_traces  # noqa: E402
import rehearsal  # noqa: E402
from checks_rows import Fail, Untested  # noqa: E402

NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"


def write_runs(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUN_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows({"schema": SCHEMA, "status": "ok", "strategy": "single", "batch_size": 64, "epochs": 1,
                     "params": "{}", "workload": "cnn-strain", "device": "cuda", "backend": "gloo",
                     "world_size": 1, "nodes": 1, **r} for r in rows)
    return folder


def test_a_folder_with_a_cell_not_ok_fails_every_check_with_its_reason(tmp_path):
    folder = write_runs(tmp_path / "a", [{"run_id": "a", "status": "failed", "reason": NOT_COMPILED}])
    for check in (checks_rows.cpu_gpu_agree, checks_rows.phases_sum, checks_traces.nvml, checks_traces.checkpoint):
        with pytest.raises(Fail, match="cells did not end ok: a: failed AssertionError: Torch not compiled"):
            check(folder)


def test_cpu_and_cuda_disagreeing_fails(tmp_path):
    rows = [{"run_id": "a", "device": "cpu", "final_train_loss": 0.1, "val_value": 0.05},
            {"run_id": "b", "device": "cuda", "final_train_loss": 0.103, "val_value": 0.051}]
    assert "1 cell(s): cpu and cuda agree" in checks_rows.cpu_gpu_agree(write_runs(tmp_path / "a", rows))
    rows[1]["final_train_loss"] = 0.2
    with pytest.raises(Fail, match="final_train_loss cell 0: 0.1 vs 0.2"):
        checks_rows.cpu_gpu_agree(write_runs(tmp_path / "b", rows))


def _world(run_id, strategy, backend, world, loss, sync, status="ok", reason=""):
    return {"run_id": run_id, "strategy": strategy, "backend": backend, "world_size": world, "final_train_loss": loss,
            "sync_s": sync, "status": status, "reason": reason}


def test_distributed_is_untested_without_a_multi_rank_world_and_fails_without_a_sync(tmp_path):
    skipped = "2 processes on nccl need 2 GPUs; 1 GPU visible"
    rows = [_world("a", "ddp", "nccl", 1, 0.5, 0), _world("b", "ddp", "nccl", 2, "", "", "skipped", skipped),
            _world("c", "ddp", "gloo", 2, 0.5, 0.2), _world("d", "zero1", "gloo", 2, 0.501, 0.3)]
    folder = write_runs(tmp_path / "a", rows)
    with pytest.raises(Untested, match="no nccl world of 2\\+ ranks ran here"):  # the old check said PASS
        checks_traces.distributed(folder, "nccl")
    assert checks_traces.distributed(folder, "gloo").startswith("2 gloo cells ok (2 multi-rank)")
    rows[3]["sync_s"] = 0
    with pytest.raises(Fail, match="without a measured sync: \\['d'\\]"):
        checks_traces.distributed(write_runs(tmp_path / "b", rows), "gloo")
    rows[3].update(sync_s=0.3, final_train_loss=0.9)
    with pytest.raises(Fail, match="world"):
        checks_traces.distributed(write_runs(tmp_path / "c", rows), "gloo")


def test_memory_prediction_fails_outside_half_to_one_and_a_half(tmp_path):
    row = {"run_id": "s", "workload": "stnn", "params": json.dumps({"relations": "dense"}), "predicted_mb": 40}
    assert "dense 1.25x" in checks_traces.memory_prediction(write_runs(tmp_path / "a", [{**row, "peak_gpu_mb": 50}]))
    with pytest.raises(Fail, match="dense: peak 35.0 MiB is 8.75x the predicted 4.0 MiB"):
        checks_traces.memory_prediction(write_runs(tmp_path / "b", [{**row, "predicted_mb": 4, "peak_gpu_mb": 35}]))


def test_no_syncs_fails_on_a_trace_without_profiled_steps(tmp_path):
    folder = write_runs(tmp_path / "a", [{"run_id": "p"}])
    (folder / "profile" / "p").mkdir(parents=True)
    (folder / "profile" / "p" / "trace.json").write_text(json.dumps({"traceEvents": [
        {"name": "cudaStreamSynchronize", "cat": "cuda_runtime", "ts": 10, "dur": 1}]}))
    with pytest.raises(Fail, match="no ProfilerStep window"):
        checks_traces.no_syncs(folder)


def checks_cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_checks.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_the_command_line_says_pass_fail_or_untested_with_exit_0_1_3(tmp_path):
    rows = [_world("c", "ddp", "gloo", 2, 0.5, 0.2), _world("d", "ddp", "nccl", 1, 0.5, 0)]
    folder = write_runs(tmp_path / "a", rows)
    ok, untested = checks_cli("distributed", folder, "gloo"), checks_cli("distributed", folder, "nccl")
    assert (ok.returncode, ok.stdout.split()[0]) == (0, "PASS")
    assert (untested.returncode, untested.stdout.split()[0]) == (3, "UNTESTED")
    missing = checks_cli("nvml", tmp_path / "nowhere")
    assert missing.returncode == 1 and missing.stdout.startswith("FAIL no runs.csv")
    assert checks_cli("turbo", folder).returncode == 2


# --- the rehearsal's verdict ----------------------------------------------------------------

TRACEBACK = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n{}\n'


def test_a_step_that_reaches_cuda_and_nothing_else_passes(tmp_path):
    folder = write_runs(tmp_path / "a", [{"run_id": "a", "device": "cpu"},
                                         {"run_id": "b", "status": "failed", "reason": NOT_COMPILED}])
    assert rehearsal.judge(1, "1 of 2 cells did not end ok", folder) == (True, "reached CUDA in 1 cell(s)")
    assert rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED)) == (True, "reached CUDA")


def test_a_step_that_fails_another_way_or_never_reaches_cuda_fails(tmp_path):
    passed, why = rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED) + TRACEBACK.format("KeyError: 'uuid'"))
    assert not passed and why == "failed before CUDA: KeyError: 'uuid'"
    folder = write_runs(tmp_path / "a", [{"run_id": "b", "status": "failed", "reason": "ModuleNotFoundError: zarr"}])
    assert rehearsal.judge(1, NOT_COMPILED, folder) == (False, "failed before CUDA: b failed: ModuleNotFoundError: zarr")
    assert rehearsal.judge(0, "PASS activation peak MiB none 3")[1].startswith("never reached CUDA")
    assert rehearsal.judge(124, NOT_COMPILED) == (False, "ran past its time limit")
    pytest_out = f"FAILED tests/test_gpu.py::a - {NOT_COMPILED}\nERROR tests/test_gpu.py - ModuleNotFoundError: x\n"
    assert rehearsal.judge(1, pytest_out)[1] == "failed before CUDA: ERROR tests/test_gpu.py - ModuleNotFoundError: x"


def test_torchruns_echo_of_a_rank_that_reached_cuda_is_not_another_failure():
    echo = TRACEBACK.format("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ")
    assert rehearsal.judge(1, TRACEBACK.format(NOT_COMPILED) + echo) == (True, "reached CUDA")
    # the echo alone (no rank's traceback reached CUDA in that log) is still a failure
    assert rehearsal.judge(1, NOT_COMPILED + "\n" + echo)[1].startswith("failed before CUDA: torch.distributed")


def test_a_doctor_check_failing_another_way_fails_the_rehearsal(tmp_path):
    (tmp_path / "doctor.json").write_text(json.dumps({"checks": [
        {"name": "peaks", "status": "FAIL", "detail": NOT_COMPILED},
        {"name": "clock", "status": "PASS", "detail": "fine"}]}))
    assert rehearsal.judge(1, "", tmp_path) == (True, "reached CUDA")
    (tmp_path / "doctor.json").write_text(json.dumps({"checks": [
        {"name": "overhead", "status": "FAIL", "detail": "no module named pynvml"}]}))
    assert rehearsal.judge(1, NOT_COMPILED, tmp_path) == (False, "failed before CUDA: doctor overhead: no module named pynvml")


@pytest.mark.slow
def test_rehearsal_of_every_part(tmp_path):
    """The whole acceptance on this CPU machine (minutes: a venv is built); CI runs it in .ci/run."""
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_acceptance.sh"), "--rehearse", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=1800)
    summary = (tmp_path / "summary.md").read_text()
    assert proc.returncode == 0, summary
    assert "| FAIL |" not in summary and summary.count("| PASS |") >= 30

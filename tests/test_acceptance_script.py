"""benchmarks/gpu_acceptance.sh on a machine without a GPU (what CI and this project's machines
are): it lists its parts within their caps, refuses each in one line, and every check's judge
fails on numbers that must fail it (a check that cannot fail proves nothing). The rehearsal
itself (`--rehearse`, the whole acceptance with CUDA faked) runs in .ci/run and, here, under
STBENCH_SLOW=1 (test_rehearsal_of_every_part)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_acceptance.sh"
PARTS = ["doctor", "smoke", "stnn", "profile", "distributed", "checkpoint"]
sys.path.insert(0, str(ROOT / "benchmarks"))

import checks_rows  # noqa: E402
import checks_traces  # noqa: E402
import gpu_checks  # noqa: E402
import rehearsal  # noqa: E402
from checks_rows import Fail, Untested  # noqa: E402


def script(*args, env=None):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60,
                          env=env)


def test_list_names_every_part_within_a_ten_minute_command_in_80_columns():
    proc = script("--list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == [*PARTS, "all"]
    for ln in lines[:-1]:
        words = ln.split()
        assert words[2] == "min" and words[3] == "cap" and words[5] == "s"
        assert int(words[1]) * 60 <= int(words[4]) <= 570  # a part's cap leaves the 10-minute command time to spare
    assert max(map(len, lines)) <= 80


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


def test_a_stale_or_missing_wheel_is_refused_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "fakecuda"), "STBENCH_FAKE_CUDA": "1"}
    proc = script("--out", tmp_path / "out", "--wheels", tmp_path, "checkpoint", env=env)
    assert proc.returncode == 2 and proc.stderr.strip().startswith(f"gpu_acceptance: no stbench wheel in {tmp_path}")
    assert "pip wheel --no-deps" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# --- every judge fails on numbers that must fail it -----------------------------------------

def test_agreement_fails_beyond_its_tolerance_and_on_nan():
    assert checks_rows.judge_agree({"loss": (0.100, 0.103)}, 0.05) == pytest.approx(0.03)
    with pytest.raises(Fail, match="loss: 0.1 vs 0.2"):
        checks_rows.judge_agree({"loss": (0.1, 0.2)}, 0.05)
    with pytest.raises(Fail):
        checks_rows.judge_agree({"loss": (0.1, float("nan"))}, 0.05)


def test_a_share_fails_outside_its_range_and_on_nan():
    assert checks_rows.judge_share("phases", 0.9, 0.7, 1.01) == "90.0%"
    for bad in (0.5, 1.2, float("nan")):
        with pytest.raises(Fail, match="phases"):
            checks_rows.judge_share("phases", bad, 0.7, 1.01)


def test_an_h2d_phase_shorter_than_a_bare_copy_fails():
    assert checks_rows.judge_h2d(120e-6, 100e-6).startswith("h2d 120.0 us/step")
    with pytest.raises(Fail, match="under-measured"):
        checks_rows.judge_h2d(40e-6, 100e-6)  # the 2-us under-measurement the old check let through


def test_syncs_fail_without_a_profiled_step_beyond_the_limit_and_beyond_one_wait_per_copy():
    with pytest.raises(Fail, match="no ProfilerStep window"):
        checks_traces.judge_syncs({}, 0)  # the old no-syncs passed here
    assert checks_traces.judge_syncs({1: [], 2: []}, 0).startswith("2 profiled steps")
    with pytest.raises(Fail, match="step 2: 1 host-device syncs"):
        checks_traces.judge_syncs({1: [], 2: ["cudaStreamSynchronize"]}, 0)
    waits = frozenset({"cudaEventSynchronize"})
    assert checks_traces.judge_syncs({1: ["cudaEventSynchronize"] * 2}, 0, waits, {1: 4})
    with pytest.raises(Fail, match="one cudaEventSynchronize per copy"):
        checks_traces.judge_syncs({1: ["cudaEventSynchronize"] * 3}, 0, waits, {1: 2})
    with pytest.raises(Fail):
        checks_traces.judge_syncs({1: ["cudaDeviceSynchronize"]}, 0, waits, {1: 9})


def test_offload_copies_on_the_compute_stream_fail_and_the_overlap_is_a_figure():
    kernels = [(90, 170, 7), (0, 500, 7)]
    assert "70% of 0.1 ms overlaps compute" in checks_traces.judge_side_stream([(100, 200, 20)],
                                                                               [(90, 170, 7), (120, 130, 7)])
    with pytest.raises(Fail, match="ran on the compute stream"):
        checks_traces.judge_side_stream([(100, 200, 7)], kernels)
    with pytest.raises(Fail, match="no host-to-device copy"):
        checks_traces.judge_side_stream([], kernels)


def test_checkpoint_fails_unless_each_level_lowers_the_peak():
    assert checks_traces.judge_checkpoint({"none": 30, "sqrt": 20, "full": 10}).startswith("activation peak")
    for bad in ({"none": 30, "sqrt": 30, "full": 10}, {"none": 30, "full": 10}):
        with pytest.raises(Fail, match="did not lower"):
            checks_traces.judge_checkpoint(bad)


def test_nvml_fails_on_an_empty_field_no_sample_or_no_energy():
    good = {"gpu_util_pct": "97", "gpu_mem_mb": "2000", "gpu_power_w": "310"}
    assert checks_traces.judge_nvml([good], [950.0]).startswith("1 samples")
    with pytest.raises(Fail, match=r"empty fields \['gpu_power_w'\]"):
        checks_traces.judge_nvml([{**good, "gpu_power_w": ""}], [950.0])
    with pytest.raises(Fail, match="0 samples"):
        checks_traces.judge_nvml([], [950.0])
    with pytest.raises(Fail, match="energy"):
        checks_traces.judge_nvml([good], [0.0])

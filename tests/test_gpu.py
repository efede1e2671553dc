"""CUDA-only checks; skipped without a GPU (run them in a session that has one)."""

import pytest
import torch

from stbench_cli.spec import RunSpec
from stbench_cli.trainer import LoopConfig, Trainer
from workloads import get

pytestmark = pytest.mark.gpu


def test_cuda_event_phases_agree_with_a_synchronized_wall_clock():
    w = get("cnn-strain")
    params = {n: p.default for n, p in w.all_params.items()}
    params.update(n_samples=20_000, warmup_steps=5)
    spec = RunSpec("cnn-strain", "cuda", "single", 256, 2, params=tuple(sorted(params.items())))
    summary = Trainer(w.build(params, 0), LoopConfig.from_spec(spec), torch.device("cuda")).run()
    assert summary["status"] == "ok"
    # Phases are read from CUDA events; the whole run is timed by perf_counter between two
    # synchronisations. The events can only account for less than the wall clock, and
    # should account for most of it.
    phases = summary["train_s"] + summary["eval_s"]
    assert phases <= summary["wall_s"] * 1.01
    assert phases >= 0.7 * summary["wall_s"]
    assert summary["peak_gpu_mb"] > 0

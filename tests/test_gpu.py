"""CUDA-only checks; skipped without a GPU (run them in a session that has one)."""

import pytest

from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from tests.helpers import train

pytestmark = pytest.mark.gpu


def test_cuda_event_phases_agree_with_a_synchronized_wall_clock():
    w = get("cnn-strain")
    params = {n: p.default for n, p in w.all_params.items()}
    params.update(n_samples=20_000, warmup_steps=5)
    spec = RunSpec("cnn-strain", "cuda", "single", 256, 2, params=tuple(sorted(params.items())))
    result = train(w.build(params, BuildContext(device="cuda")), spec, "cuda")
    assert result.status == "ok"
    f = result.figures
    # Phases are read from CUDA events; the whole run is timed by perf_counter between two
    # synchronisations. The events can only account for less than the wall clock, and
    # should account for most of it.
    phases = f.train_s + f.eval_s
    assert phases <= f.wall_s * 1.01
    assert phases >= 0.7 * f.wall_s
    assert f.peak_gpu_mb > 0

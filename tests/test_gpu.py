"""CUDA-only checks; skipped without a GPU (run them in a session that has one:
`python -m pytest -q -m gpu`, or the acceptance's `gpu-tests` extra: docs/gpu-acceptance.md)."""

import pytest
import torch

from stbench.child import checks
from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from stbench.runner import doctor
from tests.helpers import preset_params, train

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


def test_doctor_phase_timing_on_cuda():
    check = doctor.judge_phase_timing("cuda", checks.phase_timing("cuda", steps=40))
    assert check.status == "PASS", check.detail


def test_events_come_from_a_pool():
    params = preset_params("cnn-strain", n_samples=8192, warmup_steps=0)
    spec = RunSpec("cnn-strain", "cuda", "single", 64, 3, params=tuple(sorted(params.items())))
    from stbench.child.trainer import LoopConfig, Trainer

    trainer = Trainer(
        get("cnn-strain").build(params, BuildContext(device="cuda")),
        LoopConfig.from_spec(spec),
        torch.device("cuda"),
    )
    result = trainer.run()
    steps = sum(e.steps for e in result.epochs)
    assert result.status == "ok" and steps == 3 * (6144 // 64)
    # one epoch's marks (4 per step and 2 around eval) are in flight at most; later epochs reuse
    # them
    assert trainer.clock.created <= 4 * (steps // 3) + 4


def test_no_device_synchronisation_inside_the_steps_of_cnn_strain():
    trainer = checks.make_trainer("cuda")
    it, loss_sum = iter(trainer.train_loader), torch.zeros((), device="cuda")
    start = trainer._step(
        it, trainer.clock.mark(), loss_sum
    ).end  # the first step may allocate and pin
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # from here any synchronising CUDA call raises
    try:
        for _ in range(5):
            start = trainer._step(it, start, loss_sum).end
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.global_step == 6  # five steps ran with any synchronising call raising

"""Phase timing: every second of an epoch's steps belongs to one phase, and the host's own
wait for the loader is kept beside the device-clock phases."""

import time

from stbench.contract import BuildContext
from stbench.plan.spec import RunSpec
from stbench.workloads.cnn_strain.task import make_task
from tests.helpers import preset_params, train


def test_phases_add_up_to_the_wall_time_of_the_steps_with_a_slow_step_hook():
    params = preset_params("cnn-strain", n_samples=1024, warmup_steps=0)
    spec = RunSpec("cnn-strain", "cpu", "single", 64, 2, params=tuple(sorted(params.items())))
    delay, steps = 0.03, 2 * (768 // 64)
    result = train(make_task(params, BuildContext()), spec, step_hook=lambda step: time.sleep(delay))
    f = result.figures
    assert result.status == "ok" and sum(e.steps for e in result.epochs) == steps
    # the hook's time is inside the steps' phases, not in a gap between two steps
    assert f.train_s >= steps * delay
    assert f.train_s + f.eval_s >= 0.97 * f.wall_s, (f.train_s, f.eval_s, f.wall_s)
    assert abs(f.data_s + f.h2d_s + f.compute_s + f.sync_s - f.train_s) < 1e-9


def test_host_data_wait_is_recorded_on_every_device():
    params = preset_params("cnn-strain", n_samples=1024, loader="per-item")
    spec = RunSpec("cnn-strain", "cpu", "single", 64, 1, params=tuple(sorted(params.items())))
    result = train(make_task(params, BuildContext()), spec)
    f, (epoch,) = result.figures, result.epochs
    assert 0 < f.data_wait_s <= f.data_s + 1e-6  # on CPU the host's wait is the data phase
    assert epoch.data_wait_s == f.data_wait_s

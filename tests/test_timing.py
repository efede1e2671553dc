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
    result = train(
        make_task(params, BuildContext()), spec, step_hook=lambda step: time.sleep(delay)
    )
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


def test_a_profiled_runs_device_peak_is_the_most_of_its_steps_not_the_last_ones(tmp_path):
    """The profiler resets the allocator's peak after every step (memory.csv's per-step column),
    so the trainer's own reading covers only what followed the last step; the run's peak is
    the most of both. The call sequence on a stand-in for a CUDA accelerator."""
    import csv

    from stbench.child.profiling import StepProfiler
    from stbench.device import Accelerator

    class Allocator:  # what max_memory_allocated would say during each step, in MiB
        def __init__(self, peaks):
            self.peaks, self.calls = list(peaks), []

        def peak_bytes(self):
            self.calls.append("peak")
            return self.peaks[0] * 2**20

        def reset_peak(self):
            self.calls.append("reset")
            self.peaks.pop(0)

    prof = StepProfiler(tmp_path, Accelerator("cpu"), warmup=1, active=2)
    prof.accel, prof.cuda = (
        Allocator([5.0, 9.0, 3.0, 4.0]),
        True,
    )  # 4.0: the evaluation after the last step
    for step in (1, 2, 3):
        prof.hook(step)
    prof.finish()
    assert prof.accel.calls == ["peak", "reset"] * 3  # each step's own peak
    with open(tmp_path / "memory.csv") as f:
        assert [float(r["cuda_max_allocated_mb"]) for r in csv.DictReader(f)] == [5.0, 9.0, 3.0]
    assert (
        prof.peak_mb(4.0) == 9.0 and prof.peak_mb(12.0) == 12.0
    )  # not 4.0, the last reading alone
    assert prof.peak_mb(None) is None  # CPU: no device allocator

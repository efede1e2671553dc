"""Each built-in workload's size axis changes a step's work: from its first to its last size a
step's FLOPs grow at least 100x, up to at least ~50 GFLOP (0.1 ms of an H100's dense TF32 peak:
no longer launch-bound). The FLOPs are counted here, on this CPU, with torch's FLOP counter over
a real forward and backward of a small batch (where the counter cannot see the work, a cuDNN
LSTM's or a sparse gather's, the workload's own count of it, `Task.flops_per_sample`), and a
batch axis multiplies them by the batch: the counter shows that a step's FLOPs are linear in it."""

import pytest
import torch

from stbench.child.strategies import _dense_products_only
from stbench.contract import BATCH, BuildContext
from stbench.plan.planner import resolve_params
from stbench.plan.registry import all_workloads, get

BUILT_IN = sorted(w.name for w in all_workloads() if w.name != "faulty")


def _counted(task, batch: int) -> float:
    """FLOPs of one forward and backward of `batch` training samples, by the FLOP counter."""
    from torch.utils.flop_counter import FlopCounterMode

    data = task.data.train
    if task.data.batch_sampler is not None:  # the workload batches itself: its first batch
        x, y = data[torch.arange(batch)]
    else:
        x, y = torch.utils.data.default_collate([data[i] for i in range(batch)])
    module = task.model.module
    with FlopCounterMode(display=False, custom_mapping=_dense_products_only()) as counter:
        task.model.loss(module, x, y, 0).backward()
    return float(counter.get_total_flops())


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_steps_flops_grow_100x_across_the_size_axis_up_to_50_gflop(name, tmp_path):
    w = get(name)
    assert w.size is not None and w.size.param == BATCH  # every built-in sweeps its batch
    base, _, _ = resolve_params(w, w.default_preset, False, ())
    params = {**base, **dict(w.size.fixed)}
    torch.manual_seed(0)
    task = w.build(params, BuildContext(0, 0, 1, "cpu", tmp_path))
    per_sample = task.flops_per_sample
    if per_sample is None:
        four, eight = _counted(task, 4), _counted(task, 8)
        assert eight == pytest.approx(2 * four, rel=0.01)  # linear in the batch
        per_sample = eight / 8
    first, last = (per_sample * b for b in (w.size.values[0], w.size.values[-1]))
    assert first > 0 and last / first >= 100 and last >= 50e9, (name, first / 1e9, last / 1e9)
    assert str(w.size.values[0]) == str(
        base.get("batch_size", w.presets[w.default_preset].get("batch_size"))
    )

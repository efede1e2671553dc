"""The cnn-strain workload: data, model, and that it learns."""

import h5py
import numpy as np
import pytest
import torch

from stbench.child.trainer import LoopConfig, Trainer
from stbench.contract import BuildContext
from stbench.plan.registry import get
from stbench.plan.spec import RunSpec
from stbench.workloads.cnn_strain import data
from stbench.workloads.cnn_strain.task import make_model, make_task
from tests.helpers import preset_params, train


def build(params, seed=0):
    return make_task(params, BuildContext(seed=seed))


def params(**overrides):
    return preset_params("cnn-strain", **overrides)


def test_model_is_the_studys_network():
    model = make_model()
    assert sum(p.numel() for p in model.parameters()) == 153_441
    assert model(torch.zeros(5, 3, 201)).shape == (5, 2)


def test_generated_curves_have_padding_flags_and_depend_on_labels():
    x, y = data.generate(64, seed=1)
    assert x.shape == (64, 3, 201) and y.shape == (64, 2) and x.dtype == np.float32
    pad = x[:, 2] == 1
    assert np.all(x[:, 0][pad] == 0) and np.all(x[:, 1][pad] == 0)
    assert pad.any() and (~pad).any()
    strain = np.linspace(0, 1, 50)
    soft, stiff = (
        data.stress(strain, np.array(20.0), np.array(1.0)),
        data.stress(strain, np.array(80.0), np.array(1.0)),
    )
    assert np.all(stiff[1:] > soft[1:])  # G0 moves the curve: the inverse problem is learnable


@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_user_files_load(tmp_path, suffix):
    x, y = data.generate(40, seed=2)
    path = tmp_path / f"curves{suffix}"
    if suffix == ".npz":
        np.savez(path, X=x, Y=y)
    else:
        with h5py.File(path, "w") as f:
            f["X"], f["Y"] = x, y
    task = build(params(data=str(path), val_fraction=0.25), seed=0)
    assert len(task.data.train) == 30 and len(task.data.val) == 10
    lx, ly = data.load(str(path))
    np.testing.assert_array_equal(lx, x)
    assert (
        task.data.train.tensors[1].min() >= 0 and task.data.train.tensors[1].max() <= 1
    )  # min-max on training stats


def test_labels_normalized_with_training_statistics_only():
    task = build(params(n_samples=500), seed=0)
    ytr = task.data.train.tensors[1]
    assert torch.allclose(ytr.min(0).values, torch.zeros(2)) and torch.allclose(
        ytr.max(0).values, torch.ones(2)
    )


def test_beats_the_naive_baseline_in_its_smoke_preset():
    w = get("cnn-strain")
    spec = RunSpec(
        "cnn-strain",
        "cpu",
        "single",
        w.presets["smoke"]["batch_size"],
        w.presets["smoke"]["epochs"],
        params=tuple(sorted(params().items())),
    )
    task = build(spec.param_dict, spec.seed)
    result = train(task, spec)
    assert result.status == "ok"
    assert result.figures.val_value < 0.25 * result.figures.naive_baseline
    losses = [e.train_loss for e in result.epochs]
    assert losses[-1] < losses[0]
    assert result.figures.warmup_steps == 2 and result.figures.samples_per_s > 0


def test_per_item_and_vectorized_loaders_give_identical_batches():
    task = build(params(n_samples=300), seed=0)
    batches = {}
    for mode in ("vectorized", "per-item"):
        spec = RunSpec(
            "cnn-strain",
            "cpu",
            "single",
            16,
            1,
            params=tuple(sorted(params(n_samples=300, loader=mode).items())),
        )
        trainer = Trainer(task, LoopConfig.from_spec(spec), torch.device("cpu"))
        trainer.sampler.set_epoch(0)
        batches[mode] = [b for _, b in zip(range(3), trainer.train_loader)]
    for (xv, yv), (xp, yp) in zip(batches["vectorized"], batches["per-item"]):
        assert torch.equal(xv, xp) and torch.equal(yv, yp)

"""stnn on a GPU, checked on the CPU: dense factor gradients on request
(factor_grad), warm-up of both passes, and the cuBLAS workspace in the memory model."""

import numpy as np
import pytest
import torch

from stbench.contract import BuildContext
from stbench.device import Accelerator
from stbench.plan.spec import RunSpec, identify
from stbench.workloads.stnn import grid, relations, sizing
from stbench.workloads.stnn.model import STNN
from stbench.workloads.stnn.optim import RowSparseAdam
from stbench.workloads.stnn.task import make_task
from tests.helpers import preset_params

BACKENDS = ("dense", "offload", "sparse")


def small_model(backend: str, sparse_grad: bool, t_train: int = 6) -> STNN:
    ocean = np.random.default_rng(3).random((7, 11)) > 0.2
    edges = grid.grid_edges(ocean, "4")
    torch.manual_seed(0)
    rel = relations.make(
        backend, edges, "stnn-r" if backend != "dense" else "stnn", 13, sparse_grad
    )
    return STNN(rel, edges.n, t_train, 4, 1, sparse_grad=sparse_grad)


def batch(model: STNN, kind: str, seed: int, size: int = 40):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(0, model.t_train - 1, (size,), generator=g)
    i = torch.randint(0, model.n, (size,), generator=g)
    y = torch.empty(size, 0) if kind == "dynamics" else torch.randn(size, 1, generator=g)
    return torch.stack([t, i], 1), y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["decoder", "dynamics"])
def test_factor_grad_dense_gives_a_strided_gradient_in_every_mode_and_pass(backend, kind):
    """The sanitizer calls data_ptr() on every tensor an operator touches; a sparse COO
    gradient has none. With sparse (the default) a decoder batch's gradient is sparse in every
    relations mode (not only with sparse relations), and so is a sparse-relations dynamics batch."""
    grads = {}
    for sparse_grad in (True, False):
        model = small_model(backend, sparse_grad)
        model(*batch(model, kind, 1)).backward()
        grads[sparse_grad] = model.factors.grad
    assert grads[False].layout == torch.strided
    assert grads[True].is_sparse == (kind == "decoder" or backend == "sparse")
    torch.testing.assert_close(grads[False], grads[True].to_dense(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("state", ["fp32", "bf16"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_row_sparse_adam_trains_the_same_on_dense_factor_gradients(backend, state):
    """RowSparseAdam's dense path (every row decayed and stepped; untouched rows keep their
    value) follows its sparse path over steps of both passes."""
    trained = []
    for sparse_grad in (True, False):
        model = small_model(backend, sparse_grad)
        opt = RowSparseAdam(model.parameters(), lr=1e-2, state=state)
        for step in range(8):
            opt.zero_grad(set_to_none=True)
            model(*batch(model, ("decoder", "dynamics")[step % 2], step)).backward()
            opt.step()
        trained.append(dict(model.named_parameters()))
    start = small_model(backend, True).factors
    assert (trained[0]["factors"] - start).abs().max() > 1e-3
    for name, p in trained[0].items():
        torch.testing.assert_close(trained[1][name], p, rtol=1e-5, atol=1e-6, msg=name)


def test_factor_grad_reaches_the_task_and_makes_another_cell():
    p = preset_params("stnn", relations="sparse", factor_grad="dense")
    model = make_task(p, BuildContext(seed=0)).model.module
    assert not model.sparse_grad and not model.relations.sparse_grad
    default = make_task(
        preset_params("stnn", relations="sparse"), BuildContext(seed=0)
    ).model.module
    assert default.sparse_grad and default.relations.sparse_grad
    sparse, dense = (
        identify(
            RunSpec(
                "stnn", "cpu", "single", 1000, 1, params=(("factor_grad", grad), ("grid", "30x84"))
            )
        )
        for grad in ("sparse", "dense")
    )
    assert sparse.run_id != dense.run_id


def test_dense_factor_gradients_are_in_the_memory_model():
    """factor_grad=dense: a gradient the size of all factors, and a second one while a dynamics
    step's two paths into the factors are added, in every relations mode."""
    p = preset_params("stnn", grid="60x168", relations="sparse")
    sparse, dense = (
        sizing.predict_bytes(p, 1000),
        sizing.predict_bytes({**p, "factor_grad": "dense"}, 1000),
    )
    factors = sparse["t_train"] * sparse["n"] * p["nz"] * 4
    assert "factor gradient (dense)" not in sparse["device"]
    assert dense["device_bytes"] - sparse["device_bytes"] == 2 * factors
    on_dense = {**p, "relations": "dense"}
    assert (
        sizing.predict_bytes({**on_dense, "factor_grad": "dense"}, 1000)["device_bytes"]
        - sizing.predict_bytes(on_dense, 1000)["device_bytes"]
    ) == factors


def recording(model: STNN, log: list) -> None:
    """Log each pass the model runs (its two losses), in order."""
    for name in ("decoder_loss", "dynamics_loss"):
        run = getattr(model, name)
        setattr(model, name, lambda *a, _run=run, _name=name: (log.append(_name), _run(*a))[1])


@pytest.mark.parametrize("backend", ["offload", "dense"])
def test_warm_up_runs_both_passes_before_the_first_timed_step(backend):
    """The sampler's first batches are decoder batches: the dynamics pass (with offload its
    pinned buffers and copy stream) and its optimizer state first ran inside a timed step.
    The untimed warm-up now runs one batch of each pass; the timed steps are the sampler's."""
    from stbench.child.trainer import LoopConfig, Trainer

    p = preset_params("stnn", relations=backend, chunk=16, max_steps=6, compile="none")
    task = make_task(p, BuildContext(seed=0))
    model, log = task.model.module, []
    recording(model, log)
    spec = RunSpec("stnn", "cpu", "single", 200, 1, params=tuple(sorted(p.items())))
    trainer = Trainer(
        task,
        LoopConfig.from_spec(spec),
        torch.device("cpu"),
        step_hook=lambda step: log.append(step),
    )
    before = list(log)
    assert sorted(set(before)) == ["decoder_loss", "dynamics_loss"]
    assert all(
        len(trainer.optimizer.state[q]) for q in model.parameters()
    )  # no state made in a timed step
    if backend == "offload":
        assert (
            len(model.relations.staging) == 2
        )  # the staging buffers exist before the clock starts
    trainer.run()
    timed = log[len(before) :]  # each timed step: its batch's pass, then the step hook's count
    epoch = [
        name
        for name, steps in zip(("decoder_loss", "dynamics_loss"), trainer.sampler.batches)
        for _ in range(steps)
    ]
    epochs = sum(isinstance(entry, int) for entry in timed) // len(epoch)
    assert epochs >= 1 and "dynamics_loss" in epoch
    assert timed == [entry for k, name in enumerate(epoch * epochs) for entry in (name, k + 1)]


MiB = 2**20


def test_cublas_workspace_is_torchs_default_for_the_gpu_or_what_the_environment_says(monkeypatch):
    from stbench.contract import cublas_workspace_bytes

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert cublas_workspace_bytes((9, 0)) == 32 * MiB  # H100, H200: ":4096:8"
    assert cublas_workspace_bytes((8, 0)) == 4096 * 1024 * 2 + 16 * 1024 * 8  # A100: ":4096:2:16:8"
    assert cublas_workspace_bytes(None) == 32 * MiB  # GPU not known yet: the larger
    assert cublas_workspace_bytes((9, 0), ":16:8") == 128 * 1024
    assert cublas_workspace_bytes((9, 0), "not a config") == 32 * MiB  # torch ignores it too
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2:16:8")
    assert cublas_workspace_bytes((9, 0)) == 8 * MiB + 128 * 1024


def test_cuda_predictions_hold_cublas_workspaces_and_cpu_ones_do_not(monkeypatch):
    """The smoke predictions are 1-5 MiB; on an H100 torch's caching allocator also holds a
    32 MiB cuBLAS workspace for the forward thread's handle and one for autograd's."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    p = preset_params("stnn", relations="sparse")
    cpu, h100 = (
        sizing.predict_bytes(p, 200, "cpu"),
        sizing.predict_bytes(p, 200, "cuda", capability=(9, 0)),
    )
    assert "cuBLAS workspaces" not in cpu["device"]
    assert h100["device"]["cuBLAS workspaces"] == 2 * 32 * MiB
    assert h100["device_bytes"] - cpu["device_bytes"] == 2 * 32 * MiB
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:2")
    assert (
        sizing.predict_bytes(p, 200, "cuda", capability=(9, 0))["device"]["cuBLAS workspaces"]
        == 2 * 8 * MiB
    )


class _Stub(Accelerator):
    """An Accelerator of a GPU of this compute capability (None: the CPU), as _predicted_mb
    sees it."""

    def __init__(self, capability):
        super().__init__("cpu" if capability is None else "cuda")
        self._capability = capability

    def capability(self):
        return self._capability


def test_the_rows_prediction_is_for_the_gpu_the_cell_ran_on(monkeypatch):
    from stbench.child.cell import _predicted_mb
    from stbench.plan.registry import get

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    p = preset_params("stnn", relations="sparse")
    on = {
        device: RunSpec("stnn", device, "single", 200, 1, params=tuple(sorted(p.items())))
        for device in ("cpu", "cuda")
    }
    h100, a100 = (_predicted_mb(get("stnn"), on["cuda"], _Stub(c)) for c in ((9, 0), (8, 0)))
    assert h100 - a100 == pytest.approx(2 * (32 - 8.125))
    cpu = sizing.predict_bytes(p, 200, "cpu")
    assert (
        _predicted_mb(get("stnn"), on["cpu"], _Stub(None))
        == (cpu["device_bytes"] + cpu["host_bytes"]) / MiB
    )


# stnn-r selects its learned edges by a boolean mask, which the meta device cannot size
@pytest.mark.parametrize("mode", ["stnn", "stnn-d"])
def test_dense_relations_are_made_on_the_training_device(mode):
    """W is built where the cell trains (an H100's largest grid, ~46 GiB, never passes through
    host memory): on the meta device every tensor of the backend is there, and on the CPU it
    holds the edges' values as before."""
    edges = grid.grid_edges(np.random.default_rng(3).random((7, 11)) > 0.2, "4")
    made = relations.make("dense", edges, mode, device="meta")
    own = [t for t in (*made.buffers(), *made.parameters()) if t.dim() == 3]
    assert own and all(t.device.type == "meta" for t in own)
    if mode == "stnn":
        w = relations.make("dense", edges, mode).w
        assert float(w[edges.row, edges.rel, edges.col].sum()) == pytest.approx(edges.value.sum())

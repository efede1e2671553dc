"""The nodes axis, distributed backends and run_id stability: planning only, no torch."""

import csv
import json

import pytest

from stbench.plan.skips import skip_reason
from stbench.plan.spec import MatrixSpec, RunSpec, expand
from tests.helpers import committed_folders


def test_run_ids_of_every_committed_study_are_unchanged():
    """The committed reference studies were planned before nodes, backend and bucket_cap_mb
    existed; their cells must keep the ids their rows carry (resume matches rows by run_id)."""
    for manifest in (folder / "manifest.json" for folder in committed_folders()):
        cells = [RunSpec.from_dict(c) for c in json.loads(manifest.read_text())["cells"]]
        with open(manifest.parent / "runs.csv") as f:
            assert sorted(c.run_id for c in cells) == sorted(r["run_id"] for r in csv.DictReader(f)), manifest
    old = RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, params=(("lr", 0.1),))
    today = RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, nodes=1,
                    params=(("backend", "auto"), ("bucket_cap_mb", 25.0), ("lr", 0.1)))
    assert today.run_id == old.run_id == "4482d82b8fe1"  # what stbench before multi-node runs computed
    assert RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, nodes=2, params=old.params).run_id != old.run_id
    assert RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, params=(("backend", "gloo"), ("lr", 0.1))).run_id != old.run_id


def test_nnodes_multiplies_the_world_of_multi_process_cells_only():
    cells = expand(MatrixSpec("w", strategies=("single", "ddp"), nprocs=(1, 2), nnodes=(1, 2)))
    assert [(c.strategy, c.nodes, c.nproc_per_node, c.world_size) for c in cells] == [
        ("single", 1, 1, 1), ("ddp", 1, 1, 1), ("ddp", 2, 1, 2), ("ddp", 1, 2, 2), ("ddp", 2, 2, 4)]
    assert [c.backend for c in cells] == [None, "gloo", "gloo", "gloo", "gloo"]


@pytest.mark.parametrize("spec,gpus,backends,launcher,expected", [
    (RunSpec("w", "cpu", "ddp", 1, 1, world_size=2, params=(("backend", "mpi"),)), 0, ("gloo",), "local",
     "backend mpi is not available in this torch build (torch.distributed.is_mpi_available() is False; available: gloo)"),
    (RunSpec("w", "cpu", "ddp", 1, 1, world_size=2, params=(("backend", "nccl"),)), 0, ("gloo", "nccl"), "local",
     "backend nccl needs CUDA devices; on cpu use backend gloo (or auto)"),
    (RunSpec("w", "cuda", "ddp", 1, 1, world_size=2, params=(("backend", "gloo"),)), 1, ("gloo", "nccl"), "local", None),
    (RunSpec("w", "cuda", "ddp", 1, 1, world_size=4, nodes=2), 2, ("gloo", "nccl"), "local",
     "ddp with 2 nodes x nproc=2 on cuda needs 4 GPUs, 2 visible"),
    (RunSpec("w", "cuda", "ddp", 1, 1, world_size=4, nodes=2), 2, ("gloo", "nccl"), "srun", None),
    (RunSpec("w", "cuda", "ddp", 1, 1, world_size=4, nodes=2), 0, ("gloo", "nccl"), "slurm", None),
    (RunSpec("w", "cpu", "single", 1, 1, params=(("backend", "mpi"),)), 0, ("gloo",), "local", None),
])
def test_backend_and_node_skips(spec, gpus, backends, launcher, expected):
    assert skip_reason(spec, gpus, ("single", "ddp"), backends, launcher) == expected

"""The nodes axis, distributed backends and run_id stability: planning only, no torch."""

import csv
import json

import pytest

from stbench.plan.skips import skip_reason
from stbench.plan.spec import MatrixSpec, RunSpec, expand
from stbench.store.manifest import cells as manifest_cells
from tests.helpers import committed_folders


def test_run_ids_of_every_committed_study_are_unchanged():
    """The committed reference studies were planned before nodes, backend and bucket_cap_mb
    existed; their cells must keep the ids their rows carry (resume matches rows by run_id)."""
    for manifest in (folder / "manifest.json" for folder in committed_folders()):
        cells = [RunSpec.from_dict(c) for c in manifest_cells(json.loads(manifest.read_text()))]
        with open(manifest.parent / "runs.csv") as f:
            assert sorted(c.run_id for c in cells) == sorted(r["run_id"] for r in csv.DictReader(f)), manifest
    old = RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, params=(("lr", 0.1),))
    today = RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, nodes=1,
                    params=(("backend", "auto"), ("bucket_cap_mb", 25.0), ("lr", 0.1)))
    assert today.run_id == old.run_id == "4482d82b8fe1"  # what stbench before multi-node runs computed
    assert RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, nodes=2, params=old.params).run_id != old.run_id
    assert RunSpec("w", "cpu", "ddp", 8, 1, world_size=2, params=(("backend", "gloo"), ("lr", 0.1))).run_id != old.run_id


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def test_every_committed_study_planned_again_from_its_matrix_has_its_run_ids():
    """A manifest's matrix written before repeats had their own seeds lacks seed_per_repeat: its
    late default (False) gives every repeat the study's seed again, so the cells, their ids and what
    --resume matches are the ones the rows carry."""
    older = 0
    for folder in committed_folders():
        manifest = json.loads((folder / "manifest.json").read_text())
        older += "seed_per_repeat" not in manifest["matrix"]
        cells = expand(MatrixSpec(**{k: _tuples(v) for k, v in manifest["matrix"].items()}))
        ids = [RunSpec.from_dict(c).run_id for c in manifest_cells(manifest)]
        assert [c.run_id for c in cells] == ids, folder.name
    assert older > 20  # the studies committed before per-repeat seeds are among them


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


def test_a_study_with_a_seed_per_repeat_resumes_with_the_cells_it_planned(tmp_path):
    """--resume reads the manifest's cells: the seed each repeat was given, and so its run id."""
    from stbench.plan.planner import Request, plan_new, plan_resume
    from stbench.runner import envinfo
    from stbench.store.manifest import write_manifest

    env = envinfo.collect()
    plan = plan_new(Request("cnn-strain", smoke=True, repeat=3, seed=4, out=tmp_path), env)
    assert [c.seed for c in plan.cells] == [4, 5, 6]
    write_manifest(plan.folder, json.loads(json.dumps(plan.manifest, default=str)))
    again = plan_resume(None, plan.folder, env)
    assert [c.run_id for c in again.cells] == [c.run_id for c in plan.cells] and again.cells == plan.cells

"""The nodes axis, distributed backends and run ids set once when planned: planning only, no
torch."""

import csv
import json
from dataclasses import fields
from pathlib import Path

import pytest

from stbench.plan import registry
from stbench.plan.skips import skip_reason
from stbench.plan.spec import MatrixSpec, RunSpec, expand
from stbench.store.rows import SCHEMA
from tests.helpers import committed_folders


def test_every_committed_study_stores_its_cells_ids_and_every_parameter():
    """Each committed manifest (today's schema) stores every cell with its
    run id, the id its row carries, and every parameter of its workload written out."""
    for folder in committed_folders():
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["schema"] == SCHEMA, folder.name
        cells = [RunSpec.from_dict(c) for c in manifest["cells"]]
        with open(folder / "runs.csv") as f:
            rows = list(csv.DictReader(f))
        assert sorted(c.run_id for c in cells) == sorted(r["run_id"] for r in rows), folder.name
        names = set(registry.get(manifest["workload"]).all_params)
        assert all(set(c.param_dict) == names for c in cells), folder.name
        assert all(set(json.loads(r["params"])) == names for r in rows), folder.name


def test_the_same_study_planned_twice_has_the_same_ids(tmp_path):
    """An id is a hash of what the cell is, computed when it is planned (spec.identify)."""
    from stbench.plan.planner import Request, plan_new
    from stbench.runner import envinfo

    env = envinfo.collect()
    request = Request("stnn", smoke=True, repeat=2, sets=("relations=dense,sparse",), out=tmp_path)
    first, second = plan_new(request, env), plan_new(request, env)
    assert [c.run_id for c in first.cells] == [c.run_id for c in second.cells]
    assert len({c.run_id for c in first.cells}) == 4 and first.cells == second.cells
    assert [c["run_id"] for c in first.manifest["cells"]] == [c.run_id for c in first.cells]


def test_no_late_knob_and_no_late_default_table():
    """Ids are stored, so nothing keeps a parameter out of an id: no parameter is `late`, and
    planning imports no workload to compute one."""
    from stbench.contract import params
    from stbench.plan import spec

    assert "late" not in {f.name for f in fields(params.Param)}
    assert all("late" not in f.metadata for f in fields(params.TrainerParams))
    assert not [n for n in (*vars(params), *vars(spec)) if "LATE" in n.upper()]
    assert "registry" not in Path(spec.__file__).read_text()


def test_nnodes_multiplies_the_world_of_multi_process_cells_only():
    cells = expand(
        MatrixSpec(
            "w",
            strategies=("single", "ddp"),
            nprocs=(1, 2),
            nnodes=(1, 2),
            base_params=(("backend", "auto"),),
        )
    )
    assert [(c.strategy, c.nodes, c.nproc_per_node, c.world_size) for c in cells] == [
        ("single", 1, 1, 1),
        ("ddp", 1, 1, 1),
        ("ddp", 2, 1, 2),
        ("ddp", 1, 2, 2),
        ("ddp", 2, 2, 4),
    ]
    assert [c.backend for c in cells] == [None, "gloo", "gloo", "gloo", "gloo"]


TWO_NODES = RunSpec("w", "cuda", "ddp", 1, 1, world_size=4, nodes=2, params=(("backend", "auto"),))


@pytest.mark.parametrize(
    "spec,gpus,backends,launcher,expected",
    [
        (
            RunSpec("w", "cpu", "ddp", 1, 1, world_size=2, params=(("backend", "mpi"),)),
            0,
            ("gloo",),
            "local",
            "backend mpi is not available in this torch build "
            "(torch.distributed.is_mpi_available() is False; available: gloo; with --launcher "
            "mpirun, backend=mpi4py all-reduces DDP's gradients through MPI)",
        ),
        (
            RunSpec("w", "cpu", "ddp", 1, 1, world_size=2, params=(("backend", "nccl"),)),
            0,
            ("gloo", "nccl"),
            "local",
            "backend nccl needs CUDA devices; on cpu use backend gloo (or auto)",
        ),
        (
            RunSpec("w", "cuda", "ddp", 1, 1, world_size=2, params=(("backend", "gloo"),)),
            1,
            ("gloo", "nccl"),
            "local",
            None,
        ),
        (
            TWO_NODES,
            2,
            ("gloo", "nccl"),
            "local",
            "ddp with 2 nodes x nproc=2 on cuda needs 4 GPUs, 2 visible "
            "(NCCL wants a GPU per rank; gloo ranks may share one: --set backend=gloo)",
        ),
        (TWO_NODES, 2, ("gloo", "nccl"), "srun", None),
        (TWO_NODES, 0, ("gloo", "nccl"), "slurm", None),
        (
            RunSpec("w", "cpu", "single", 1, 1, params=(("backend", "mpi"),)),
            0,
            ("gloo",),
            "local",
            None,
        ),
    ],
)
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
    assert [c.run_id for c in again.cells] == [
        c.run_id for c in plan.cells
    ] and again.cells == plan.cells

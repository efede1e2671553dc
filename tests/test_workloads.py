"""Every registered workload (the built-ins and any entry point on the path, the test-only
`faulty` included): its parameters and presets are well-formed, and a smoke cell of one step
runs in its own process and writes a complete row. A new workload is covered by adding its
entry point."""

import csv
import math

import pytest

from stbench.plan import registry
from stbench.plan.planner import Request, plan_new
from stbench.runner import envinfo, study
from stbench.store.rows import EPOCH_COLUMNS, EXTRA_PREFIX, RUN_COLUMNS

NAMES = registry.names()


def test_the_built_ins_are_registered():
    assert {"cnn-strain", "dcrnn-pems", "lstm-era5", "stnn"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_parameters_and_presets_are_well_formed(name):
    w = registry.get(name)
    params = w.all_params
    assert w.default_preset in w.presets and "smoke" in w.presets
    for p in params.values():
        assert p.check(p.default) == p.default, p.name  # every default is a valid value
    for preset in w.presets.values():
        for key, value in preset.items():
            assert key in ("batch_size", "epochs") or params[key].check(value) == value, (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_one_step_in_its_own_process_writes_a_complete_row(name, tmp_path):
    env = envinfo.collect()
    request = Request(
        name,
        smoke=True,
        epochs=(1,),
        out=tmp_path,
        sets=("max_steps=1", "max_eval_batches=1", "warmup_steps=0"),
    )
    plan = plan_new(request, env)
    (row,) = study.run_study(plan, env, timeout=300)
    assert row["status"] == "ok", row["reason"]
    assert row["wall_s"] > 0 and row["samples_per_s"] > 0 and row["flops_per_sample"] > 0
    assert math.isfinite(row["val_value"]) and math.isfinite(row["naive_baseline"])
    with open(plan.folder / "runs.csv") as f:
        header = next(csv.reader(f))
    assert header[: len(RUN_COLUMNS)] == RUN_COLUMNS
    assert all(c.startswith(EXTRA_PREFIX) for c in header[len(RUN_COLUMNS) :])
    with open(plan.folder / "epochs.csv") as f:
        epochs = list(csv.DictReader(f))
    assert [e["run_id"] for e in epochs] == [row["run_id"]] and list(epochs[0]) == EPOCH_COLUMNS

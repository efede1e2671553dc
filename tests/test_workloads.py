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


def test_generated_data_is_made_once_kept_and_the_least_recently_used_sets_forgotten(tmp_path):
    """contract/kept.py: a set is made at its first use and read back after; one over the limit
    is made each time and never kept; a workload keeps its KEEP most recently used sets. The
    seconds a process made kept sets in (`made_s`) count what a later process reads instead."""
    import os
    import time

    import numpy as np

    from stbench.contract import kept

    made = []

    def make(value):
        made.append(value)
        return {"a": np.full(3, value)}

    def slowly(value):  # a set that takes a while to make
        time.sleep(0.05)
        return make(value)

    before = kept.made_s()
    first = kept.kept_arrays(tmp_path, "w", "k0", 24, lambda: slowly(0))
    making = kept.made_s() - before  # what a later process does not pay: it reads the set
    again = kept.kept_arrays(tmp_path, "w", "k0", 24, lambda: make(99))
    assert made == [0] and (first["a"] == again["a"]).all() and again["a"][0] == 0
    assert making >= 0.05 and kept.made_s() - before == making  # reading it back made nothing
    kept.kept_arrays(tmp_path, "w", "big", kept.CACHE_LIMIT + 1, lambda: slowly(1))
    assert made == [0, 1] and not (tmp_path / "data" / "w-big.npz").exists()
    assert kept.made_s() - before == making  # made each time, by every process: not counted
    writing = tmp_path / "data" / "w-k99.123.tmp.npz"  # another process's, not yet in place
    writing.write_bytes(b"")
    os.utime(writing, (0, 0))
    for i in range(1, kept.KEEP + 2):  # k0 used first, then KEEP + 1 more: k0 and k1 go
        path = tmp_path / "data" / f"w-k{i - 1}.npz"
        if path.exists():
            os.utime(path, (i, i))  # an order of use the file system's clock cannot blur
        kept.kept_arrays(tmp_path, "w", f"k{i}", 24, lambda i=i: make(i))
    left = sorted(p.stem for p in (tmp_path / "data").glob("w-*.npz"))
    assert len(left) == kept.KEEP + 1 and writing.exists()
    assert "w-k0" not in left and f"w-k{kept.KEEP + 1}" in left


def test_kept_sets_stay_within_their_bytes_the_newest_always_kept(tmp_path, monkeypatch):
    """Sets of up to CACHE_LIMIT are kept (cnn-strain's default 400,000 curves, 0.92 GB, took
    10 s to make in each process of a question); a workload's kept sets stay within KEPT_BYTES,
    the least recently used going first, and the newest is kept whatever its size."""
    import os

    import numpy as np

    from stbench.contract import kept

    assert kept.CACHE_LIMIT >= 400_000 * (3 * 201 + 2) * 4  # cnn-strain's default preset
    for i in range(4):
        path = tmp_path / "data" / f"w-k{i - 1}.npz"
        if path.exists():
            os.utime(path, (i, i))
            monkeypatch.setattr(kept, "KEPT_BYTES", 2.5 * path.stat().st_size)  # two sets
        kept.kept_arrays(tmp_path, "w", f"k{i}", 8000, lambda: {"a": np.zeros(1000)})
    left = sorted(p.stem for p in (tmp_path / "data").glob("w-*.npz"))
    assert left == ["w-k2", "w-k3"]
    monkeypatch.setattr(kept, "KEPT_BYTES", 10)  # smaller than any set: the newest stays
    kept.kept_arrays(tmp_path, "w", "k4", 8000, lambda: {"a": np.zeros(1000)})
    assert sorted(p.stem for p in (tmp_path / "data").glob("w-*.npz")) == ["w-k4"]


def test_dcrnn_speeds_kept_are_the_speeds_generated(tmp_path):
    from stbench.workloads.dcrnn_pems import source
    from tests.helpers import preset_params

    p = {**preset_params("dcrnn-pems", "smoke"), "steps": 700}
    made, _ = source.load_series(p, 3)
    kept, _ = source.load_series(p, 3, tmp_path)  # made here, kept
    read, _ = source.load_series(p, 3, tmp_path)  # read back
    assert (made == kept).all() and (made == read).all() and read.dtype == made.dtype
    assert len(list((tmp_path / "data").glob("dcrnn-pems-*.npz"))) == 1

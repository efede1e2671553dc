"""`stbench migrate`: folders of schema 1 (tests/schema1/: two committed reference studies as
they were before their migration) rewritten once, read back with the ids their rows carried,
and resumed without running anything that was done; readers refuse an older folder in one line."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from stbench.errors import StbenchError
from stbench.plan import registry
from stbench.plan.migrate import migrate
from stbench.plan.planner import plan_resume
from stbench.runner import envinfo
from stbench.store.files import read_runs
from stbench.store.rows import RUN_COLUMNS, SCHEMA
from tests.helpers import stbench

OLD = Path(__file__).parent / "schema1"
# two schema-3 folders as they were committed: a CPU study from before the load columns and
# epochs.csv's elapsed time, and the H100 lease's study whose rows said their facts in words
SCHEMA3 = Path(__file__).parent / "schema3"
EPOCHS, H100 = "ref-cpu2-cnn-strain-epochs", "ref-h100-lstm-era5-paper"
DDP, STNN = "ref-cpu2-cnn-strain-ddp", "ref-cpu2-stnn-pacific"


@pytest.fixture
def old(tmp_path) -> Path:
    """A copy of both schema-1 folders under tmp_path/results."""
    shutil.copytree(OLD, tmp_path / "results")
    return tmp_path / "results"


def _rows(folder: Path) -> list[dict]:
    with open(folder / "runs.csv", newline="") as f:
        return list(csv.DictReader(f))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_an_old_folder_is_read_back_with_the_ids_its_rows_carried(old):
    before = {name: _rows(old / name) for name in (DDP, STNN)}
    assert all(r["schema"] == "1" for rows in before.values() for r in rows)
    proc = stbench("migrate", old, check=True)
    assert proc.stdout.count(f"-> {SCHEMA}") == 2 and "run ids kept" in proc.stdout
    for name, rows in before.items():
        folder = old / name
        after = read_runs(folder)  # a reader of today's schema takes it
        assert [r["run_id"] for r in after] == [r["run_id"] for r in rows]
        manifest = _manifest(folder)
        names = set(registry.get(manifest["workload"]).all_params)
        assert [c["run_id"] for c in manifest["cells"]] == [r["run_id"] for r in rows]
        assert all({k for k, _ in c["params"]} == names for c in manifest["cells"])
        assert all(set(r.params) == names for r in after)
        assert all(
            {**r.params, **json.loads(o["params"])} == r.params for r, o in zip(after, rows)
        )  # what the row had is kept as it was
        assert list(_rows(folder)[0])[: len(RUN_COLUMNS)] == RUN_COLUMNS
        assert all(
            r[k] == o[k]
            for r, o in zip(_rows(folder), rows)
            for k in o
            if k not in ("schema", "params", "stream_s", "stream_mb")
        )  # every other value as it was
    ddp = read_runs(old / DDP)
    assert {(r["world_size"], r["backend"], r["nproc_per_node"]) for r in ddp} == {
        (1, "gloo", 1),
        (2, "gloo", 2),
    }  # a ddp world of the gloo `auto` gave on CPU
    assert _manifest(old / DDP)["matrix"]["seed_per_repeat"] is False  # every repeat seed 0
    stnn = read_runs(old / STNN)
    assert {r.params["state"] for r in stnn} == {"auto"}
    assert all(
        "x.stream_s" in r and "stream_s" not in r and r["cores"] and r["machine_id"] for r in stnn
    )  # stnn's figure as a workload's own, the machine from the manifest
    assert all(r["epochs_done"] == r["epochs"] for r in stnn if r["status"] == "ok")


def test_migrating_twice_is_migrating_once(old):
    assert f"-> {SCHEMA}" in migrate(old / DDP)
    written = {p.name: p.read_bytes() for p in (old / DDP).iterdir()}
    assert "already" in migrate(old / DDP)
    assert {p.name: p.read_bytes() for p in (old / DDP).iterdir()} == written


def test_a_resumed_migrated_study_runs_nothing_that_was_done(old):
    folder = old / DDP
    ids = [r["run_id"] for r in _rows(folder)]
    migrate(folder)
    plan = plan_resume(None, folder, envinfo.collect())
    assert [c.run_id for c in plan.cells] == ids and plan.remaining.cells == ()
    text = stbench("run", "--resume", folder, "--dry-run", check=True).stdout
    assert "nothing left to run" in text
    # a study cut short before its last row: only that cell is left, with the id it was planned with
    rows = _rows(folder)
    with open(folder / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows[:-1])
    left = plan_resume(None, folder, envinfo.collect()).remaining.cells
    assert [c.run_id for c in left] == ids[-1:]


@pytest.mark.parametrize("command", ["compare", "gate", "report", "run"])
def test_reading_an_older_folder_names_the_migration_in_one_line(old, tmp_path, command):
    folder = old / DDP
    args = {
        "compare": (folder,),
        "gate": (folder, folder),
        "run": ("--resume", folder),
        "report": (folder, "--out", tmp_path / "r"),
    }[command]
    proc = stbench(command, *args)
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and not proc.stdout and f"stbench migrate {folder}` once" in error
    assert "schema 1" in error


def test_a_folder_of_a_newer_schema_or_a_row_that_is_no_cell_is_left_as_it_is(old):
    folder = old / DDP
    rows = _rows(folder)
    rows[0]["batch_size"] = "999"  # a row that matches no cell of its manifest
    with open(folder / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    written = (folder / "runs.csv").read_bytes(), (folder / "manifest.json").read_bytes()
    with pytest.raises(StbenchError, match="match no cell of its manifest; nothing was rewritten"):
        migrate(folder)
    assert ((folder / "runs.csv").read_bytes(), (folder / "manifest.json").read_bytes()) == written
    manifest = _manifest(old / STNN)
    (old / STNN / "manifest.json").write_text(json.dumps({**manifest, "schema": SCHEMA + 1}))
    with pytest.raises(StbenchError, match="a newer stbench wrote it"):
        migrate(old / STNN)


LEVERS = ("interop_threads", "bind", "max_eval_samples")  # the parameters schema 3 added


def test_a_schema_2_folder_gets_the_cpu_levers_at_the_values_it_ran_with(old):
    """Schema 2 -> 3: the levers added since are written out at their defaults (what such a
    cell ran with); ids and every other value stay as they were."""
    folder = old / STNN
    migrate(folder)  # today's schema, then made as a schema-2 stbench wrote it
    manifest = _manifest(folder)
    manifest["schema"] = 2
    for cell in manifest["cells"]:
        cell["params"] = [p for p in cell["params"] if p[0] not in LEVERS]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rows = _rows(folder)
    for r in rows:
        r["schema"] = "2"
        r["params"] = json.dumps(
            {k: v for k, v in json.loads(r["params"]).items() if k not in LEVERS}
        )
    with open(folder / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(StbenchError, match="stbench migrate"):
        read_runs(folder)
    assert f"schema 2 -> {SCHEMA}" in migrate(folder)
    after = read_runs(folder)
    assert [r["run_id"] for r in after] == [r["run_id"] for r in rows]
    params = [r.params for r in after]
    assert all(
        (p["interop_threads"], p["bind"], p["max_eval_samples"]) == (0, "none", 0) for p in params
    )
    cells = _manifest(folder)["cells"]
    assert all({"interop_threads", "bind"} <= {k for k, _ in c["params"]} for c in cells)


def test_a_schema_3_folder_gets_its_words_as_columns_its_load_and_its_elapsed_times(tmp_path):
    shutil.copytree(SCHEMA3, tmp_path / "results")
    h100, epochs = tmp_path / "results" / H100, tmp_path / "results" / EPOCHS
    rows = _rows(h100)
    loaded = rows[0]["threads_why"].replace("physical cores,", "physical cores less 1 busy,")
    rows[0]["threads_why"] = loaded  # as a cell beside a busy core wrote it
    with open(h100 / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for folder in (h100, epochs):
        assert f"-> {SCHEMA}" in migrate(folder)
    after = read_runs(h100)
    math = {(r["device"], r["precision"]): (r["matmul_math"], r["conv_math"]) for r in after}
    assert math == {
        ("cuda", "matmul fp32, cudnn tf32"): ("fp32", "tf32"),  # cuDNN's TF32 by default
        ("cpu", "fp32"): ("fp32", "fp32"),
    }
    assert {r["threads_physical"] for r in after} == {16}
    assert [r["threads_for_load"] for r in after] == [True] + [False] * (len(after) - 1)
    # the load columns summed from system.csv, as a new row's are; elapsed time per evaluation
    cells = read_runs(epochs)
    assert all(r["others_cpu_pct"] is not None for r in cells)  # no load average sampled then
    with open(epochs / "epochs.csv", newline="") as f:
        series = list(csv.DictReader(f))
    first = [r for r in series if r["run_id"] == series[0]["run_id"]]
    sums = [sum(float(r["epoch_s"]) for r in first[: i + 1]) for i in range(len(first))]
    assert [float(r["elapsed_s"]) for r in first] == pytest.approx(sums)
    assert [r["epochs_done"] for r in first] == [r["epoch"] for r in first]
    assert migrate(epochs).endswith("left as it is")

"""Reading result folders is strict per study and forgiving across studies: a folder that cannot
be read (a runs.csv cut short, a number that is not one, no manifest) is named in one line on
stderr (its file, line and column, what was expected) and left out; the other studies are shown;
the exit code is 4; nothing is rewritten. `compare` with no folder shows the user's newest study."""

import csv
import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, stbench

REF = ROOT / "results" / "reference"
GOOD, OTHER = REF / "ref-cpu2-cnn-strain-epochs", REF / "ref-cpu2-cnn-strain-batch-sweep"


def digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()
    }


def cut_short(folder: Path) -> str:
    """runs.csv cut in the middle of its fourth line (a copy stopped mid-write)."""
    path = folder / "runs.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:40])
    return "line 4, column "


def not_a_number(folder: Path) -> str:
    """A wall time that is not a number, on the file's second row (line 3)."""
    path = folder / "runs.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows[1]["wall_s"] = "oops"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return "line 3, column wall_s: expected a number, found 'oops'"


def no_manifest(folder: Path) -> str:
    (folder / "manifest.json").unlink()
    return "has no manifest.json"


@pytest.fixture(params=[cut_short, not_a_number, no_manifest], ids=lambda f: f.__name__)
def results(request, tmp_path):
    """results/ holding one good study and one made bad (what is said of it)."""
    shutil.copytree(GOOD, tmp_path / "results" / "good")
    shutil.copytree(OTHER, tmp_path / "results" / "bad")
    said = request.param(tmp_path / "results" / "bad")
    return tmp_path / "results", said


def test_compare_shows_the_good_study_and_names_the_bad_one_in_a_line(results):
    folder, said = results
    before = digest(folder / "bad")
    proc = stbench("compare", folder)
    assert proc.returncode == 4, proc.stderr
    assert "## good\nstbench run cnn-strain" in proc.stdout and "## bad" not in proc.stdout
    (line,) = proc.stderr.splitlines()
    assert line.startswith("skipped: ") and str(folder / "bad") in line and said in line, line
    assert digest(folder / "bad") == before  # nothing is ever rewritten


@pytest.mark.slow
def test_report_and_gate_leave_the_bad_study_out_too(results, tmp_path):
    folder, said = results
    proc = stbench("report", folder, "--out", tmp_path / "report")
    assert proc.returncode == 4 and said in proc.stderr.splitlines()[-1], proc.stderr
    md = (tmp_path / "report" / "report.md").read_text()
    assert "\n## good\n" in md and "\n## bad\n" not in md and "Left out (could not be read):" in md
    # the headline figure is the shown study's own
    assert re.search(r"\]\(study-1-cnn-strain-[a-z-]+\.png\)\n\n\*[^*\n]*, from \[good\]", md)
    gate = stbench("gate", folder / "good", folder)
    assert gate.returncode == 4 and said in gate.stderr, gate.stderr
    assert gate.stdout.splitlines()[-1].startswith("0 regression(s), 0 inconclusive in 3")


def test_a_bad_study_alone_is_one_line_and_exit_2(results):
    folder, said = results
    proc = stbench("compare", folder / "bad")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and said in proc.stderr


def test_a_long_bad_value_is_shortened_so_that_its_line_stays_readable(tmp_path):
    shutil.copytree(GOOD, tmp_path / "study")
    path = tmp_path / "study" / "runs.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0]["params"] = rows[0]["params"][:-1]  # its closing brace lost: not JSON, ~800 chars
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    proc = stbench("compare", tmp_path / "study")
    said = "line 2, column params: expected the parameters as JSON, found '{"
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and said in proc.stderr
    assert "…" in proc.stderr and len(proc.stderr) < 250, proc.stderr


def test_compare_without_a_folder_shows_the_newest_study_of_the_users_own(tmp_path):
    """The committed references live in results/reference/, one level further down: never
    shown for a user's `compare`, whatever their age."""
    shutil.copytree(GOOD, tmp_path / "results" / "20260101-000000-vm-cnn-strain")
    shutil.copytree(OTHER, tmp_path / "results" / "20260102-000000-vm-cnn-strain")
    shutil.copytree(REF / "ref-cpu2-stnn-relations", tmp_path / "results" / "reference" / "ref-x")
    older = tmp_path / "results" / "20260102-000000-vm-cnn-strain" / "runs.csv"
    os.utime(older, (1, 1))  # written to long ago: the other is the newest
    proc = stbench("compare", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("## ")] == [
        "## 20260101-000000-vm-cnn-strain"
    ]
    listed = stbench("compare", tmp_path / "results", cwd=tmp_path).stdout
    assert "## 20260102-" in listed and "ref-x" not in listed
    empty = stbench("compare", cwd=tmp_path / "results" / "reference")
    assert empty.returncode == 2 and "no study in results/ yet" in empty.stderr


def test_every_reader_returns_the_row_type_and_a_study_context_is_never_a_column_of_a_row():
    """runs.csv read by the store, a folder read by the report, a whole tree read for compare:
    each gives `Run` rows as written; a study's prices and gpu-vs-cpu question are its
    `Context`, joined beside the rows in the study's table only."""
    from stbench.report.model import studies, with_context
    from stbench.report.read import read, read_folder
    from stbench.store.files import read_runs
    from stbench.store.rows import Run

    reference = ROOT / "results" / "reference"
    asked = reference / "ref-cpu2-cnn-strain-gpu-vs-cpu"
    folders, _ = read([reference])
    for rows in (read_runs(asked), read_folder(asked).runs, *[f.runs for f in folders]):
        assert rows and all(type(r) is Run for r in rows)
        assert not [c for r in rows for c in r.columns if c.startswith(("q_", "usd_"))]
    (study,) = studies([read_folder(asked)])
    assert not [c for c in study.runs.columns if c.startswith(("q_", "usd_"))]  # nor the table
    # the question is joined beside each row where a view reads it, and only there
    assert with_context(study, question=True)["q_size"].notna().all()


def test_every_series_reader_returns_its_row_dataclass():
    """epochs.csv and system.csv read back as the dataclasses their writers wrote (EpochRow,
    SystemRow), each field typed, a gap None; the report's folders carry them as such."""
    from stbench.report.read import read_folder
    from stbench.store.cell_result import EpochRow
    from stbench.store.files import read_series
    from stbench.store.rows import SystemRow

    epochs, system = read_series(GOOD, "epochs.csv"), read_series(GOOD, "system.csv")
    assert epochs and all(type(e) is EpochRow for e in epochs)
    assert system and all(type(s) is SystemRow for s in system)
    assert all(isinstance(e.steps, int) and isinstance(e.train_loss, float) for e in epochs)
    assert all(s.gpu_util_pct is None and isinstance(s.proc_rss_mb, float) for s in system)
    folder = read_folder(GOOD, ("epochs.csv", "system.csv"))
    assert folder.epochs == tuple(epochs) and folder.system == tuple(system)


def test_a_questions_predictions_read_back_as_their_dataclass():
    """predicted.csv's lines as runner/predictions.py wrote them (PredictedLine): a figure a
    float, whether a size fits a bool (None where no memory was predicted)."""
    from stbench.report.read import read_folder
    from stbench.store.files import read_predicted
    from stbench.store.rows import PredictedLine

    asked = REF / "ref-cpu2-lstm-era5-gpu-vs-cpu"
    lines = read_predicted(asked)
    assert lines and all(type(p) is PredictedLine for p in lines)
    assert all(p.fits is True and p.memory_mb > 0 and p.bound_ms > 0 for p in lines)
    assert {p.gpu for p in lines} == {"T4", "A100-80GB", "H100"}
    assert read_folder(asked).predicted == tuple(lines)
    assert read_predicted(GOOD) == []  # a study that asked no question has none


def test_a_row_is_a_frozen_dataclass_of_typed_fields_and_a_misspelt_column_is_an_error():
    """A field per column of runs.csv, typed as its part of RunRow declares it: a gap None, a
    flag a bool, a count an int; a name that is no column raises rather than reading as a gap."""
    import dataclasses

    from stbench.store.files import read_runs
    from stbench.store.rows import RUN_COLUMNS, Run

    (row, *_) = read_runs(ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-gpu-vs-cpu")
    assert dataclasses.is_dataclass(row) and {f.name for f in dataclasses.fields(Run)} == {
        *RUN_COLUMNS,
        "extras",
        "folder",
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "failed"
    assert isinstance(row.batch_size, int) and isinstance(row.samples_per_s, float)
    assert row.samples_per_s == row["samples_per_s"] and isinstance(row.params, dict)
    assert row.time_to_target_s is None and row.get("time_to_target_s", "gap") == "gap"
    assert row.contended in (True, False, None) and not isinstance(row.contended, str)
    with pytest.raises(KeyError, match="'samples_per_sec' is no column of runs.csv"):
        row["samples_per_sec"]
    with pytest.raises(KeyError):
        row.get("q_size")  # the question is the study's context, never a column of its rows
    assert row["x.never_reported"] is None  # a workload's own figures differ between workloads


@pytest.mark.parametrize("schema, said", [("3", "run the study again"), ("9", "a newer stbench")])
def test_a_folder_of_another_schema_is_one_line_and_read_by_no_reader(tmp_path, schema, said):
    """No reader carries a branch for another layout: the folder is named in one line."""
    folder = tmp_path / "old"
    shutil.copytree(ROOT / "results" / "reference" / "ref-cpu2-dcrnn-pems-gpu-vs-cpu", folder)
    text = (folder / "runs.csv").read_text().splitlines()
    rows = [text[0], *(f"{schema}{line[line.index(',') :]}" for line in text[1:])]
    (folder / "runs.csv").write_text("\n".join(rows) + "\n")
    done = stbench("compare", folder)
    assert done.returncode == 2 and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_parent_of_parents_of_result_folders_says_where_they_are(tmp_path):
    """`compare results/` where the studies lie a level further down (results/reference/...):
    one line that names the folder holding them."""
    from stbench.errors import StbenchError
    from stbench.store.files import find_folders

    (tmp_path / "reference" / "study").mkdir(parents=True)
    (tmp_path / "reference" / "study" / "runs.csv").write_text("schema,run_id\n")
    with pytest.raises(StbenchError, match=r"holds no result folder .*; .*reference holds some$"):
        find_folders([tmp_path])

"""Result files: a runs.csv whose header lacks a column stays aligned when a row that has it is
appended, and a workload's own figures become `x.` columns."""

import csv
import json
import subprocess
from dataclasses import replace

import pytest

from stbench.errors import StbenchError
from stbench.plan.spec import RunSpec
from stbench.store.cell_result import Figures
from stbench.store.files import append, read_csv, read_runs, write_cell
from stbench.store.rows import RUN_COLUMNS, SCHEMA, Identity, Machine, RunRow, run_of
from tests.helpers import ROOT, committed_copy, committed_folders


def test_an_append_with_nothing_to_add_or_remove_leaves_the_file_unwritten(tmp_path):
    """A window's empty epochs and samples rewrite nothing (each rewrite is an fsync); a rerun
    cell's earlier rows still go, and a new file still gets its header."""
    path = tmp_path / "epochs.csv"
    append(path, [], ["run_id", "epoch"])
    assert path.read_text() == "run_id,epoch\n"
    append(path, [{"run_id": "a", "epoch": 1}], ["run_id", "epoch"])
    before = path.stat().st_mtime_ns
    append(path, [], ["run_id", "epoch"], replacing="b")
    assert path.stat().st_mtime_ns == before  # untouched
    append(path, [], ["run_id", "epoch"], replacing="a")
    assert path.read_text() == "run_id,epoch\n"  # a's row gone


def test_a_cells_rows_go_at_the_files_end_and_a_rerun_cell_replaces_its_own(tmp_path):
    """A new cell's rows are written at the end of the file as it is (the same file: recording a
    cell costs its rows, not the study's), read back as written (quotes, commas, line breaks, a
    gap); rows of a cell run again replace its own only, matched by whole run_id."""
    path = tmp_path / "epochs.csv"
    columns = ["run_id", "epoch", "note"]
    note = 'a "quoted", two-line\nnote'
    append(path, [{"run_id": "cell-10", "epoch": 1, "note": note}], columns, replacing="cell-10")
    inode = path.stat().st_ino
    append(path, [{"run_id": "cell-2", "epoch": 1, "note": None}], columns, replacing="cell-2")
    assert path.stat().st_ino == inode  # appended in place
    # "cell-1" is in the file inside "cell-10": the rewrite compares whole run_ids
    append(path, [{"run_id": "cell-1", "epoch": 2}], columns, replacing="cell-1")
    got = [(r["run_id"], r["epoch"], r["note"]) for r in read_csv(path, columns)]
    assert got == [("cell-10", "1", note), ("cell-2", "1", ""), ("cell-1", "2", "")]
    append(path, [{"run_id": "cell-2", "epoch": 3}], columns, replacing="cell-2")  # run again
    got = [(r["run_id"], r["epoch"]) for r in read_csv(path, columns)]
    assert got == [("cell-10", "1"), ("cell-1", "2"), ("cell-2", "3")]


def test_an_append_the_disk_refuses_is_cut_back_off(tmp_path, monkeypatch):
    """A full disk failing a cell's append (here at its fsync) leaves the file as it was."""
    import errno
    import os

    path = tmp_path / "runs.csv"
    append(path, [{"run_id": "a", "epoch": 1}], ["run_id", "epoch"])
    before = path.read_bytes()

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        append(path, [{"run_id": "b", "epoch": 2}], ["run_id", "epoch"], replacing="b")
    assert path.read_bytes() == before


def test_append_follows_the_files_own_header(tmp_path):
    path = tmp_path / "runs.csv"
    old_columns = [c for c in RUN_COLUMNS if c not in ("steps_per_s", "predicted_mb")]
    row = {"schema": SCHEMA, "workload": "w", "device": "cpu"}
    append(path, [{**row, "run_id": "a", "status": "ok"}], old_columns)
    append(
        path,
        [{**row, "run_id": "b", "status": "failed", "steps_per_s": 3.0, "reason": "x"}],
        RUN_COLUMNS,
    )
    rows = read_runs(tmp_path)
    assert (
        [r["run_id"] for r in rows] == ["a", "b"]
        and rows[1]["status"] == "failed"
        and rows[1]["reason"] == "x"
    )
    # the old header keeps its order; what it lacked is added at the end, nothing shifted or dropped
    header = path.read_text().splitlines()[0].split(",")
    assert header[: len(old_columns)] == old_columns and header[len(old_columns) :] == [
        "steps_per_s",
        "predicted_mb",
    ]
    assert rows[0]["steps_per_s"] is None and rows[1]["steps_per_s"] == 3.0


def test_workload_figures_are_prefixed_columns(tmp_path):
    identity = Identity("r1", "w", "cpu", "single", 1, 1, 8, 8, 1, 0, 0, "default", "{}")
    machine = Machine("h", "cpu model", 0, "2.13", None, None)
    row = RunRow(identity, "ok", "", machine, Figures(wall_s=1.5), extras={"stream_s": 0.25})
    write_cell(tmp_path, row, [], [])
    second = RunRow(replace(identity, run_id="r2"), "ok", "", machine, extras={"other": 2.0})
    write_cell(tmp_path, second, [], [])
    with open(tmp_path / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert (
        rows[0]["x.stream_s"] == "0.25" and rows[0]["wall_s"] == "1.5" and rows[0]["x.other"] == ""
    )
    assert rows[1]["x.other"] == "2.0" and rows[1]["x.stream_s"] == ""


def test_the_row_a_study_returns_is_the_row_every_reader_reads_back(tmp_path):
    """One typed row: run_study hands on run_of(RunRow.record()) for a cell it ran,
    and read_runs reads the same Run back from runs.csv; a value that is not its column's type
    is one line naming the file, the line and the column."""
    identity = Identity("r1", "w", "cpu", "single", 1, 1, 8, 8, 1, 0, 0, "default", '{"n": 4}')
    machine = Machine("h", "cpu model", 0, "2.13", None, None, cores=2)
    row = RunRow(identity, "ok", "", machine, Figures(wall_s=1.5), extras={"stream_s": 0.25})
    write_cell(tmp_path, row, [], [])
    (back,) = read_runs(tmp_path)
    assert back == run_of(row.record(), str(tmp_path))
    assert (back["wall_s"], back["world_size"], back["cores"], back.params) == (1.5, 1, 2, {"n": 4})
    assert back["x.stream_s"] == 0.25 and back["reason"] is None and "x.other" not in back
    text = (tmp_path / "runs.csv").read_text().replace(",1.5,", ",fast,")
    (tmp_path / "runs.csv").write_text(text)
    with pytest.raises(
        StbenchError, match=r"runs.csv is corrupt: line 2, column wall_s: expected a number"
    ):
        read_runs(tmp_path)


def test_every_ranks_row_travels_through_json_and_a_cell_without_a_run_row_loses_them(tmp_path):
    from stbench.store.cell_result import CellResult, RankRow
    from stbench.store.files import prune_orphans, write_ranks

    ranks = tuple(
        RankRow("r1", i, i == 1, i, 10, 1.0 + i, 0.1, 0.0, 0.8 + i, 0.1, 0.2, 0.05, 2.0 + i)
        for i in range(2)
    )
    assert CellResult.from_json(CellResult("ok", ranks=ranks).to_json()).ranks == ranks
    write_ranks(tmp_path, list(ranks))
    rows = read_csv(tmp_path / "ranks.csv", ["run_id", "rank", "reported", "compute_s"])
    assert [(r["rank"], r["reported"], r["node"]) for r in rows] == [
        ("0", "False", "0"),
        ("1", "True", "1"),
    ]
    prune_orphans(tmp_path, {"r2"})  # r1 has no runs.csv row: a parent killed between the writes
    assert read_csv(tmp_path / "ranks.csv", ["run_id"]) == []


REFERENCE = committed_folders()  # never a run a user made beside them


@pytest.mark.parametrize("folder", REFERENCE, ids=lambda p: p.name)
def test_committed_results_resume_and_travel(folder):
    """Every committed row is a cell of its manifest (the run_id the cell stores, what --resume
    matches), its epoch and system rows belong to a row, and no parameter names a path that
    only existed on the machine that ran it."""
    manifest = json.loads((folder / "manifest.json").read_text())
    cells = {RunSpec.from_dict(c).run_id: c for c in manifest["cells"]}
    rows = read_runs(folder)
    assert {r["run_id"] for r in rows} <= set(cells)
    for r in rows:
        assert r.params == dict(cells[r["run_id"]]["params"])
        assert not [v for v in r.params.values() if isinstance(v, str) and v.startswith("/")]
    for name in ("epochs.csv", "system.csv"):
        assert {r["run_id"] for r in read_csv(folder / name, ["run_id"])} <= {
            r["run_id"] for r in rows
        }


def _study(folder, workload="cnn-strain"):
    folder.mkdir(parents=True)
    (folder / "runs.csv").write_text("schema,run_id,workload,device,status\n")
    (folder / "manifest.json").write_text(json.dumps({"workload": workload}))


def test_a_run_a_user_made_beside_the_committed_folders_changes_nothing_the_tests_read(tmp_path):
    """The README has a new user run `stbench run cnn-strain` (results/<stamp>-…) before the tests;
    the tests read the reference folders only, however many runs sit beside them."""
    repo = tmp_path / "repo"
    _study(repo / "results" / "reference" / "ref-cpu2-a")
    before = committed_folders(repo)
    _study(
        repo / "results" / "20260101-120000-host-cnn-strain"
    )  # what `stbench run cnn-strain` writes
    assert committed_folders(repo) == before == [repo / "results" / "reference" / "ref-cpu2-a"]
    copy = committed_copy(tmp_path / "copy", repo)
    assert sorted(p.name for p in copy.iterdir()) == ["ref-cpu2-a"]


def test_the_tests_read_every_committed_folder():
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "results"], capture_output=True, text=True
    ).stdout
    folders = {f.split("/")[2] for f in listed.split() if f.count("/") > 2}
    # a tune is a folder of step studies (stbench tune), read through its steps
    tunes = {f.split("/")[2] for f in listed.split() if f.endswith("/tune.json")}
    assert folders - tunes == {f.name for f in REFERENCE}
    assert (
        len(REFERENCE) > 20 and len(tunes) == 8
    )  # each workload's, and again on the questions' engine (-300s)


def test_a_lines_file_without_the_columns_every_line_has_is_one_line_naming_them(tmp_path):
    """A predicted.csv cut short (no bounds) is refused, not read as lines of gaps; a column added
    later (a field with a default) may be absent from an older file."""
    from stbench.errors import StbenchError
    from stbench.store.files import read_lines
    from stbench.store.rows import PredictedLine

    path = tmp_path / "predicted.csv"
    path.write_text("gpu,variant,size,batch\nH100,SXM,128,128\n")
    with pytest.raises(StbenchError, match="header lacks gflop, launches, bound_ms"):
        read_lines(path, PredictedLine)
    columns = [
        f for f in PredictedLine.__dataclass_fields__ if f not in ("eager_op_us", "measured_here")
    ]
    path.write_text(
        ",".join(columns) + "\n" + ",".join("1" if c != "gpu" else "H100" for c in columns) + "\n"
    )
    (line,) = read_lines(path, PredictedLine)
    assert line.bound_ms == 1.0 and line.eager_op_us is None and line.measured_here is None

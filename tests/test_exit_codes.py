"""Exit codes a script can rely on: non-zero when a cell did not end ok (unless --expect names
its status), one line and exit 1 for a full disk with what was written still readable."""

import errno

import pytest

from stbench.cli import main
from stbench.runner import study
from stbench.store.files import read_runs
from stbench.store.rows import STATUSES, unexpected
from tests.helpers import stbench


def test_unexpected_counts_the_statuses_not_accepted():
    rows = [{"status": s} for s in ("ok", "oom", "oom", "skipped", "diverged")]
    assert unexpected(rows) == {"oom": 2, "skipped": 1, "diverged": 1}
    assert unexpected(rows, ("ok", "oom", "skipped")) == {"diverged": 1}
    assert set(STATUSES) >= {r["status"] for r in rows}


@pytest.mark.slow
def test_a_study_whose_every_cell_diverges_exits_non_zero(tmp_path):
    args = [
        "run",
        "cnn-strain",
        "--smoke",
        "--set",
        "lr=1e12",
        "--epochs",
        "1",
        "--set",
        "max_steps=8",
    ]
    proc = stbench(*args, "--out", tmp_path / "a")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "1 of 1 cells did not end ok (1 diverged)" in " ".join(proc.stderr.split())
    (folder,) = (tmp_path / "a").iterdir()
    assert [r["status"] for r in read_runs(folder)] == ["diverged"]
    # a study that looks for the edge accepts it
    assert stbench(*args, "--expect", "diverged", "--out", tmp_path / "b").returncode == 0


def test_an_unknown_expected_status_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "cnn-strain", "--smoke", "--expect", "crashed"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'crashed' is not a status; valid: diverged, oom" in err


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_what_was_written_stays_readable(tmp_path, monkeypatch, capsys):
    real, calls = study.write_cell, []

    def fill_up(folder, row, epochs, system):
        calls.append(row)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(folder / "runs.csv"))
        real(folder, row, epochs, system)

    monkeypatch.setattr(study, "write_cell", fill_up)
    argv = [
        "run",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "128",
        "--set",
        "max_steps=2",
        "--out",
        str(tmp_path / "out"),
    ]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot write" in err and "No space left on device" in err and "Traceback" not in err
    (folder,) = (tmp_path / "out").iterdir()
    assert [r["batch_size"] for r in read_runs(folder)] == [64]  # the first cell's row, intact
    monkeypatch.setattr(study, "write_cell", real)
    with pytest.raises(SystemExit) as info:
        main(["run", "--resume", str(folder)])
    assert info.value.code == 0
    assert sorted(r["batch_size"] for r in read_runs(folder)) == [64, 128]


def test_a_write_the_disk_refuses_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    """What a full disk does to a study's files (a 150 KB tmpfs fills on system.csv): the
    write fails, the file keeps what it held, and its `.NAME.PID.tmp` is gone."""
    import os

    from stbench.store import files

    path = tmp_path / "runs.csv"
    files.atomic_write(path, "schema,run_id\n1,a\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        files.atomic_write(path, "schema,run_id\n1,a\n1,b\n")
    assert info.value.errno == errno.ENOSPC
    assert path.read_text() == "schema,run_id\n1,a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]

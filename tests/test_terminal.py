"""Output that fits an 80-column terminal: no line longer, no value cut with '…'."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def narrow(*args, columns: int | None = 80, cwd=None) -> str:
    """stdout + stderr of the console script, with COLUMNS set (None: unset, as in a pipe)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = str(columns)
    exe = shutil.which("stbench") or str(Path(sys.executable).parent / "stbench")
    proc = subprocess.run(
        [exe, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def fits(text: str, columns: int) -> None:
    long = [line for line in text.splitlines() if len(line) > columns]
    assert not long, long[:3]
    assert "…" not in text, [line for line in text.splitlines() if "…" in line][:3]


def test_run_summary_fits_80_columns(tmp_path):
    text = narrow("run", "cnn-strain", "--smoke", "--out", tmp_path)
    fits(text, 80)
    header = next(line for line in text.splitlines() if "device" in line and "status" in line)
    assert "wall s" in header and "samples/s" in header
    row = next(line for line in text.splitlines() if re.search(r"\bcpu\b.*\bok\b", line))
    assert re.search(r"\d+\.\d\d", row)  # the wall time, whole


def test_profile_fits_80_columns_with_every_operator_name_whole(tmp_path):
    """A profile's sentences fold between words and a long operator name (a DataLoader's
    iterator's is 59 characters, a CUDA kernel's more) wraps inside its cell, its pieces the
    whole name read down the column; profile.md keeps each on one line. A path is one word,
    kept whole so it copies: the lines that hold one are the only longer ones."""
    text = narrow("profile", "cnn-strain", "--smoke", "--out", tmp_path)
    fits("\n".join(line for line in text.splitlines() if str(tmp_path) not in line), 80)
    (folder,) = tmp_path.iterdir()
    whole = (folder / "profile.md").read_text()
    assert operators(text) == operators(whole) and len(operators(whole)) == 10
    assert "Finding: compute took" in text


def operators(text: str) -> list[str]:
    """The top operators' names, a wrapped name's pieces (the lines whose calls are empty)
    joined; without spaces (a wrap at a space drops it)."""
    table = text.split("### Top operators", 1)[1].split("\n\n", 2)[1]
    names: list[str] = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[1]:
            names.append(cells[0].replace(" ", ""))
        else:
            names[-1] += cells[0].replace(" ", "")
    return names


@pytest.mark.slow
def test_a_narrower_terminal_drops_whole_columns(tmp_path):
    text = narrow(
        "run",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "32",
        "--set",
        "lr_warmup_steps=0,1",
        "--out",
        tmp_path,
        columns=50,
    )
    fits(
        text.split("cpu single batch")[0], 50
    )  # the table and the note (progress lines name the cell)
    assert "not shown:" in text and "strategy single" in text
    header = next(line for line in text.splitlines() if "device" in line and "status" in line)
    assert (
        "batch" in header and "lr_warmup_steps" in header
    )  # what tells the cells apart is kept first


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("list", "cnn-strain"),
        ("list", "dcrnn-pems"),
        ("list", "lstm-era5"),
        ("list", "stnn"),
    ],
)
def test_list_fits_80_columns(args):
    text = narrow(*args)
    fits(text, 80)
    if args == ("list",):
        names = [
            line.split()[0] for line in text.strip().splitlines()[:-1]
        ]  # one line each, then a hint
        assert {"cnn-strain", "dcrnn-pems", "lstm-era5", "stnn"} <= set(names) and len(
            names
        ) == len(set(names))
    else:
        assert "preset smoke:" in text and "max_steps" in text


def test_compare_fits_when_asked_and_stays_whole_in_a_pipe():
    fits(narrow("compare", "results/reference/ref-cpu2-stnn-relations", cwd=ROOT), 80)
    piped = narrow("compare", "results/reference/ref-cpu2-stnn-relations", cwd=ROOT, columns=None)
    assert max(map(len, piped.splitlines())) > 80  # not a terminal, no COLUMNS: every table whole


def test_compare_shows_time_to_target_where_a_run_reached_it():
    """A throughput study whose runs never reached the target keeps its column of 0/2 for --full."""
    reached = narrow("compare", "results/reference/ref-cpu2-cnn-strain-ttt", cwd=ROOT)
    missed = narrow("compare", "results/reference/ref-cpu2-cnn-strain-precision-compile", cwd=ROOT)
    full = narrow(
        "compare", "results/reference/ref-cpu2-cnn-strain-precision-compile", "--full", cwd=ROOT
    )
    assert "### time to target" in reached and "3/3" in reached
    assert "### time to target" not in missed and "0/2" in full


@pytest.mark.slow
def test_progress_into_a_log_is_one_line_per_finished_cell(tmp_path):
    """A Slurm or nohup log gets no live bar: each finished cell is a line as it ends."""
    text = narrow(
        "run",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "--rounds",
        "2",
        "--out",
        tmp_path,
        columns=None,
    )
    lines = [line for line in text.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in lines] == ["[1/2", "[2/2"]
    assert all(
        re.search(
            r"cpu single batch=\d+ epochs=1 round \d: ok in \d+\.\d s \(0:\d\d so far\)", line
        )
        for line in lines
    ), lines

"""`stbench compare` on the committed studies as a new user reads it at 80 columns: the hint to
--full first, each study headed by its folder and command and opened by its finding, the one
table that answers it, labels in numeric order, no paths of the machine that ran it."""

import json
import re
from pathlib import Path

import pytest

from stbench.store.results import command_text
from tests.helpers import committed_folders
from tests.test_terminal import fits, narrow

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def reference():
    """`compare results/reference` at 80 columns: the tunes' answers, then every committed
    study (what a user ran into results/ is beside that folder, no part of a test)."""
    return narrow("compare", Path("results") / "reference", cwd=ROOT)


@pytest.fixture(scope="module")
def committed(reference):
    """The committed reference studies' part of it (a tune is a folder of studies)."""
    return reference[reference.index("Each study: its finding") :]


def sections(text: str) -> dict[str, str]:
    """Folder name -> that study's text."""
    parts = re.split(r"^## ", text, flags=re.M)
    return {p.split("\n", 1)[0].strip(): p for p in parts[1:]}


def test_every_line_fits_80_columns_and_the_hint_comes_first(committed):
    fits(committed, 80)
    assert committed.startswith("Each study: its finding, then the table behind it. --full adds")
    # said once, at the top (a study cut to its lines says how many more --full shows)
    assert "--full" not in committed.split("\n\n", 1)[1].replace("more lines with --full", "")


def test_each_study_takes_at_most_25_lines_of_an_80_column_screen(committed):
    studies = sections(committed)
    assert len(studies) >= 30
    for folder, text in studies.items():
        assert len(text.rstrip("\n").splitlines()) <= 25, folder
    cut = [t for t in studies.values() if "more lines with --full)" in t]
    assert cut and all(t.rstrip().endswith("more lines with --full)") for t in cut)


def test_each_study_is_headed_by_its_folder_and_command_and_opens_with_its_finding(committed):
    studies = sections(committed)
    assert len(studies) == len(committed_folders()) and all(s.startswith("ref-") for s in studies)
    for folder, text in studies.items():
        heading, finding = text.split("\n\n")[:2]
        assert heading.split("\n")[1].startswith("stbench "), folder  # the command under the folder
        assert finding.startswith("Finding: "), folder


def test_no_path_of_the_machine_that_ran_it(committed):
    assert not re.search(r"/(tmp|work|home)/|\.venv|--out", committed)
    assert "data=pacific_sst_anomaly_2deg_1970-2003.nc" in committed.replace("\n    ", " ")
    command = ["/x/bin/stbench", "run", "w", "--set", "data=/a/b.nc,c/d.nc", "--out=/tmp/o"]
    assert command_text(command) == "stbench run w --set data=b.nc,d.nc"


def test_the_ddp_study_shows_speedup_efficiency_and_sync(committed):
    ddp = sections(committed)["ref-cpu2-cnn-strain-ddp"]
    assert "Finding: At 2 processes: 0.72x the samples/s of 1 process (no significant" in ddp
    header = next(line for line in ddp.splitlines() if line.startswith("| world"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "world",
        "samples/s",
        "speedup",
        "efficiency",
        "sync",
    ]
    assert "| 2       | 18,524      | 0.72x (not significant) | 36%          | 33.0%  |" in ddp


def test_memory_studies_show_memory_and_the_batch_sweep_samples_per_second(committed):
    studies = sections(committed)
    for folder, column in (
        ("ref-cpu2-dcrnn-pems-bay-memory", "peak RSS MiB"),
        ("ref-cpu2-dcrnn-pems-checkpoint", "model state + activations MiB"),
        ("ref-cpu2-cnn-strain-strategies", "model state + activations MiB"),
    ):
        assert f"| {column} " in studies[folder] and "wall_s" not in studies[folder], folder
    bay = studies["ref-cpu2-dcrnn-pems-bay-memory"]
    assert "| data MiB " in bay and "3.27x less than batching=base" in bay.replace("\n", " ")
    sweep = studies["ref-cpu2-cnn-strain-batch-sweep"]
    assert "| batch_size   | samples/s " in sweep and "The knee looks to be at batch 150" in (
        sweep.replace("\n", " ")
    )


def test_labels_sort_as_numbers(committed):
    long = sections(committed)["ref-cpu2-stnn-sparse-long"]
    grids = re.findall(r"^\| (\d+x\d+) ", long, flags=re.M)
    assert grids == ["30x84", "60x168", "180x360"]
    sizes = re.findall(
        r"^\| \w+ +\| (2k7|11k) ", sections(committed)["ref-cpu2-dcrnn-pems-sizes"], flags=re.M
    )
    assert sizes == ["2k7", "11k", "2k7", "11k"]


def test_full_keeps_every_table_after_the_finding():
    full = narrow(
        "compare", "results/reference/ref-cpu2-cnn-strain-ddp", "--full", cwd=ROOT, columns=None
    )
    assert full.startswith("## ref-cpu2-cnn-strain-ddp\nstbench run cnn-strain")
    titles = re.findall(r"^### (.*)$", full, flags=re.M)
    assert titles[0].startswith("data-parallel scaling against the smallest world: speedup")
    assert any(t.startswith("wall time (s)") for t in titles) and any(
        t.startswith("where the time went") for t in titles
    )
    assert "ms_per_sync" in full  # the scaling table whole


def test_an_incomplete_study_says_so_first_with_its_resume_line(tmp_path):
    """An interrupted study (1 of 2 cells) read as 'One cell, 1 run' with no word that
    it was not finished."""
    import json
    import shutil

    from stbench.report import read
    from stbench.report.model import studies
    from stbench.report.view import view
    from tests.helpers import committed_folders

    source = next(f for f in committed_folders() if f.name == "ref-cpu2-cnn-strain-epochs")
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = (folder / "runs.csv").read_text().splitlines()
    (folder / "runs.csv").write_text("\n".join(rows[:2]) + "\n")  # one row of many cells
    (study,) = studies([read.read_folder(folder)])
    text = view(study).finding.text
    assert text.startswith(
        f"Incomplete: {folder.name} has 1 of its {len(manifest['cells'])} cells' rows "
        f"(finish it: stbench run --resume {folder}). "
    )


def test_a_predicted_csv_it_cannot_read_is_flagged_and_the_measured_answer_stands(tmp_path):
    """A question's predicted.csv cut short: the answer has no GPU predictions and one flag
    naming the file and what it lacks, where it had left them out without a word."""
    import shutil

    import pandas as pd

    from stbench.report import read
    from stbench.report.model import studies
    from stbench.report.view import view

    folder = tmp_path / "q"
    shutil.copytree(ROOT / "results" / "reference" / "ref-cpu2-lstm-era5-gpu-vs-cpu", folder)
    (whole,) = studies([read.read_folder(folder)])
    assert not whole.unread and not whole.predicted.empty
    lines = pd.read_csv(folder / "predicted.csv").drop(columns=["bound_ms"])
    lines.to_csv(folder / "predicted.csv", index=False)
    (study,) = studies([read.read_folder(folder)])
    found = view(study)
    assert study.predicted.empty and found.finding.text == view(whole).finding.text
    (flag,) = [f for f in found.finding.flags if "predicted.csv" in f]
    assert "is corrupt: header lacks bound_ms" in flag and "stands without" in flag


def test_compare_of_the_references_answers_every_tune_first_naming_its_best_configuration(
    reference,
):
    """compare results/reference/ shows a tune by its answer (the best configuration, its gain,
    the options that reproduce it); its step studies only with --full, where each is a study."""
    from tests.helpers import stbench

    text = reference
    tunes = [f.parent.name for f in (ROOT / "results" / "reference").glob("*/tune.json")]
    assert len(tunes) == 8  # each workload's, and each again on the questions' engine (-300s)
    for name in tunes:
        head = text.split(f"## {name} (a tune: its answer; its steps with --full)\n", 1)
        assert len(head) == 2, name
        answer = head[1].split("\n## ", 1)[0]
        said = " ".join(answer.split())  # folded at 80 columns
        # the best configuration, or the defaults kept where some step did not conclude
        assert "best configuration" in said or "torch's defaults stay" in said, name
        assert "Reproduce: stbench run " in said
        spec = json.loads((ROOT / "results" / "reference" / name / "tune.json").read_text())
        # headed by the command that asks it again: its options, not its workload alone
        command = answer.split("\n\n", 1)[0].split()  # folded as it is shown
        assert command[:3] == ["stbench", "tune", spec["spec"]["workload"]], command
        assert command[command.index("--budget") + 1] == f"{spec['spec']['budget_s']:g}"
        assert f"## {name}/" not in text and "## 0" not in text  # no step study
    assert text.index("(a tune: its answer") < text.index("Each study: its finding")
    one = ROOT / "results" / "reference" / tunes[0]
    alone = stbench("compare", one, check=True).stdout
    assert alone.count("\n## ") + alone.startswith("## ") == 1  # its answer only
    full = stbench("compare", one, "--full", check=True).stdout
    assert full.count("## ") > 1  # and every step as a study


def test_a_table_asked_for_by_name_is_shown_whole_before_the_predictions(capsys, monkeypatch):
    """--rows/--cols/--metric name the table a user wants: a question's answer and its GPU
    predictions filled the 25 lines a study gets, and the table asked for was cut off."""
    from stbench.cli import main
    from tests.helpers import ROOT

    monkeypatch.setenv("COLUMNS", "80")
    study = ROOT / "results" / "reference" / "ref-cpu2-cnn-strain-gpu-vs-cpu"
    asked = ["--rows", "batch_size", "--cols", "precision", "--metric", "samples_per_s"]
    with pytest.raises(SystemExit) as done:
        main(["compare", str(study), *asked])
    shown = capsys.readouterr().out
    assert done.value.code == 0
    table = shown.index("### samples_per_s (median")
    assert table < shown.index("### PREDICTED on GPUs") and "more lines with --full" not in shown
    assert "| bf16" in shown[table:] or "bf16 " in shown[table:]


def test_a_tunes_steps_keep_their_order_when_one_was_made_by_its_resume(tmp_path, capsys):
    """A step made by `tune --resume` has that command in its manifest: ordered by command, it
    came before the tune's first step in `compare --full`; its number orders it."""
    import shutil

    from stbench.cli import main
    from tests.helpers import ROOT

    tune = tmp_path / "ref-cpu2-cnn-strain-tune"
    shutil.copytree(ROOT / "results" / "reference" / tune.name, tune)
    resumed = tune / "05-compile" / "manifest.json"
    manifest = json.loads(resumed.read_text())
    manifest["command"] = ["stbench", "tune", "--resume", str(tune)]
    resumed.write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as done:
        main(["compare", str(tune), "--full"])
    assert done.value.code == 0
    heads = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"## {tune.name}/")]
    steps = sorted(p.name for p in tune.iterdir() if p.is_dir())
    assert [x.split("/", 1)[1].split()[0] for x in heads] == steps

"""The installed `stbench` command as a user runs it: a real smoke study, compare, bad input."""

import hashlib
import json

import numpy as np
import pytest

from stbench.store.rows import SCHEMA
from tests.helpers import stbench

FILES = ("manifest.json", "runs.csv", "epochs.csv", "system.csv")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """One real smoke matrix, shared by the tests below (they must not change it)."""
    out = tmp_path_factory.mktemp("results")
    stbench(
        "run",
        "cnn-strain",
        "--smoke",
        "--epochs",
        "1",
        "2",
        "--batch-size",
        "32",
        "64",
        "--out",
        out,
        check=True,
    )
    (folder,) = out.iterdir()
    return folder


def digest(folder):
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in FILES}


def test_run_writes_all_four_files(study):
    import csv

    assert all((study / f).is_file() for f in FILES)
    runs = list(csv.DictReader(open(study / "runs.csv")))
    assert [(r["batch_size"], r["epochs"]) for r in runs] == [
        ("32", "1"),
        ("32", "2"),
        ("64", "1"),
        ("64", "2"),
    ]
    assert all(r["status"] == "ok" and r["schema"] == str(SCHEMA) for r in runs)
    assert all(float(r["samples_per_s"]) > 0 and float(r["peak_fraction"]) > 0 for r in runs)
    epochs = list(csv.DictReader(open(study / "epochs.csv")))
    assert len(epochs) == 1 + 2 + 1 + 2
    assert len(list(csv.DictReader(open(study / "system.csv")))) >= 1
    manifest = json.loads((study / "manifest.json").read_text())
    assert manifest["workload"] == "cnn-strain" and len(manifest["cells"]) == 4
    assert manifest["peaks"]["cpu"]["matmul_gflops"] > 0 and manifest["env"]["cores_logical"] >= 1


def test_compare_reads_the_study(study, tmp_path):
    proc = stbench("compare", study.parent, "--out", tmp_path, "--plot", check=True)
    # the hint to --full first; one section per study, headed by its folder and command, its
    # finding first and then the one table behind it (a batch sweep: samples/s)
    hint, headline = proc.stdout.split("\n\n", 1)
    assert "--full" in hint and headline.startswith(
        f"## {study.name}\nstbench run cnn-strain --smoke"
    )
    # a busy machine (a CI runner, another suite) may make the finding a contention decline
    finding = headline.split("\n\n")[1]
    assert finding.startswith("Finding: Samples/s goes from ") or (
        finding.startswith("Finding: Cannot conclude: ") and "ran contended" in finding
    )
    assert (
        "\n### samples/s per batch size (median ± 95% CI" in headline
        and "### wall time (s)" not in headline
    )
    assert "| epochs   | batch_size   | samples/s " in headline
    full = (tmp_path / "compare.md").read_text()
    assert (
        full.startswith(headline)
        and "### where the time went" in full
        and "where the time went" not in headline
    )
    assert " cores) " in full  # the CPU by name
    assert (tmp_path / "compare.csv").read_text().startswith("workload,device,")
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "cnn-strain-memory.png",
        "cnn-strain-phases.png",
        "cnn-strain-time-vs-epochs.png",
    ]


@pytest.mark.slow
def test_bad_data_files_leave_results_intact(study, tmp_path):
    before = digest(study)
    corrupt = tmp_path / "curves.npz"
    corrupt.write_bytes(b"not a zip archive")
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, X=np.zeros((4, 2, 201), np.float32), Y=np.zeros((4, 2), np.float32))
    cases = {
        f"data={tmp_path / 'missing.npz'}": "does not exist",
        f"data={corrupt}": "is corrupt or unreadable (BadZipFile",
        f"data={wrong}": "X is (4, 2, 201) and Y is (4, 2); expected X (N,3,201) and Y (N,2)",
    }
    for setting, message in cases.items():
        proc = stbench("run", "cnn-strain", "--smoke", "--set", setting, "--out", study.parent)
        assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, (
            proc.stderr
        )
    assert len(list(study.parent.iterdir())) == 1  # no half-made result folder
    assert digest(study) == before


def test_cuda_without_gpu_is_refused(study):
    proc = stbench("run", "cnn-strain", "--smoke", "--device", "cuda", "--out", study.parent)
    assert proc.returncode == 2
    assert (
        proc.stderr == "error: nothing to run: cuda requested, but no GPU is visible "
        "(torch.cuda.is_available() is False)\n"
    )


@pytest.mark.slow
def test_corrupt_results_are_named_and_untouched(study, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in FILES:
        (broken / f).write_bytes((study / f).read_bytes())
    (broken / "runs.csv").write_text("schema,run_id\n1,a,b,c\n")
    before = digest(broken)
    proc = stbench("compare", broken)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"results file {broken / 'runs.csv'} is corrupt" in proc.stderr
    proc = stbench("run", "cnn-strain", "--resume", broken)
    assert proc.returncode == 2 and "is corrupt" in proc.stderr
    (broken / "manifest.json").write_text("{ not json")
    proc = stbench("run", "cnn-strain", "--resume", broken)
    assert proc.returncode == 2 and "manifest.json is corrupt" in proc.stderr
    (broken / "manifest.json").write_bytes((study / "manifest.json").read_bytes())
    assert digest(broken) == {**before, "manifest.json": digest(study)["manifest.json"]}
    proc = stbench("compare", tmp_path / "nowhere")
    assert proc.returncode == 2 and "does not exist" in proc.stderr


@pytest.mark.slow
def test_resume_of_a_finished_study_adds_nothing(study):
    before = digest(study)
    stbench("run", "cnn-strain", "--resume", study, check=True)
    stbench("run", "--resume", study, check=True)  # the workload is the study's own
    assert (
        "nothing left to run" in stbench("run", "--resume", study, "--dry-run", check=True).stdout
    )
    assert digest(study) == before
    wrong = stbench("run", "stnn", "--resume", study)
    assert wrong.returncode == 2 and "holds a cnn-strain study, not stnn" in wrong.stderr
    neither = stbench("run")
    assert (
        neither.returncode == 2
        and neither.stderr.count("\n") == 1
        and "--resume FOLDER" in neither.stderr
    )
    assert digest(study) == before


@pytest.mark.slow
def test_list_and_env():
    listing = stbench("list", check=True).stdout
    assert (
        "cnn-strain" in listing and "lstm-era5" in listing and "lr_scaling" not in listing
    )  # one line each
    detail = stbench("list", "cnn-strain", check=True).stdout
    assert "large-batch" in detail and "lr_scaling" in detail
    env = stbench("env", check=True).stdout
    assert "GFLOP/s fp32 matmul" in env and "cores_logical" in env

"""Machine identity: hardware labels, rows of two machines never pooled, rows that name their
machine; integer and path parameters as researchers expect them. No torch."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from stbench.report.labels import short_cpu, short_gpu
from stbench.report.read import read_folder
from stbench.store.machine import fingerprint
from tests.helpers import compare_text, frame, stbench

REF = Path(__file__).parent.parent / "results" / "reference" / "ref-cpu2-cnn-strain-epochs"
XEON = "Intel(R) Xeon(R) Platinum 8480+"
MACHINE = ("host", "cpu_model", "cores", "gpu_names", "gpu_count", "torch")


@pytest.mark.parametrize(
    "model,short",
    [
        ("Intel(R) Xeon(R) Platinum 8480+", "Xeon 8480+"),
        ("AMD EPYC 7763 64-Core Processor", "EPYC 7763"),
        ("AMD EPYC", "EPYC"),
        ("12th Gen Intel(R) Core(TM) i7-12700H", "i7-12700H"),
        ("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", "Xeon 6148"),
        ("AMD Ryzen 5 5600G with Radeon Graphics", "Ryzen 5 5600G"),
        ("Apple M2 Pro", "Apple M2 Pro"),
    ],
)
def test_cpu_names_are_shortened(model, short):
    assert short_cpu(model) == short


@pytest.mark.parametrize(
    "name,short",
    [
        ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
        ("NVIDIA A40", "A40"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ],
)
def test_gpu_names_are_shortened(name, short):
    assert short_gpu(name) == short


def row(
    device, wall, host="vm", cpu="AMD EPYC", cores=2, gpu="", repeat=0, torch="2.13.0+cpu", **params
):
    return {
        "schema": "1",
        "run_id": f"{device}{host}{cpu}{repeat}",
        "workload": "w",
        "device": device,
        "device_name": gpu or "cpu",
        "strategy": "single",
        "world_size": 1,
        "batch_size": 64,
        "epochs": 1,
        "repeat": repeat,
        "params": json.dumps({"lr": 0.1, **params}),
        "status": "ok",
        "host": host,
        "cpu_model": cpu,
        "cores": cores,
        "gpu_count": 1 if gpu else 0,
        "gpu_names": gpu,
        "torch": torch,
        "wall_s": wall,
        "samples_per_s": 1.0,
        "data_s": 1.0,
        "h2d_s": 0.0,
        "compute_s": 3.0,
        "sync_s": 0.0,
        "eval_s": 0.0,
        "train_s": 4.0,
        "machine_id": fingerprint(host, cpu, cores, gpu, 1 if gpu else 0, torch),
    }


def test_published_layout_cpu_then_gpus_by_name():
    rows = [
        row("cpu", 40.0),
        row("cuda", 4.0, host="g1", cpu=XEON, gpu="Tesla T4"),
        row("cuda", 2.0, host="g2", cpu=XEON, gpu="NVIDIA A100-SXM4-80GB"),
    ]
    text = compare_text(rows, baseline="device=cpu")
    assert (
        "| epochs   | EPYC (2 cores)   | A100-SXM4-80GB   | T4   "
        "| A100-SXM4-80GB vs EPYC (2 cores)   | T4 vs EPYC (2 cores)            |\n"
        "|:---------|:-----------------|:-----------------|:-----"
        "|:-----------------------------------|:--------------------------------|\n"
        "| 1        | 40.00            | 2.00             | 4.00 "
        "| 20.00x faster (not significant)    | 10.00x faster (not significant) |" in text
    )


def test_a_shared_name_gets_the_host_and_a_shared_host_the_fingerprint():
    rows = [
        row("cuda", 4.0, host="n1", gpu="Tesla T4"),
        row("cuda", 5.0, host="n2", gpu="Tesla T4"),
        row("cpu", 9.0, torch="2.3.0"),
        row("cpu", 8.0, torch="2.13.0+cpu"),
    ]
    labels = dict(zip(frame(rows)["wall_s"], frame(rows)["label"]))
    assert labels[4.0] == "T4@n1" and labels[5.0] == "T4@n2"
    assert labels[9.0] != labels[8.0] and labels[9.0].startswith("EPYC (2 cores)@vm#")


def test_integer_parameters_print_as_integers_and_paths_by_name():
    rows = [
        row("cpu", 1.0, n_samples=400_000, data="/work/shared/data/pst/sst.nc"),
        row("cpu", 2.0, repeat=1, n_samples=200_000, data="generated"),
        row("cpu", 3.0, repeat=2),
    ]
    text = compare_text(rows)
    assert "| 400000 " in text and "| 200000 " in text and "400000.0" not in text
    assert "| sst.nc " in text and "/work/shared" not in text
    assert "| -  " in text  # the row that lacks the parameters


def copy_with_cpu(src: Path, dst: Path, cpu: str) -> Path:
    """A copy of a committed result folder whose rows and manifest name another CPU."""
    shutil.copytree(src, dst)
    with open(dst / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # that machine's rows, with its fingerprint
        r["cpu_model"] = cpu
        r["machine_id"] = fingerprint(*(r[k] for k in MACHINE))
    with open(dst / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["env"]["cpu_model"] = cpu
    (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def test_rows_carry_their_machine_and_its_fingerprint():
    """A row names its machine (a folder of schema 1, written before these fields existed, got
    them from its manifest's inventory when it was migrated)."""
    rows = read_folder(REF).runs
    assert {r["cores"] for r in rows} == {2} and len({r["machine_id"] for r in rows}) == 1


def test_two_machines_with_one_host_name_are_two_columns(tmp_path):
    """The issue's case: a run on a 2-core Xeon VM and the reference from a 2-core EPYC VM, both
    host `vm`, once pooled as repeats of one cell."""
    shutil.copytree(REF, tmp_path / "epyc")
    copy_with_cpu(REF, tmp_path / "xeon", XEON)
    text = stbench("compare", tmp_path, "--full", check=True).stdout
    assert "| epochs   | EPYC (2 cores)   | Xeon 8480+ (2 cores)   |" in text
    assert (
        "Finding: Xeon 8480+ (2 cores) against EPYC (2 cores): " in text
    )  # a study of hardware now
    one = stbench("compare", tmp_path / "epyc", check=True).stdout

    def cells(text):  # the wall-time table's lines
        table = text.split("### wall time (s)")[1].split("\n\n")[1]
        return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]

    # each column holds its own folder's 3 repeats (the copy's are the same numbers), not 6 pooled
    assert [[e, v, v] for e, v in cells(one)] == cells(text)
    assert all("±" in v for _, v in cells(one))

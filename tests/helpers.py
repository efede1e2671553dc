"""Helpers shared by tests."""

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def stbench(*args, cwd=None, check=False, timeout=300):
    """The installed console script, as a user runs it."""
    exe = shutil.which("stbench") or str(Path(sys.executable).parent / "stbench")
    env = {
        k: v for k, v in os.environ.items() if k != "COLUMNS"
    }  # output as in a pipe, whatever the terminal
    proc = subprocess.run(
        [exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"stbench {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc


def in_process(capsys, *args) -> tuple[int, str, str]:
    """The console script's entry point in this process (a process of its own imports stbench
    afresh, ~1.2 s): its exit code, stdout and stderr."""
    import pytest

    from stbench.cli import main

    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    said = capsys.readouterr()
    return done.value.code, said.out, said.err


# a user's own card, in the file format `--gpus FILE` reads (docs/gpu-predictions.md)
MY_CARD = (
    '[[gpu]]\nname = "MyCard"\nvariant = "PCIe"\nfp32_tflops = 10\ntf32_tflops = 0\n'
    "bf16_tflops = 40\nmemory_gbps = 500\nmemory_gb = 24\nl2_mb = 6\n"
    'host_link_gbps = 31.5\nsource = "my own measurements, 2026"\n'
)


def one_study(out: Path, *args, timeout=300) -> Path:
    """`stbench run ARGS --out OUT`, which must exit 0, and the one result folder it wrote."""
    stbench("run", *args, "--out", out, check=True, timeout=timeout)
    (folder,) = Path(out).iterdir()
    return folder


def preset_params(workload: str, preset: str = "smoke", **overrides) -> dict:
    """A workload's parameter defaults with a preset applied (its engine keys left out)."""
    from stbench.plan.planner import preset_params as resolve

    return resolve(workload, preset, **overrides)[0]


def train(task, spec, device="cpu", step_hook=None):
    """A cell's training in this process: the trainer's CellResult."""
    import torch

    from stbench.child.trainer import LoopConfig, Trainer

    return Trainer(
        task, LoopConfig.from_spec(spec), torch.device(device), step_hook=step_hook
    ).run()


def committed_folders(root: Path = ROOT) -> list[Path]:
    """The committed reference folders, root/results/reference/*: never a study a user made
    (`stbench run` writes results/<stamp>-… beside that folder, as the README has a new user do
    before the tests)."""
    return sorted(p.parent for p in (root / "results" / "reference").glob("*/runs.csv"))


def committed_copy(dest: Path, root: Path = ROOT) -> Path:
    """dest/results holding copies of the committed result folders only: what a command that
    takes the parent of result folders (`stbench report results/`) is given in a test."""
    out = dest / "results"
    out.mkdir(parents=True, exist_ok=True)
    for folder in committed_folders(root):
        shutil.copytree(folder, out / folder.name)
    return out


def study_of(rows: list[dict], name: str = "", question: str = ""):
    """Hand-made runs.csv rows (text, as read; or values, as written) as the report's Study."""
    from stbench.report.model import study
    from stbench.store.rows import run_of

    return study([run_of(r, str(r.get("study", ""))) for r in rows], name, question)


def frame(rows: list[dict]):
    """Hand-made rows as a study's table (report.model.frame)."""
    return study_of(rows).runs


def compare_text(runs: list[dict], width: int | None = None, full: bool = True, **options) -> str:
    """What `stbench compare --full` prints of hand-made rows (one study), with its options
    (metric, rows, cols, baseline)."""
    from stbench.report.text import to_markdown, views_of
    from stbench.report.view import Options

    return to_markdown(views_of([study_of(runs)], Options(every=full, **options)), width, full)


@functools.cache
def committed_studies(root: Path = ROOT):
    """The committed reference folders read as compare reads them (report.model.studies); the
    same studies for every test that asks (read them, never change them)."""
    from stbench.report.model import studies
    from stbench.report.read import read

    folders, skipped = read(committed_folders(root), ())
    assert not skipped, skipped
    return tuple(studies(folders))


# -- the GPU acceptance's checks on hand-made folders (test_acceptance_checks, _rehearsal) -----
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled"


def acceptance_folder(step: Path, rows_: list[dict], study: str = "study") -> Path:
    """A step's folder holding one study with these rows (defaults: an ok cnn-strain cuda cell)."""
    import csv

    from stbench.store.rows import RUN_COLUMNS, SCHEMA

    folder = step / study
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUN_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(
            {
                "schema": SCHEMA,
                "status": "ok",
                "strategy": "single",
                "batch_size": 64,
                "epochs": 1,
                "params": "{}",
                "workload": "cnn-strain",
                "device": "cuda",
                "backend": "gloo",
                "world_size": 1,
                "nodes": 1,
                "seed": 0,
                **r,
            }
            for r in rows_
        )
    return step


def acceptance_check(name, judge, folder, **kw):
    """The one Check a judge gives on a folder, as the acceptance runs it."""
    from benchmarks.acceptance.verdicts import run_check

    (check,) = run_check(name, judge, folder, **kw)
    return check

"""Helpers shared by tests."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def stbench(*args, cwd=None, check=False, timeout=300):
    """The installed console script, as a user runs it."""
    exe = shutil.which("stbench") or str(Path(sys.executable).parent / "stbench")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # output as in a pipe, whatever the terminal
    proc = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"stbench {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def preset_params(workload: str, preset: str = "smoke", **overrides) -> dict:
    """A workload's parameter defaults with a preset applied (its engine keys left out)."""
    from stbench.plan.planner import preset_params as resolve

    return resolve(workload, preset, **overrides)[0]


def train(task, spec, device="cpu", step_hook=None):
    """A cell's training in this process: the trainer's CellResult."""
    import torch

    from stbench.child.trainer import LoopConfig, Trainer

    return Trainer(task, LoopConfig.from_spec(spec), torch.device(device), step_hook=step_hook).run()


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

"""Helpers shared by tests."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


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

"""Helpers shared by tests."""

import shutil
import subprocess
import sys
from pathlib import Path


def stbench(*args, cwd=None, check=False, timeout=300):
    """The installed console script, as a user runs it."""
    exe = shutil.which("stbench") or str(Path(sys.executable).parent / "stbench")
    proc = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"stbench {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc

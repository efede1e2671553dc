"""One study folder, one owner: a second writer gets one line naming the owner and exit 2; a lock
whose owner is gone (a dead pid, a SIGKILLed parent) is taken over."""

import hashlib
import json
import os
import socket
import subprocess
import sys

import pytest

from stbench.errors import StbenchError
from stbench.plan.planner import Request, plan_new
from stbench.runner import envinfo
from stbench.runner.lock import FolderLock
from stbench.store.manifest import write_manifest
from tests.helpers import stbench

HOLD = (
    "import sys, time; from pathlib import Path; from stbench.runner.lock import FolderLock\n"
    "with FolderLock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(120)"
)


@pytest.fixture
def owner(tmp_path):
    """Another process that owns tmp_path/study."""
    folder = tmp_path / "study"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "locked\n"
    yield folder, proc
    proc.kill()
    proc.wait()


def test_a_second_owner_is_refused_until_the_first_is_gone(owner):
    folder, proc = owner
    with pytest.raises(StbenchError) as refused:
        with FolderLock(folder):
            pass
    assert str(refused.value).startswith(
        f"{folder} is being run by pid {proc.pid} on {socket.gethostname()} since "
    )
    proc.kill()  # SIGKILL: no chance to clean up; the kernel drops its lock
    proc.wait()
    with FolderLock(folder):
        assert json.loads((folder / ".lock").read_text())["pid"] == os.getpid()
    assert (folder / ".lock").read_text() == ""  # released on exit


def test_a_stale_lock_file_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tmp_path.joinpath(".lock").write_text(
        json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": "x"})
    )
    with FolderLock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()


def test_a_second_writer_gets_one_line_and_writes_nothing(owner):
    folder, proc = owner
    env = envinfo.collect()
    p = plan_new(Request("faulty", smoke=True, out=folder.parent), env)
    write_manifest(folder, {**p.manifest, "timeout_s": None})
    before = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir()}
    run = stbench("run", "faulty", "--resume", folder)
    assert run.returncode == 2
    assert run.stderr == (
        f"error: {folder} is being run by pid {proc.pid} on {socket.gethostname()} since "
        f"{json.loads((folder / '.lock').read_text())['since']}; "
        "wait for it to finish, or stop it first\n"
    )
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir()} == before

"""One study folder, one owner: `.lock` in the folder, held by the parent that runs the study.

The lock is an exclusive `flock` on the file, so the kernel releases it whenever its owner ends,
SIGKILL included: a lock whose owner is gone is simply taken over. The file names the owner (pid,
host, since when) for the one line a second writer gets. Where the file system has no flock (some
parallel file systems), the recorded pid decides: a dead pid on this host is taken over.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
from pathlib import Path

from ..errors import StbenchError

NAME = ".lock"


def _owner(path: Path) -> dict:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}


def _alive_here(owner: dict) -> bool:
    """Whether the recorded owner may still run (on another host we cannot tell: assume so)."""
    if owner.get("host") != socket.gethostname():
        return bool(owner)
    try:
        os.kill(int(owner.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return bool(owner.get("pid"))


class FolderLock:
    """`with FolderLock(folder):` — the folder is this process's until the block ends."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / NAME
        self.fd: int | None = None

    def _refuse(self, owner: dict) -> None:
        since = f" since {owner['since']}" if owner.get("since") else ""
        raise StbenchError(
            f"{self.path.parent} is being run by pid {owner.get('pid', '?')} on "
            f"{owner.get('host', '?')}{since}; wait for it to finish, or stop it first"
        )

    def __enter__(self) -> FolderLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = _owner(self.path)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) or _alive_here(owner):
                os.close(fd)
                self._refuse(owner)
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)  # released: no owner to name
            os.close(self.fd)  # closing releases the flock
            self.fd = None

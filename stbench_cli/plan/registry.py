"""The workload registry: Python entry points in the `stbench.workloads` group.

The built-ins are registered in stbench's own pyproject.toml exactly as a third-party
package registers one: `[project.entry-points."stbench.workloads"] name = "pkg.module:WORKLOAD"`.
A broken entry point fails here, in the parent, as one line, not as a failed cell.
"""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.metadata import EntryPoint, entry_points

from ..contract import Workload
from ..errors import StbenchError

GROUP = "stbench.workloads"


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, EntryPoint]:
    # The same distribution can be seen twice (an editable install's metadata, and a build
    # folder's); the same name must then point at the same object.
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def names() -> list[str]:
    return sorted(_entry_points())


@cache
def get(name: str) -> Workload:
    """The workload registered as `name`; StbenchError naming the valid ones otherwise."""
    eps = _entry_points()
    if name not in eps:
        raise StbenchError(f"unknown workload {name!r}; valid: {', '.join(names())}")
    try:
        workload = eps[name].load()
    except Exception as exc:  # an import error inside a plugin: name the entry point
        raise StbenchError(
            f"workload {name!r} ({eps[name].value}) cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(workload, Workload) or workload.name != name:
        raise StbenchError(
            f"entry point {name!r} ({eps[name].value}) is not a Workload named {name!r}"
        )
    return workload


def all_workloads() -> list[Workload]:
    return [get(n) for n in names()]

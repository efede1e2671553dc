"""The one exception type the CLI turns into a single clear line and a non-zero exit, the line
for what needs a package that only one of stbench's extras installs, and the one refusal of a
file where a command writes a folder."""

import importlib
from pathlib import Path

# the package -> the extra of pyproject.toml that installs it
EXTRAS = {
    "zarr": "era5",
    "gcsfs": "era5",
    "dask": "era5",
    "submitit": "cluster",
    "distributed": "cluster",
    "dask_jobqueue": "cluster",
    "h5py": "formats",
    "netCDF4": "formats",
    "tables": "formats",
    "mpi4py": "mpi",
}


class StbenchError(Exception):
    """A user-facing error: its message names what was wrong and what is valid."""


def needs(module: str, what: str) -> str:
    """'data=x.h5 needs h5py, which is not installed: pip install 'stbench[formats]''."""
    return (
        f"{what} needs {module}, which is not installed: "
        f"pip install 'stbench[{EXTRAS.get(module, 'all')}]'"
    )


def require(module: str, what: str, error: type[Exception] = StbenchError):
    """The module, imported; where it is missing, `error` (a workload's data check raises
    ValueError) with the line that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise error(needs(module, what)) from None


def a_folder(path: Path, flag: str = "--out") -> Path:
    """`path`, where a command writes a folder: a file in its place is one line, the same in
    every command, before anything is read or written."""
    if path.exists() and not path.is_dir():
        raise StbenchError(f"{flag} {path} is a file; give a folder (it is made if missing)")
    return path


def a_result_folder(path: Path) -> Path:
    """`path`, a study's folder to finish (--resume): a missing one is one line, the same in
    every command that resumes."""
    if not path.is_dir():
        raise StbenchError(f"--resume {path}: no such result folder")
    return path

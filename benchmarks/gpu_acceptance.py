"""stbench's GPU acceptance on a lent GPU machine: install stbench, then run the acceptance
(`python -m benchmarks.acceptance`, benchmarks/acceptance/) in one command. docs/gpu-acceptance.md
has the commands; `--list` prints the steps and their caps.

    python3 benchmarks/gpu_acceptance.py --list
    python3 benchmarks/gpu_acceptance.py --wheels .whl --out OUT [--deadline S] [STEP ...]
    python3 benchmarks/gpu_acceptance.py --rehearse --out OUT [STEP ...]

The GPU machine has no package index: the modules the acceptance imports must be there
(REQUIRED: one line names what is missing and the `pip download` that brings it), and stbench
comes from a wheel built beforehand where pip works (`python3 -m pip wheel --no-deps -w .whl .`)
that must match this tree file for file (a stale wheel would measure old code).

--rehearse: the same run on a CPU machine, in a fresh venv built like the GPU machine
(gpu_machine.txt: no zarr, dask, gcsfs, netCDF4, tables, submitit), pip without an index,
stbench from a freshly built wheel, CUDA's availability faked (tests/fakecuda). Every step must
reach torch's own "Torch not compiled with CUDA enabled" and fail in no other way first.

Only the standard library here: stbench is not installed when this starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STARTED = time.time()  # the deadline counts from here: the install is inside the command's time
REQUIRED = (
    "torch",
    "numpy",
    "pandas",
    "scipy",
    "typer",
    "rich",
    "tabulate",
    "psutil",
    "pynvml",
    "matplotlib",
    "h5py",
    "xarray",
    "fsspec",
    "pytest",
)
DIST = {"pynvml": "nvidia-ml-py"}
ABSENT = ("zarr", "dask", "gcsfs", "netCDF4", "tables", "submitit")  # not on the GPU machine
DOWNLOAD = (
    "python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 "
    "--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d WHEELS"
)


def fail(message: str) -> None:
    print(f"gpu_acceptance: {message}", file=sys.stderr)
    sys.exit(2)


def pip(*args: str) -> bool:
    """pip, quietly, in this Python; whether it succeeded."""
    argv = [sys.executable, "-m", "pip", "-q", *args]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return subprocess.run(argv, **quiet).returncode == 0


def install(wheels: Path | None) -> None:
    """Check the modules, then install stbench from its wheel without an index or dependencies."""
    # this script runs under whatever python the GPU machine has, before stbench is installed
    if sys.version_info < (3, 10):  # noqa: UP036
        fail(f"stbench needs Python 3.10 or newer; this is {sys.version.split()[0]}")
    missing = [DIST.get(m, m) for m in REQUIRED if importlib.util.find_spec(m) is None]
    if missing and not (
        wheels and pip("install", "--no-index", "--no-deps", "--find-links", str(wheels), *missing)
    ):
        fail(
            f"missing here: {' '.join(missing)}; where pip works: {DOWNLOAD} {' '.join(missing)}; "
            "then --wheels WHEELS"
        )
    found = sorted(wheels.glob("stbench-*.whl")) if wheels else []
    if not found:
        fail(
            f"no stbench wheel in {wheels or '(no --wheels)'}: where pip works, run "
            "'python3 -m pip wheel --no-deps -w WHEELS .' and pass --wheels WHEELS"
        )
    print(f"installing {found[-1].name} (no index, no dependencies)", flush=True)
    if not pip("install", "--no-index", "--no-deps", "--force-reinstall", str(found[-1])):
        fail(
            f"installing {found[-1]} failed (pip install --no-index --no-deps {found[-1]} says why)"
        )


VERIFY = """
import pathlib, sys
try:
    import stbench, stbench.workloads
except ImportError as e:
    print(f"stbench does not import: {e}"); sys.exit()
root = pathlib.Path(sys.argv[1])
pairs = []
for tree, package in (("stbench_cli", stbench), ("workloads", stbench.workloads)):
    where = pathlib.Path(package.__file__).parent  # an editable install maps the two apart
    for pattern in ("*.py", "*.json"):
        pairs += [(p, where / p.relative_to(root / tree)) for p in (root / tree).rglob(pattern)]
bad = [str(a.relative_to(root)) for a, b in pairs
       if not b.is_file() or a.read_bytes() != b.read_bytes()]
if bad:
    print(f"the installed stbench ({stbench.__file__}) differs from this tree in {len(bad)} "
          f"file(s), e.g. {bad[0]}")
"""


def freeze(out: Path) -> None:
    """OUT/pip-freeze.txt: the versions the run measured with (the rehearsal pins to them, from
    gpu_machine.txt, where this machine's Python can have them)."""
    out.mkdir(parents=True, exist_ok=True)
    found = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True)
    python = f"# python {sys.version.split()[0]} at {sys.executable}\n"
    (out / "pip-freeze.txt").write_text(python + found.stdout + found.stderr[-2000:])


def verify() -> None:
    """Every .py (and the carried CPU rows) of the tree is the installed one, byte for byte."""
    argv = [sys.executable, "-c", VERIFY, str(ROOT)]
    found = subprocess.run(argv, capture_output=True, text=True, cwd=tempfile.gettempdir())
    differ = found.stdout.strip()
    if differ:
        fail(f"{differ}: rebuild the wheel from this tree")


def build_venv(env_dir: Path) -> tuple[Path, Path]:
    """A venv holding what the GPU machine has (gpu_machine.txt, this machine's CPU torch) and
    stbench's wheel built beside it, the one step that uses the package index: (python, wheels)."""
    vpy, wheels = env_dir / "venv" / "bin" / "python", env_dir / "wheels"
    log = env_dir / "build.log"
    listed = (ROOT / "benchmarks" / "gpu_machine.txt").read_text().splitlines()
    packages = [ln.strip() for ln in listed if ln.strip() and not ln.lstrip().startswith("#")]
    torch = f"torch=={os.environ.get('REHEARSE_TORCH', '2.13.0')}"
    steps = [
        [sys.executable, "-m", "venv", str(env_dir / "venv")],
        [str(vpy), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [str(vpy), "-m", "pip", "install", "-q", torch],
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
    ]
    for argv in steps:
        with open(log, "ab") as f:
            if subprocess.run(argv, stdout=f, stderr=f).returncode != 0:
                last = log.read_text().strip().splitlines()[-1:]
                fail(f"building the rehearsal's venv failed at {' '.join(argv[:4])}: {last}")
    for note in install_pinned(vpy, packages, log):
        print(f"rehearsal: {note}", flush=True)
    for gone in ABSENT:
        if subprocess.run([str(vpy), "-c", f"import {gone}"], capture_output=True).returncode == 0:
            fail(f"the rehearsal venv has {gone}, which the GPU machine lacks")
    return vpy, wheels


def install_pinned(vpy: Path, packages: list[str], log: Path) -> list[str]:
    """gpu_machine.txt's packages at the GPU machine's versions where it pins one (NAME==V, from
    its pip freeze); a pin this Python cannot install (the GPU machine runs 3.12) falls back to
    the newest, and says so: the notes."""

    def pip_install(*names: str) -> bool:
        argv = [str(vpy), "-m", "pip", "install", "-q", *names]
        with open(log, "ab") as f:
            return subprocess.run(argv, stdout=f, stderr=f).returncode == 0

    if pip_install(*packages):
        return []
    notes = []
    for line in packages:
        name = line.split("==")[0]
        if pip_install(line):
            continue
        if "==" in line and pip_install(name):
            got = subprocess.run(
                [str(vpy), "-m", "pip", "show", name], capture_output=True, text=True
            ).stdout
            version = next(
                (x.split()[-1] for x in got.splitlines() if x.startswith("Version")), "?"
            )
            notes.append(f"{line} does not install for this Python: rehearsed with {version}")
            continue
        fail(f"building the rehearsal's venv failed installing {line} (see {log})")
    return notes


def rehearse(out: Path, rest: list[str]) -> int:
    """The whole run on this CPU machine, in a venv built like the GPU machine, pip without an
    index, CUDA faked in every process; the venv is removed after."""
    with tempfile.TemporaryDirectory(prefix="stbench-rehearsal-") as tmp:
        print(f"rehearsal: building the GPU machine's environment in {tmp}", flush=True)
        vpy, wheels = build_venv(Path(tmp))
        fake = str(ROOT / "tests" / "fakecuda")
        env = {
            **os.environ,
            "PATH": f"{vpy.parent}{os.pathsep}{os.environ['PATH']}",
            "PIP_NO_INDEX": "1",
            "STBENCH_FAKE_CUDA": "1",
            "VIRTUAL_ENV": str(vpy.parent.parent),
            "PYTHONPATH": os.pathsep.join(filter(None, [fake, os.environ.get("PYTHONPATH")])),
        }
        print("rehearsal: the acceptance, CUDA faked, pip without an index", flush=True)
        argv = [
            str(vpy),
            str(Path(__file__).resolve()),
            "--wheels",
            str(wheels),
            "--out",
            str(out),
            "--rehearsal",
            *rest,
        ]
        return subprocess.run(argv, env=env, cwd=ROOT).returncode


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(
        prog="gpu_acceptance.py",
        description=__doc__.split("\n\n")[0],
        epilog="Other arguments go to `python -m benchmarks.acceptance`.",
    )
    p.add_argument("--list", action="store_true", help="the steps, their caps and the total")
    p.add_argument("--out", type=Path, help="gets summary.md, state.json, run.log, results.tar.gz")
    p.add_argument("--wheels", type=Path, help="a folder with stbench's wheel (and missing ones)")
    p.add_argument("--skip-install", action="store_true", help="trust the installed stbench")
    p.add_argument("--rehearse", action="store_true", help="the whole run on this CPU, CUDA faked")
    return p.parse_known_args(argv)


def main(argv: list[str]) -> int:
    args, rest = parse(argv)
    inner = [sys.executable, "-m", "benchmarks.acceptance"]
    # the harness is this tree's, not the wheel's (it is no part of the product): its processes
    # (the probe too) import it from here, wherever they start
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    if args.list:
        os.execv(sys.executable, [*inner, "--list"])
    if args.out is None:
        fail("--out OUT is needed (the folder for summary.md, state.json, run.log, results.tar.gz)")
    if args.wheels is not None and not args.wheels.is_dir():
        fail(f"--wheels {args.wheels} is not a folder")
    if args.rehearse:
        return rehearse(args.out.resolve(), rest)
    if not args.skip_install:
        install(args.wheels)
    verify()
    freeze(args.out)
    os.chdir(ROOT)  # the extras' pytest runs from the tree
    out = str(args.out.resolve())
    os.execv(sys.executable, [*inner, "--out", out, "--started-at", str(STARTED), *rest])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

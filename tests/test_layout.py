"""The package's shape (DESIGN.md): one import root, layers that import only what they may,
workloads that see only the contract, no import cycle, no private name imported across modules.
Sizes are not checked: a file is split where it holds two concepts, not where it crosses a
count (a count to meet moves code away from its concept)."""

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
ENGINE, WORKLOADS = ROOT / "stbench_cli", ROOT / "workloads"

# Who may import whom, by layer (the second part of `stbench.<layer>.…`); "" is the package
# root (its version), `errors` (the one exception type), `device` (the device layer) and
# `stats` (intervals, significance, paired rounds) and `comparison` (a study's runs reduced,
# paired and judged one way) are leaves every layer may use.
ALLOWED = {
    "contract": {"contract"},
    "store": {"store"},
    "plan": {"plan", "contract", "store"},
    "report": {"report", "store", "contract"},  # contract: TrainerParams' defaults
    "runner": {"runner", "plan", "store", "contract"},
    "child": {"child", "plan", "store", "contract"},
    "cli": {"cli", "plan", "runner", "store", "report", "contract"},
    "": set(),
    "errors": set(),
    "device": set(),
    "stats": set(),
    "comparison": {"stats"},
    "__main__": {"cli"},
}
ALWAYS = {"", "errors", "device", "stats", "comparison"}


def module_name(path: Path) -> str:
    """The installed dotted name of a source file (stbench_cli/ is `stbench`, workloads/ is
    `stbench.workloads`)."""
    if path.is_relative_to(WORKLOADS):
        parts = ["stbench", "workloads", *path.relative_to(WORKLOADS).with_suffix("").parts]
    else:
        parts = ["stbench", *path.relative_to(ENGINE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, top_level_only: bool = False) -> list[str]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            # `from . import registry` imports a module of the package; `from .files import x`
            # takes a name from a module
            modules = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            out += modules + ([target] if len(modules) < len(node.names) else [])
    return out


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[:2] == ["stbench", "workloads"]:
        base = WORKLOADS.joinpath(*parts[2:])
    elif parts[0] == "stbench":
        base = ENGINE.joinpath(*parts[1:])
    else:
        return False
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def sources(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


@pytest.mark.parametrize("path", sources(ENGINE), ids=lambda p: str(p.relative_to(ROOT)))
def test_engine_layers_import_only_downward(path):
    name = module_name(path)
    layer = name.split(".")[1] if "." in name else ""
    allowed = ALLOWED[layer] | ALWAYS
    for target in imports(path):
        if target.startswith("stbench."):
            assert target.split(".")[1] in allowed, f"{path.name} ({layer}) imports {target}"


@pytest.mark.parametrize("path", sources(WORKLOADS), ids=lambda p: str(p.relative_to(ROOT)))
def test_workloads_import_only_the_contract(path):
    own = ".".join(module_name(path).split(".")[:3])
    for target in imports(path):
        if target.startswith("stbench"):
            assert target == "stbench.contract" or target.startswith(("stbench.contract.", own)), (
                f"{path.relative_to(ROOT)} imports {target}"
            )


def test_nothing_imports_the_repository_folder_names():
    for path in [
        *sources(ROOT / "tests"),
        *sources(ROOT / "benchmarks"),
        *sources(ENGINE),
        *sources(WORKLOADS),
    ]:
        for target in _plain(path):
            assert target.split(".")[0] not in ("workloads", "stbench_cli"), (
                f"{path.relative_to(ROOT)}: {target}"
            )


def _plain(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.append(node.module or "")
    return out


def import_cycles() -> list[list[str]]:
    """Every import cycle among stbench's modules, counting imports inside functions too (a
    lazy import that closes a circle is still a circle, only a hidden one)."""
    graph = {}
    for p in [*sources(ENGINE), *sources(WORKLOADS)]:
        name = module_name(
            p
        )  # `from . import x` in a package names the package itself: not an edge
        graph[name] = {t for t in imports(p) if t.startswith("stbench") and t != name}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node, trail):
        if state.get(node) == 1:
            cycles.append(trail[trail.index(node) :] + [node])
            return
        if state.get(node) == 2 or node not in graph:
            return
        state[node] = 1
        for nxt in sorted(graph[node]):
            visit(nxt, trail + [node])
        state[node] = 2

    for node in sorted(graph):
        visit(node, [])
    return cycles


def test_no_import_cycle():
    assert import_cycles() == []


def test_every_package_folder_is_installed():
    """setup.py derives the package list from the folders: each one with an __init__.py."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stbench_setup", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    folders = {
        module_name(p) for p in [*ENGINE.rglob("__init__.py"), *WORKLOADS.rglob("__init__.py")]
    }
    assert set(setup.all_packages()) == folders and "stbench.workloads.stnn" in folders


def test_report_and_planning_import_no_torch():
    report = ", ".join(module_name(p) for p in sources(ENGINE / "report"))
    code = (
        f"import sys, {report}, stbench.plan.planner, stbench.store.files, "
        "stbench.runner.study, stbench.cli.app, stbench.plan.registry as r; r.all_workloads(); "
        "t = sorted(m for m in sys.modules if m.startswith('torch')); "
        "sys.exit(str(t) if t else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-500:]


def test_no_module_imports_another_ones_private_names():
    for path in [*sources(ENGINE), *sources(WORKLOADS)]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [
                    a.name
                    for a in node.names
                    if a.name.startswith("_") and not a.name.endswith("__")
                ]
                assert not private, f"{path.relative_to(ROOT)} imports {private} from {node.module}"


def test_the_wheel_holds_one_import_root_and_the_entry_points(tmp_path):
    """What `pip install .` puts into site-packages (built here without network)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("stbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "stbench"
    }
    assert "stbench/workloads/lstm_era5/era5_t2m_2pts.npz" in names
    assert "stbench/store/gpus.toml" in names  # the GPU models predictions read
    # the GPU acceptance is a harness of this tree (benchmarks/acceptance/), not the product
    assert not [n for n in names if n.startswith("stbench/acceptance")]
    entry_points = next(
        zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith("entry_points.txt")
    )
    for name in ("cnn-strain", "dcrnn-pems", "lstm-era5", "stnn"):
        assert f"{name} = stbench.workloads." in entry_points
    assert "stbench = stbench.cli:main" in entry_points


@pytest.mark.slow
def test_a_fresh_venv_install_from_outside_the_checkout(tmp_path):
    """The issue's check as a user runs it: pip install . into a new venv (network to the package
    registry), then from another folder `import workloads` fails and `import stbench` works."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(ROOT)], check=True)
    code = (
        "import importlib, importlib.metadata as m, stbench\n"
        "try:\n    import workloads\n    raise SystemExit('workloads importable')\n"
        "except ImportError: pass\n"
        "print(sorted(e.name for e in m.entry_points(group='stbench.workloads')))"
    )
    # as a user's shell has it: without the PYTHONPATH conftest gives this session's children
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['cnn-strain', 'dcrnn-pems', 'lstm-era5', 'stnn']"


def test_module_names_say_what_they_do_and_no_issue_number_is_left_in_the_code():
    """A module is named by the question it serves and its part, never by the word "question"
    (three of them once were); the git log keeps which issue added what, not the code."""
    import re

    assert not [p for p in ENGINE.rglob("question.py")]
    mentions = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in [*ENGINE.rglob("*.py"), *WORKLOADS.rglob("*.py"), ROOT / "DESIGN.md"]
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\bissues? \d+", line, re.I)
    ]
    assert mentions == []


# Names the package gives several module-level functions on purpose: one job, one interface,
# several implementations (each launcher, each kind of study's view, each registry, each entry
# point). Any other name defined in two modules is two jobs under one word.
ONE_INTERFACE = {
    "check": "launchers",
    "command": "launchers",
    "describe": "launchers",
    "opened": "launchers",
    "run_cell": "launchers",
    "_gather_logs": "launchers",
    "finding": "study kinds",
    "table": "study kinds",
    "view": "study kinds",
    "get": "registries",
    "main": "entry points",
}
WHERE = {
    "launchers": ("runner/launchers/",),
    "study kinds": ("report/", "plan/judge.py"),
    "registries": ("runner/launchers/__init__.py", "plan/levers.py", "plan/registry.py"),
    "entry points": ("cli/__init__.py", "child/"),
}


def test_no_two_modules_define_a_function_of_one_name_for_different_jobs():
    """A function's name says its job: `judge` once named a paired comparison, why a cell failed,
    and a tune step's verdict. Methods are named within their class and stay out of it."""
    defined: dict[str, list[str]] = {}
    for path in ENGINE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.setdefault(node.name, []).append(path.relative_to(ENGINE).as_posix())
    clashes = {
        name: where
        for name, where in defined.items()
        if len(where) > 1
        and not name.startswith("__")
        and not (
            name in ONE_INTERFACE and all(p.startswith(WHERE[ONE_INTERFACE[name]]) for p in where)
        )
    }
    assert clashes == {}


def test_what_an_extra_installs_is_asked_for_in_one_line_naming_the_extra(monkeypatch, tmp_path):
    """The core install leaves HDF5, netCDF, zarr/gcsfs and the cluster engines to extras: a
    study that needs one of them says which, in one line (a workload's data check: ValueError)."""
    from stbench.errors import StbenchError, require
    from stbench.workloads.cnn_strain import data

    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py now raises ImportError
    (tmp_path / "curves.h5").write_bytes(b"")
    with pytest.raises(ValueError, match=r"needs h5py, which is not installed: pip install"):
        data.check({"data": str(tmp_path / "curves.h5")})
    monkeypatch.setitem(sys.modules, "submitit", None)
    with pytest.raises(StbenchError, match=r"--launcher slurm needs submitit.*stbench\[cluster\]"):
        require("submitit", "--launcher slurm")


@pytest.mark.slow
def test_the_core_install_alone_runs_the_readmes_first_command(tmp_path):
    """`pip install .` without extras (the laptop's install): the README's first command, a
    question, answers on the embedded default; nothing of Dask, Google Cloud or netCDF needed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(ROOT)], check=True)
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True
    ).stdout.lower()
    assert not [
        m
        for m in ("dask", "gcsfs", "zarr", "netcdf4", "h5py", "submitit")
        if f"\n{m}==" in f"\n{listed}"
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(venv / "bin" / "stbench"), "gpu-vs-cpu", "cnn-strain", "--smoke", "--budget", "40"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Finding:" in done.stdout

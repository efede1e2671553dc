import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


def _register_test_workloads(site: Path) -> None:
    """Register the test-only `faulty` workload the way an installed plugin is registered: a
    distribution's metadata with an entry point in the `stbench.workloads` group, on the path
    of this process and of every child process (cells, the console script)."""
    dist = site / "stbench_test_workloads-0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: stbench-test-workloads\nVersion: 0.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[stbench.workloads]\nfaulty = fault_workload:WORKLOAD\n"
    )
    paths = [str(site), str(TESTS), str(ROOT)]
    sys.path[:0] = paths[:2]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, os.environ.get("PYTHONPATH")]))


def pytest_configure(config):
    import tempfile

    config._stbench_site = Path(tempfile.mkdtemp(prefix="stbench-test-site-"))
    _register_test_workloads(config._stbench_site)


def pytest_unconfigure(config):
    import shutil

    shutil.rmtree(getattr(config, "_stbench_site", ""), ignore_errors=True)


def slurm_nodes() -> int:
    """Nodes of a running Slurm that can take jobs now (0: none, or no Slurm at all)."""
    import shutil
    import subprocess

    if shutil.which("sinfo") is None:
        return 0
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(state.strip() in ("idle", "mix", "alloc") for state in out.splitlines())


def pytest_collection_modifyitems(config, items):
    slow = os.environ.get("STBENCH_SLOW") == "1"
    slurm = slurm_nodes() if any("slurm" in item.keywords for item in items) else 0
    need_slurm = os.environ.get("STBENCH_SLURM") == "1"
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    for item in items:
        if "slow" in item.keywords and not slow:
            item.add_marker(pytest.mark.skip(reason="slow: set STBENCH_SLOW=1"))
        if "gpu" in item.keywords and not gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        # Slurm tests need 2 nodes (.ci/slurm-single-host.sh starts 2 on one host); with
        # STBENCH_SLURM=1 (CI) a missing Slurm fails them instead of skipping them.
        if "slurm" in item.keywords and slurm < 2 and not need_slurm:
            item.add_marker(
                pytest.mark.skip(
                    reason="needs a running 2-node Slurm: sudo .ci/slurm-single-host.sh start"
                )
            )


@pytest.fixture(scope="session")
def measured_peaks(tmp_path_factory) -> Path | None:
    """This machine's fp32 and bf16 peaks for cpu, measured once a session in a process of its
    own as a study's parent measures them (runner/envinfo.peaks): a test's empty cache would
    measure them again, ~2 s a study. None where they could not be measured."""
    cache = tmp_path_factory.mktemp("peaks")
    code = "from stbench.runner import envinfo as e; e.peaks(e.collect(), ['cpu'], bf16=('cpu',))"
    env = {**os.environ, "STBENCH_CACHE": str(cache)}
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    found = cache / "peaks.json"
    return found if found.exists() else None


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory, monkeypatch, measured_peaks):
    """Every test gets its own peak and data cache, its peaks a copy of the session's measured
    ones (a test that measures peaks itself asks for a refresh, or empties its cache); beside
    its tmp_path, not in it, which a test may hold empty."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("STBENCH_CACHE", str(cache))
    # pytest names the running test in this process's environment, a value of its own each test:
    # read by pytest alone, it must not keep a test's cells from the warm server an earlier test
    # started here (each would import torch afresh)
    from stbench.runner import warm

    monkeypatch.setattr(warm, "LATE", warm.LATE | {"PYTEST_CURRENT_TEST"})
    if warm._server is not None and not warm.compatible(os.environ, warm._server):
        # started by an earlier test in an environment of its own (a variable it set): no cell
        # of this test could fork from it, so it goes, and the first cell here starts another
        warm._stop()
        warm._server = None
    if measured_peaks is not None:
        shutil.copy(measured_peaks, cache / "peaks.json")


@pytest.fixture(scope="session")
def committed_results(tmp_path_factory):
    """A results/ folder holding the committed result folders only (tests.helpers.committed_copy):
    whatever else a user ran into results/ never changes what a test reads. Read it, never write
    it."""
    from tests.helpers import committed_copy

    return committed_copy(tmp_path_factory.mktemp("committed"))


@pytest.fixture(scope="session")
def smoke_question(tmp_path_factory, measured_peaks):
    """One question, run once for the tests that read what a question prints and writes (a
    question costs half a minute): `gpu-vs-cpu cnn-strain --smoke --budget 30`, predicting a
    user's own card from a file (tests.helpers.MY_CARD). Its CompletedProcess and its folder;
    read them, never write them."""
    from tests.helpers import MY_CARD, stbench

    root = tmp_path_factory.mktemp("question")
    (root / "gpus.toml").write_text(MY_CARD)
    if measured_peaks is not None:  # the session's peaks, as every test's cache holds them
        (root / "cache").mkdir()
        shutil.copy(measured_peaks, root / "cache" / "peaks.json")
    with pytest.MonkeyPatch.context() as patch:  # its own peak and data cache, as every test's
        patch.setenv("STBENCH_CACHE", str(root / "cache"))
        done = stbench(
            "gpu-vs-cpu", "cnn-strain", "--smoke", "--budget", 30, "--gpus", root / "gpus.toml",
            "--out", root / "out",
        )  # fmt: skip
    folders = list((root / "out").iterdir()) if (root / "out").exists() else []
    return done, (folders[0] if len(folders) == 1 else None)

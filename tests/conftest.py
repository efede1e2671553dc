import os
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


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Every test gets its own peak and data cache."""
    monkeypatch.setenv("STBENCH_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="session")
def committed_results(tmp_path_factory):
    """A results/ folder holding the committed result folders only (tests.helpers.committed_copy):
    whatever else a user ran into results/ never changes what a test reads. Read it, never write
    it."""
    from tests.helpers import committed_copy

    return committed_copy(tmp_path_factory.mktemp("committed"))

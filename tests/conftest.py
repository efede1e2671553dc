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
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: stbench-test-workloads\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[stbench.workloads]\nfaulty = fault_workload:WORKLOAD\n")
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


def pytest_collection_modifyitems(config, items):
    slow = os.environ.get("STBENCH_SLOW") == "1"
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


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Every test gets its own peak and data cache."""
    monkeypatch.setenv("STBENCH_CACHE", str(tmp_path / "cache"))

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


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
    """Every test gets its own peak cache, and child processes can import the test workload."""
    monkeypatch.setenv("STBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("STBENCH_WORKLOADS", "faulty=fault_workload")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(TESTS))

"""The cell's allocator policy (child/allocator.py): what a step frees is reused by the next
step instead of being handed back to the kernel and faulted in again."""

import json
import platform
import subprocess
import sys

import pytest

from stbench.child import allocator, cell
from stbench.plan.spec import RunSpec
from tests.helpers import preset_params

ROUNDS = """
import json, resource, sys, torch
from stbench.child.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory() is None
# a step's temporaries: 64 blocks of 1 MiB (16 KiB more each round), every page written, then freed
def one_round(r):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones((1 << 18) + r * 4096) for _ in range(64)]
    del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps([one_round(r) for r in range(4)]))
"""
PAGES = 64 * 2**20 // 4096


def page_faults(policy: str) -> list[int]:
    """Minor page faults of four rounds, in a fresh process (the heap's history decides glibc's
    thresholds)."""
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, policy], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is glibc's mallopt")
def test_freed_memory_is_reused_not_faulted_in_again():
    """Blocks a little larger every round, as a step's temporaries vary: glibc's adaptive mmap
    threshold (raised to the largest block freed) then maps each round's blocks anew, where
    equal blocks would land in the heap and be kept or trimmed by chance."""
    system, keep = page_faults("system"), page_faults("keep")
    assert system[-1] > PAGES // 2  # glibc's defaults map every round's blocks and fault them in
    assert (
        keep[0] > PAGES // 2 and keep[-1] < PAGES // 16
    )  # kept: later rounds write pages they have


def test_a_cell_keeps_freed_memory_unless_told_otherwise(monkeypatch):
    calls = []
    monkeypatch.setattr(
        allocator, "keep_freed_memory", lambda: calls.append("keep") or "not glibc here"
    )
    results = {}
    for policy in ("keep", "system"):
        p = preset_params("lstm-era5", allocator=policy, max_steps=2, max_eval_batches=1)
        results[policy] = cell.train_cell(
            RunSpec("lstm-era5", "cpu", "single", 32, 1, params=tuple(sorted(p.items())))
        )
    assert calls == ["keep"]
    assert (
        results["keep"].unavailable["allocator"] == "not glibc here"
    )  # said, and the cell still ran
    assert results["keep"].status == "ok" and "allocator" not in results["system"].unavailable

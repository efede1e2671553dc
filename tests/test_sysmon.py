"""The system sampler: a GPU field that raises leaves that field empty and sampling goes on."""

import os
import time

from stbench.runner.envinfo import match_gpus
from stbench.runner.nvml import GpuReader
from stbench.runner.sysmon import SystemSampler


class FakeHandle:
    """Stands in for an NVML handle of a GPU in MIG mode: memory and power read, utilisation
    is 'not supported' (NVML raises), energy is not there either."""


def _unsupported(handle):
    raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


READERS = {
    "gpu_util_pct": _unsupported,
    "gpu_mem_mb": lambda h: 1000.0,
    "gpu_power_w": lambda h: 60.0,
    "gpu_energy_mj": _unsupported,
}


def test_a_field_that_raises_is_empty_and_the_sampler_goes_on():
    sampler = SystemSampler(
        os.getpid(), GpuReader([FakeHandle(), FakeHandle()], READERS), interval=0.05
    ).start()
    time.sleep(0.6)
    energy = sampler.stop()
    rows = sampler.rows
    assert len(rows) >= 5 and not sampler.errors  # it kept sampling after the first failed read
    assert all(r["proc_rss_mb"] > 0 and r["gpu_util_pct"] is None for r in rows)
    assert all(
        r["gpu_mem_mb"] == 2000.0 and r["gpu_power_w"] == 120.0 for r in rows
    )  # two GPUs summed
    assert (
        sampler.unavailable == {"gpu_util_pct", "gpu_energy_mj"} and energy["gpu_energy_j"] is None
    )


def test_an_error_of_one_sample_does_not_end_the_thread():
    calls = {"n": 0}

    def flaky(handle):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ZeroDivisionError("a bug in one read")  # even a non-NVML error
        return 1.0

    reader = GpuReader([FakeHandle()], {**READERS, "gpu_util_pct": flaky})
    sampler = SystemSampler(os.getpid(), reader, interval=0.05).start()
    time.sleep(0.5)
    sampler.stop()
    assert len(sampler.rows) >= 5 and any(r["gpu_util_pct"] == 1.0 for r in sampler.rows)


def test_cuda_numbering_is_matched_to_nvml_by_uuid():
    # CUDA puts the faster GPU first (or CUDA_VISIBLE_DEVICES reorders); NVML lists by PCI bus.
    nvml = [
        {"nvml_index": 0, "uuid": "GPU-aaaa", "name": "T4", "memory_mb": 15360.0, "driver": "550"},
        {
            "nvml_index": 1,
            "uuid": "GPU-bbbb",
            "name": "H100",
            "memory_mb": 81559.0,
            "driver": "550",
        },
    ]
    cuda = [{"index": 0, "name": "H100", "uuid": "bbbb", "memory_mb": 81559.0}]
    gpus = match_gpus(cuda, nvml)
    assert [(g["index"], g["nvml_index"], g["uuid"]) for g in gpus] == [
        (0, 1, "GPU-bbbb"),
        (None, 0, "GPU-aaaa"),
    ]

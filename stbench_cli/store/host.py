"""What this host offers a CPU cell: its physical cores within the process's CPU
affinity, the allocator libraries that can be preloaded, and the tool that binds to a NUMA node.
Read from sysfs and the library folders; torch-free. The parent uses them to prepare a cell,
the child to choose its threads where no parent checked (a Slurm node), `tune` to pick levers.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import sysconfig
from pathlib import Path

CPU_ROOT = "/sys/devices/system/cpu"
NODE_ROOT = "/sys/devices/system/node"
# the file names torch/backends/xeon/run_cpu.py preloads, and Debian's versioned ones
LIBRARIES = {
    "jemalloc": ("libjemalloc.so", "libjemalloc.so.2"),
    "tcmalloc": (
        "libtcmalloc.so",
        "libtcmalloc.so.4",
        "libtcmalloc_minimal.so.4",
        "libtcmalloc_minimal.so",
    ),
}


def allowed_cpus() -> list[int]:
    """The logical CPUs this process may run on (taskset, cgroups' cpusets narrow them)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def core_of(cpu: int, root: str = CPU_ROOT) -> tuple[str, str] | None:
    """(package, core) of a logical CPU, from sysfs; None where the topology is not readable."""
    topo = Path(root, f"cpu{cpu}", "topology")
    try:
        return (
            (topo / "physical_package_id").read_text().strip(),
            (topo / "core_id").read_text().strip(),
        )
    except OSError:
        return None


def cores(cpus: list[int] | None = None, root: str = CPU_ROOT) -> dict[tuple[str, str], list[int]]:
    """The physical cores among `cpus` (default: the allowed ones), each with its logical CPUs;
    a CPU whose topology cannot be read counts as a core of its own."""
    out: dict[tuple[str, str], list[int]] = {}
    for cpu in allowed_cpus() if cpus is None else cpus:
        out.setdefault(core_of(cpu, root) or ("?", str(cpu)), []).append(cpu)
    return out


def physical_cores(cpus: list[int] | None = None, root: str = CPU_ROOT) -> int:
    """How many physical cores the allowed CPUs span (hyperthreads of one core count once)."""
    return max(len(cores(cpus, root)), 1)


def first_core_cpus(n: int, cpus: list[int] | None = None, root: str = CPU_ROOT) -> list[int]:
    """One logical CPU of each of the first n physical cores (what `bind=cores` pins to, as
    run_cpu.py's taskset -C does): n threads never share a core's hyperthreads."""
    return [group[0] for group in list(cores(cpus, root).values())[: max(n, 1)]]


def _library_dirs() -> list[str]:
    dirs = [
        os.environ.get("CONDA_PREFIX", ""),
        os.environ.get("VIRTUAL_ENV", ""),
        str(Path.home() / ".local"),
        "/usr/local",
        "/usr",
    ]
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    subs = ["lib", "lib64"] + ([f"lib/{multiarch}"] if multiarch else [])
    return [str(Path(d, s)) for d in dirs if d for s in subs] + (
        [f"/lib/{multiarch}"] if multiarch else []
    )


def allocator_library(name: str) -> str | None:
    """The path of an allocator library LD_PRELOAD can load (jemalloc, tcmalloc), or None."""
    for folder in _library_dirs():
        for file in LIBRARIES.get(name, ()):
            path = Path(folder, file)
            if path.is_file():
                return str(path)
    found = ctypes.util.find_library(name) or (
        ctypes.util.find_library("tcmalloc_minimal") if name == "tcmalloc" else None
    )
    return found  # a soname: the dynamic loader searches its own paths for it


def allocators() -> dict[str, str]:
    """The preloadable allocators installed here: name -> library."""
    return {n: lib for n in LIBRARIES if (lib := allocator_library(n))}


def numa_nodes(root: str = NODE_ROOT) -> int:
    """NUMA nodes of this machine (1 where sysfs does not say)."""
    return max(len(list(Path(root).glob("node[0-9]*"))), 1) if Path(root).is_dir() else 1


def numactl() -> str | None:
    return shutil.which("numactl")


def binding() -> dict[str, str | None]:
    """Each `bind` mode -> None where it can run here, else why not."""
    tool = numactl()
    return {
        "none": None,
        "cores": None if hasattr(os, "sched_setaffinity") else "no sched_setaffinity here",
        "numa": None if tool else "numactl is not installed (apt install numactl)",
    }


# CPU flags of native bf16 arithmetic (x86: AVX-512 BF16, AMX; Arm: the BF16 extension)
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes in bf16 natively (its flags name an extension for it): where it
    does not, bf16 autocast is emulated, slower than fp32, and not a lever worth a window."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return bool(BF16_FLAGS & set(line.partition(":")[2].split()))
    return False

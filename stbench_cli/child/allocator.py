"""The host allocator of a cell's process: memory a training step frees stays for the next step.

glibc gives the top of its heap back to the kernel once more than M_TRIM_THRESHOLD of it is
free, and serves blocks above M_MMAP_THRESHOLD from mappings of their own, unmapped on free.
Both thresholds move with the process's history (each freed mapping raises them), so whether a
step's temporaries are reused, or returned and faulted in again page by page (zeroed by the
kernel) by the next step, depends on where a few long-lived blocks happen to sit in the heap:
a lottery drawn per process. lstm-era5's cells took from none to some 4,000 page faults a step
in compute, whichever loader they ran; in one process, the same steps ran 2x slower with 6,200
faults a step than with none. Fixed thresholds make every step reuse what the one
before freed. Kept memory is reused, not added to, so the peak does not grow; it is only not
handed back until the process ends.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest (64-bit): bigger blocks are mapped whatever is set
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: in effect, never trim


def keep_freed_memory() -> str | None:
    """Fix glibc's thresholds for this process; None, or why they could not be set."""
    libc_name, _ = platform.libc_ver()
    if libc_name != "glibc":
        return f"the C library is {libc_name or 'not glibc'}; its allocator keeps its own policy"
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not (
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    ):
        return "glibc's mallopt refused the thresholds"
    return None

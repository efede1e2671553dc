"""The checks of `benchmarks/gpu_acceptance.sh` on result folders, one command line:

    python benchmarks/gpu_checks.py CHECK FOLDER [ARG]

It prints one line, `PASS <figure>`, `FAIL <reason>` or `UNTESTED <reason>`, and exits 0, 1 or
3. UNTESTED is what one machine cannot show (NCCL between two GPUs on a one-GPU machine): it is
never counted a pass. An unexpected error (a missing column, an unreadable trace) is a FAIL
with its traceback. The checks themselves are in checks_rows.py and checks_traces.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the sibling modules, from any working folder

import checks_rows as rows  # noqa: E402
import checks_traces as traces  # noqa: E402

CHECKS = {
    "cpu-gpu-agree": rows.cpu_gpu_agree, "backends-agree": rows.backends_agree, "phases-sum": rows.phases_sum,
    "device-data": rows.device_data, "h2d-plausible": rows.h2d_plausible, "no-syncs": traces.no_syncs,
    "syncs": traces.syncs, "offload-stream": traces.offload_stream, "distributed": traces.distributed,
    "checkpoint": traces.checkpoint, "memory-prediction": traces.memory_prediction, "nvml": traces.nvml,
}
EXIT = {"PASS": 0, "FAIL": 1, "UNTESTED": 3}


def verdict(check: str, folder: Path, *args: str) -> tuple[str, str]:
    """(PASS/FAIL/UNTESTED, the figure or reason) of one check on one folder."""
    if not (folder / "runs.csv").is_file():
        return "FAIL", f"no runs.csv in {folder} (the step wrote no study)"
    try:
        return "PASS", CHECKS[check](folder, *args)
    except rows.Fail as e:
        return "FAIL", str(e)
    except rows.Untested as e:
        return "UNTESTED", str(e)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in CHECKS:
        print(f"usage: gpu_checks.py CHECK FOLDER [ARG]; checks: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    status, text = verdict(argv[0], Path(argv[1]), *argv[2:])
    print(f"{status} {text}")
    return EXIT[status]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

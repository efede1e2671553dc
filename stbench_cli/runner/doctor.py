"""`stbench doctor`: check the timing method on this machine before trusting its numbers.

Each check measures (in a child process where torch is needed) and is then judged against a
stated tolerance by a pure function, so every verdict can be tested, and made to fail:

    phase-timing  the phases of a real run's steps add up to a synchronized wall clock   (5%)
    overhead      the instrumentation costs a small part of a step                        (5%)
    ddp-sync      sync_s of a 2-rank world agrees with DDP's own exposed communication   (25%)
    sampling      every psutil field and, on a GPU, every NVML field is readable; the GPU's
                  energy counter agrees with mean sampled power x time                   (25%)
    peaks         the fp32 matmul and copy peaks that peak_fraction divides by are measured

`--quick` runs QUICK, the checks of seconds (phase-timing, sampling, peaks: each a child that
imports torch and runs a few seconds, the peaks read from the cache once measured); it leaves out
ddp-sync (a 2-rank world through torchrun: two more torch imports, a process group and an epoch)
and overhead (twelve alternating timed blocks of 50 steps), the two that take most of a full
doctor's time.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..device import is_cuda, parse
from ..store.machine import EnvInfo
from . import envinfo, warm
from .nvml import GpuReader, handles
from .sysmon import SystemSampler

UNSURE = "UNSURE"
TOLERANCE = {"phase-timing": 0.05, "overhead": 0.05, "ddp-sync": 0.25, "energy": 0.25}
CPU_FIELDS = ("proc_cpu_pct", "proc_rss_mb", "sys_cpu_pct", "sys_mem_pct")


@dataclass(frozen=True)
class Check:
    name: str
    device: str
    status: str  # PASS | FAIL | SKIP | UNSURE (the machine too noisy to judge it)
    detail: str
    figures: dict = field(default_factory=dict)
    # the check's wall seconds, its processes' starts included (a GPU's doctor --quick took 43 s
    # on the H200 run, and nothing said which check spent them)
    seconds: float | None = None


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def judge_phase_timing(device: str, f: dict) -> Check:
    off, tol = _rel(f["phases_s"], f["wall_s"]), TOLERANCE["phase-timing"]
    detail = (
        f"phases of {f['steps']} steps {f['phases_s']:.4f} s vs synchronized wall clock "
        f"{f['wall_s']:.4f} s: {100 * off:.1f}% apart (tolerance {100 * tol:.0f}%)"
    )
    return Check("phase-timing", device, "PASS" if off <= tol else "FAIL", detail, f)


BUSY_CORES = 0.5  # other processes' use, in cores, beside which a timing check is not judged


def judge_overhead(device: str, f: dict) -> Check:
    """Judged on the fastest block of each kind (a busy machine inflates some blocks of both);
    the median of the block-by-block differences is in the figures too. Not judged (UNSURE)
    where the machine was busy while it ran (`others_cores`, measured around it) or where the
    instrumented steps came out faster than the bare ones by more than the tolerance: noise
    larger than what it measures, not an overhead of zero."""
    share, tol = f["min_overhead_s"] / f["min_bare_step_s"], TOLERANCE["overhead"]
    detail = (
        f"instrumented step {1e6 * f['min_overhead_s']:+.1f} us against a bare "
        f"{1e3 * f['min_bare_step_s']:.3f} ms step (fastest blocks): {100 * share:+.2f}% "
        f"(tolerance {100 * tol:.0f}%)"
    )
    others = f.get("others_cores")
    if others is not None and others >= BUSY_CORES:
        why = f"the machine was busy (other processes used {others:.2f} cores while it ran)"
        return Check("overhead", device, UNSURE, f"{detail}; {why}: run it alone", f)
    if share < -tol:
        why = "the instrumented steps ran faster than the bare ones: noise, not an overhead"
        return Check("overhead", device, UNSURE, f"{detail}; {why}: run it again", f)
    return Check("overhead", device, "PASS" if share <= tol else "FAIL", detail, f)


def judge_ddp(device: str, f: dict) -> Check:
    if f.get("status") != "ok":
        return Check(
            "ddp-sync",
            device,
            "FAIL",
            f"the 2-rank cell ended {f.get('status')}: {f.get('reason')}",
            f,
        )
    ours, theirs = f["sync_s"] / f["steps"], f["ddp_exposed_comm_s"] / f["steps"]
    off, tol = _rel(ours, theirs), TOLERANCE["ddp-sync"]
    detail = (
        f"sync_s {1e3 * ours:.3f} ms/step vs DDP's exposed communication "
        f"{1e3 * theirs:.3f} ms/step ({f['backend']}, 2 ranks): {100 * off:.0f}% apart "
        f"(tolerance {100 * tol:.0f}%)"
    )
    return Check("ddp-sync", device, "PASS" if off <= tol else "FAIL", detail, f)


def judge_sampling(
    device: str,
    rows: list[dict],
    unavailable: set[str],
    errors: list[str],
    gpu_energy_j: float | None = None,
    seconds: float = 0.0,
) -> Check:
    cuda = is_cuda(device)
    figures = {"samples": len(rows), "unavailable": sorted(unavailable), "errors": errors[:3]}
    missing = sorted({f for f in CPU_FIELDS for r in rows if r.get(f) is None} | unavailable)
    if not rows or errors or missing:
        why = (
            "no sample"
            if not rows
            else f"unreadable: {', '.join(missing)}"
            if missing
            else errors[0]
        )
        return Check("sampling", device, "FAIL", f"{why} (system.csv would lack them)", figures)
    if not cuda:
        return Check(
            "sampling", device, "PASS", f"psutil fields readable in {len(rows)} samples", figures
        )
    power = [r["gpu_power_w"] for r in rows if r.get("gpu_power_w") is not None]
    if not power:  # NVML gave no handle for this GPU (no driver library, a container without it)
        return Check(
            "sampling", device, "FAIL", "no NVML field sampled: NVML cannot see this GPU", figures
        )
    expected = sum(power) / len(power) * seconds
    off = _rel(gpu_energy_j, expected) if gpu_energy_j else float("inf")
    figures.update(energy_j=gpu_energy_j, mean_power_w=sum(power) / len(power), seconds=seconds)
    detail = (
        f"NVML and psutil fields readable; energy counter {gpu_energy_j or 0:.0f} J "
        f"vs mean power x time {expected:.0f} J: {100 * off:.0f}% apart "
        f"(tolerance {100 * TOLERANCE['energy']:.0f}%)"
    )
    return Check(
        "sampling", device, "PASS" if off <= TOLERANCE["energy"] else "FAIL", detail, figures
    )


def judge_peaks(device: str, peak: dict | None) -> Check:
    if not peak or not peak.get("matmul_gflops") or not peak.get("mem_gbps"):
        why = (peak or {}).get("unavailable", "the peak could not be measured")
        return Check("peaks", device, "FAIL", why, peak or {})
    detail = (
        f"{peak['matmul_gflops']:,.1f} GFLOP/s {peak.get('matmul_precision', 'fp32')} matmul, "
        f"{peak['mem_gbps']:.1f} GB/s copy ({peak['threads']} threads)"
    )
    return Check("peaks", device, "PASS", detail, peak)


def judge_launches(device: str, f: dict) -> Check:
    """The floors of a launch, measured: eager PyTorch's host cost of an operator, and on a GPU a
    kernel's own cost replayed in a CUDA graph (gpus.toml's launch_floor_us until measured)."""
    if not f.get("eager_op_us"):
        return Check("launches", device, "FAIL", "no operator could be timed", f)
    detail = (
        f"eager PyTorch {f['eager_op_us']:.1f} us an operator on the host, "
        f"{f['op_us']:.1f} us with its kernel ({f['ops']:,} in-place adds on 1 element)"
    )
    if f.get("graph_kernel_us") is not None:
        detail += f"; a kernel replayed in a CUDA graph {f['graph_kernel_us']:.2f} us"
    return Check("launches", device, "PASS", detail, f)


def child_check(name: str, device: str) -> dict:
    proc = warm.run_module([sys.executable, "-m", "stbench.child.checks", name, device])
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"exit code {proc.returncode}")
    return json.loads(proc.stdout)


def sampling_check(device: str, env: EnvInfo) -> Check:
    """Sample a process for a few seconds: this one on CPU, a GPU load on a GPU."""
    if not is_cuda(device):
        sampler = SystemSampler(os.getpid(), None, 0.2).start()
        time.sleep(2.0)
        sampler.stop()
        return judge_sampling(device, sampler.rows, sampler.unavailable, sampler.errors)
    index = parse(device).index or 0
    # forked from the warm server where it can be: a process of its own imports torch first
    load = warm.Module([sys.executable, "-m", "stbench.child.checks", "gpu-load", device])
    sampler = SystemSampler(load.pid, GpuReader(handles(env.gpu_uuids([index]))), 0.2).start()
    t0 = time.perf_counter()
    done = load.result()
    energy, seconds = sampler.stop()["gpu_energy_j"], time.perf_counter() - t0
    if done.returncode != 0:  # nothing was sampled under load: the load's own error says why
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        lines = lines or [f"exit code {done.returncode}"]
        return Check(
            "sampling",
            device,
            "FAIL",
            f"the GPU load failed: {lines[-1]}",
            {"samples": len(sampler.rows)},
        )
    return judge_sampling(
        device, sampler.rows, sampler.unavailable, sampler.errors, energy, seconds
    )


def run_check(name: str, device: str, env: EnvInfo) -> Check:
    """One check on one device; an error while measuring is a FAIL naming it."""
    from .ddp_check import ddp_figures

    try:
        if name == "phase-timing":
            return judge_phase_timing(device, child_check(name, device))
        if name == "overhead":
            from .hostprep import measure_others

            before = measure_others()
            figures = child_check(name, device)
            figures["others_cores"] = max(before, measure_others())
            return judge_overhead(device, figures)
        if name == "ddp-sync":
            return judge_ddp(
                device, ddp_figures(device, env, Path(tempfile.mkdtemp(prefix="stbench-doctor-")))
            )
        if name == "sampling":
            return sampling_check(device, env)
        if name == "launches":
            return judge_launches(device, child_check(name, device))
        return judge_peaks(device, envinfo.peaks(env, [device]).get(device))
    except Exception as exc:  # a check that cannot even measure has failed
        return Check(name, device, "FAIL", f"could not measure: {type(exc).__name__}: {exc}")


CHECKS = ("phase-timing", "overhead", "ddp-sync", "sampling", "peaks", "launches")
QUICK = (
    "phase-timing",
    "sampling",
    "peaks",
    "launches",
)  # under a minute: see the module's docstring


def run_checks(
    devices: list[str], env: EnvInfo, on_done=lambda check: None, names: tuple[str, ...] = CHECKS
) -> list[Check]:
    out = []
    for device in devices:
        for name in names:
            began = time.perf_counter()
            check = replace(run_check(name, device, env), seconds=time.perf_counter() - began)
            on_done(check)
            out.append(check)
    return out


def write_doctor(folder: Path, checks: list[Check], env: EnvInfo) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "doctor.json"
    path.write_text(
        json.dumps(
            {"env": env.to_dict(), "tolerance": TOLERANCE, "checks": [asdict(c) for c in checks]},
            indent=1,
            default=str,
        )
    )
    return path

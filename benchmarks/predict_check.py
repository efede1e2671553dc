"""Predictions against every GPU row there is: each cuda row of a GPU run's studies (by default
the first H100 run's, docs/acceptance-runs/h100-2026-11-26) predicted from this CPU, as
`stbench gpu-vs-cpu` predicts a size on a machine without a GPU.

For each row: what its step is made of, measured here (child/anatomy.py at batches 2 and 8, the
row's own parameters; and, as `gpu-vs-cpu` takes them from its CPU rows, a short CPU training at
the row's batch for its data loading in the step's own thread and the bytes it streams from host
memory), the lower bound and the estimate for the card the row ran on (gpus.toml), the measured
step (the row's batch over its samples/s), measured / bound and the estimate's error; and the
step's memory as `gpu-vs-cpu` predicts it (the workload's own prediction where it has one, else
the anatomy's: runner/predictions.py) against the row's measured peak (`peak_gpu_mb`, the
allocator's most allocated), with its error. The estimate's one fitted figure, eager PyTorch's
host time per operator on the GPU's host (`launch_s`), is fitted on the rows of FIT_WORKLOADS
whose host thread loads no data (the median of each row's measured step, less the host's own
time measured here and its kernels beyond one an operator at the launch floor, over its
operators) and judged on the others: "fitted" says which rows a line's error was fitted on. Set
plan/predict.py's EAGER_LAUNCH_S to it.

    python benchmarks/predict_check.py [--run DIR] [--gpu H100] [--out FILE.csv]

writes FILE.csv (default: predicted.csv inside the run's folder) and prints the table. A test
(tests/test_predict.py) checks the committed file: no bound above its measured step.

    python benchmarks/predict_check.py --gpu H200 --questions results/reference/ref-h200-*

prints, for `gpu-vs-cpu` studies that ran on a GPU, each size's own prediction (made on the
GPU's host from its CPU rows) against its cuda windows: the out-of-sample check, measuring
nothing here. A test holds those bounds below their measured steps too.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd

from stbench.child.anatomy import measure
from stbench.plan.predict import Step, host_launch_s, predict, read_gpus
from stbench.plan.registry import get
from stbench.runner.predictions import memory_mb

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "acceptance-runs" / "h100-2026-11-26"
FIT_WORKLOADS = ("cnn-strain", "lstm-era5")
SMALL = (2, 8)
CPU_STEPS = 20  # steps of the short CPU training that measures a row's loading, where the row
# sets none of its own (a row's max_steps is kept: stnn cuts its two passes in proportion to it,
# and each pass streams and loads its own share)


def cpu_loading(workload: str, params: dict, batch: int, on_host: bool) -> tuple[float, float]:
    """(seconds of data loading a step in the step's own thread, bytes streamed from host memory
    a step) of a short training on this CPU at the row's batch: what `gpu-vs-cpu` reads from its
    CPU rows (runner/predictions.py); the loading counts only with no loader workers and the
    batches cut on the host."""
    from stbench.child.trainer import LoopConfig, Trainer
    from stbench.contract import BuildContext
    from stbench.device import Accelerator
    from stbench.plan.registry import get
    from stbench.plan.spec import RunSpec

    asked = {
        **params,
        "max_steps": int(params.get("max_steps") or CPU_STEPS),
        "max_eval_batches": 1,
    }
    spec = RunSpec(workload, "cpu", "single", batch, 1, params=tuple(sorted(asked.items())))
    task = get(workload).build(asked, BuildContext(0, 0, 1, "cpu"))
    done = Trainer(task, LoopConfig.from_spec(spec), Accelerator("cpu")).run()
    steps = done.figures.steps_done or 1
    serial = done.figures.data_s / steps if on_host and not params.get("workers") else 0.0
    return serial, float(done.extras.get("stream_mb", 0.0)) * 2**20 / steps


def rows_of(run: Path) -> pd.DataFrame:
    found = [pd.read_csv(p) for p in sorted(run.glob("studies/*/runs.csv"))]
    rows = pd.concat(found, ignore_index=True)
    return rows[rows["device"].astype(str).str.startswith("cuda") & (rows["status"] == "ok")]


def config_of(params: dict) -> str:
    """The parameters that tell a workload's rows apart, in words."""
    keys = ("relations", "grid", "batching", "window", "hidden", "layers")
    return " ".join(f"{k}={params[k]}" for k in keys if params.get(k) not in (None, ""))


def fitted_row(row, step: Step) -> bool:
    """Whether a row fits launch_s: one of FIT_WORKLOADS' whose host thread loads no data."""
    return row["workload"] in FIT_WORKLOADS and step.serial_data_s == 0


def against_questions(studies: list[Path], gpu: str) -> pd.DataFrame:
    """Each size of each `gpu-vs-cpu` study that ran on a GPU: the bound and estimate its own
    predicted.csv gives that card (made from the study's CPU rows on the GPU's own host, with the
    shipped constants: nothing in it is fitted on its cuda rows) against the step its cuda windows
    measured there at each precision (the batch over their median samples/s)."""
    out = []
    for study in studies:
        predicted = pd.read_csv(study / "predicted.csv")
        predicted = predicted[predicted["gpu"] == gpu].set_index("size")
        rows = pd.read_csv(study / "runs.csv")
        cuda = rows[rows["device"].astype(str).str.startswith("cuda") & (rows["status"] == "ok")]
        for (batch, precision), here in cuda.groupby(["batch_size", "precision"]):
            if batch not in predicted.index:
                continue
            p = predicted.loc[batch]
            measured_ms = batch / here["samples_per_s"].median() * 1e3
            out.append(
                {
                    "workload": str(here["workload"].iloc[0]),
                    "size": int(batch),
                    "precision": precision,
                    "windows": len(here),
                    "launches": float(p["launches"]),
                    "bound_ms": float(p["bound_ms"]),
                    "bound_by": p["bound_by"],
                    "estimate_ms": float(p["estimate_ms"]),
                    "measured_ms": measured_ms,
                    "measured_over_bound": measured_ms / float(p["bound_ms"]),
                    "estimate_error": float(p["estimate_ms"]) / measured_ms - 1,
                }
            )
    return pd.DataFrame(out)


def main() -> None:
    ask = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ask.add_argument("--run", type=Path, default=RUN)
    ask.add_argument("--gpu", default="H100", help="the card the rows ran on (gpus.toml)")
    ask.add_argument("--out", type=Path)
    ask.add_argument(
        "--questions",
        type=Path,
        nargs="+",
        help="gpu-vs-cpu study folders that ran on --gpu: their own predictions against their "
        "cuda windows (nothing is measured here)",
    )
    args = ask.parse_args()
    if args.questions:
        table = against_questions(args.questions, args.gpu)
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        return
    gpu = read_gpus()[args.gpu]
    lines, anatomy, loading = [], {}, {}
    for _, r in rows_of(args.run).iterrows():
        params = json.loads(r["params"])
        key = r["params"]
        if key not in anatomy:
            anatomy[key] = measure(r["workload"], params, SMALL)
        a, batch = anatomy[key], int(r["batch_size"])
        if (key, batch) not in loading:
            loading[key, batch] = cpu_loading(r["workload"], params, batch, a.data_on_host)
        serial, streamed = loading[key, batch]
        step = Step(
            f"{batch} {config_of(params)}".strip(),
            batch,
            float(r["flops_per_sample"]) * batch,
            a.launches,
            a.state_bytes,
            a.saved_bytes(batch),
            a.batch_bytes(batch),
            a.host_step_s,
            data_s=serial,
            serial_data_s=serial,
            streamed_bytes=streamed,
            operators=a.operators,
            predicted_mb=memory_mb(get(r["workload"]), params, batch, a),
        )
        lines.append((r, step))
    # eager PyTorch's host time per operator: each fitted row's measured step, less the host's
    # own time measured here and its kernels beyond one an operator at the launch floor, over
    # its operators; only rows whose host thread loads no data, where the step less the loading
    # would be a difference of two large figures, the loading measured on another host (this
    # VM's loading varied 1.6x between two days: a fit with it went from 33 to 8 us)
    fitted = [(r, s) for r, s in lines if fitted_row(r, s)]
    fit = [
        (
            int(r["batch_size"]) / float(r["samples_per_s"])
            - s.host_s
            - s.serial_data_s
            - host_launch_s(s, gpu, 0.0)  # its kernels beyond one an operator
        )
        / s.operators
        for r, s in fitted
    ]
    launch_s = statistics.median(fit) if fit else 0.0
    table = []
    for r, s in lines:
        p = predict(s, gpu, launch_s)  # the bound and the estimate, as gpu-vs-cpu predicts them
        measured = int(r["batch_size"]) / float(r["samples_per_s"])
        table.append(
            {
                "workload": r["workload"],
                "run_id": r["run_id"],
                "size": s.size,
                "flops": s.flops,
                "launches": s.launches,
                "operators": s.operators,
                "state_bytes": s.state_bytes,
                "saved_bytes": s.saved_bytes,
                "batch_bytes": s.batch_bytes,
                "host_s": s.host_s,
                "serial_data_s": s.serial_data_s,
                "streamed_bytes": s.streamed_bytes,
                "bound_s": p.bound_s,
                "bound_by": p.bound_by,
                "estimate_s": p.estimate_s,
                "measured_s": measured,
                "measured_over_bound": measured / p.bound_s,
                "estimate_error": p.estimate_s / measured - 1,
                "fitted": fitted_row(r, s),
                "memory_mb": s.predicted_mb,
                "memory_from": "workload" if get(r["workload"]).predict else "anatomy",
                "measured_mb": float(r["peak_gpu_mb"]),
                "memory_error": s.predicted_mb / float(r["peak_gpu_mb"]) - 1,
                "launch_s": launch_s,
                "gpu": gpu.name,
            }
        )
    out = pd.DataFrame(table)
    path = args.out or args.run / "predicted.csv"
    out.to_csv(path, index=False)
    shown = out.assign(
        bound_ms=out["bound_s"] * 1e3,
        estimate_ms=out["estimate_s"] * 1e3,
        measured_ms=out["measured_s"] * 1e3,
    )
    print(
        shown[
            [
                "workload",
                "size",
                "launches",
                "bound_ms",
                "bound_by",
                "estimate_ms",
                "measured_ms",
                "measured_over_bound",
                "estimate_error",
                "fitted",
                "memory_mb",
                "measured_mb",
                "memory_error",
            ]
        ].to_string(index=False, float_format=lambda v: f"{v:.3g}")
    )
    print(
        f"launch_s {launch_s * 1e6:.1f} us (fitted on {len(fit)} rows of "
        f"{', '.join(FIT_WORKLOADS)} whose host thread loads no data); wrote {path}"
    )


if __name__ == "__main__":
    main()
